// StatefulStream against a real in-process tetherd on 127.0.0.1:0, on the
// direct channel and on the gRPC CallStream: a model whose state (64 KiB)
// feeds its next call runs chunk after chunk, and the daemon's own counts
// show that the state never left it (the bytes it sent over all the chunks
// are fewer than one copy of the state, while a naive loop sends a copy per
// chunk and the final download one) and that the session's handles stay as
// many over hundreds of chunks. Also the errors: a carried output that does
// not fit its input, an output index past the outputs, a handle to free
// that does not exist — each clear, none leaking handles, the daemon serving.
#include "client/stateful_stream.h"

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/remote_session.h"
#include "client/remote_vm.h"
#include "gtest/gtest.h"
#include "runtime/core/error.h"
#include "runtime/core/registry.h"
#include "runtime/vm/exec_builder.h"
#include "server/daemon.h"
#include "server/metrics.h"
#include "tests/testing/test_functions.h"

namespace tether::client {
namespace {

constexpr int64_t kStateElements = 16384;  // 64 KiB of float32
constexpr uint64_t kStateBytes = kStateElements * 4;

// What the daemon counts, read by the test: bytes it sent (every path, gRPC
// methods and the direct channel) and its sampled state.
class RecordingMetrics final : public server::DaemonMetrics {
 public:
  void BytesSent(absl::string_view path, uint64_t bytes) override { sent_ += bytes; }
  void SetSampler(std::function<server::MetricsSample()> sampler) override {
    absl::MutexLock lock(&mu_);
    sampler_ = std::move(sampler);
  }
  uint64_t sent() const { return sent_.load(); }
  // The bytes sent, once they reach `at_least` or after 5 s: the daemon
  // counts a reply after writing it, so the client may read the reply
  // before the count includes it.
  uint64_t SentReaching(uint64_t at_least) const {
    const absl::Time deadline = absl::Now() + absl::Seconds(5);
    while (sent_.load() < at_least && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(1));
    return sent_.load();
  }
  uint64_t session_objects() {
    absl::MutexLock lock(&mu_);
    return sampler_ ? sampler_().session_objects : 0;
  }

 private:
  std::atomic<uint64_t> sent_{0};
  absl::Mutex mu_;
  std::function<server::MetricsSample()> sampler_ ABSL_GUARDED_BY(mu_);
};

void RegisterStreamFunctions() {
  static const bool registered = [] {
    // test.stream.accumulate(state [N], chunk [1]) = state + chunk[0]
    EXPECT_TRUE(Registry::RegisterTyped(
                    "test.stream.accumulate",
                    [](Tensor state, Tensor chunk) -> absl::StatusOr<Value> {
                      TETHER_ASSIGN_OR_RETURN(
                          Tensor out, Tensor::Empty(state->shape(), state->dtype(), Device::Cpu()));
                      const float c = static_cast<const float*>(chunk->element_data())[0];
                      const float* s = static_cast<const float*>(state->element_data());
                      float* o = static_cast<float*>(out->element_data());
                      for (int64_t i = 0; i < state->NumElements(); ++i) {
                        o[i] = s[i] + c;
                      }
                      return Value(out);
                    })
                    .ok());
    // test.stream.sum(state) = [sum of state]
    EXPECT_TRUE(
        Registry::RegisterTyped("test.stream.sum", [](Tensor state) -> absl::StatusOr<Value> {
          const int64_t one[] = {1};
          TETHER_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(one, state->dtype(), Device::Cpu()));
          const float* s = static_cast<const float*>(state->element_data());
          double sum = 0;
          for (int64_t i = 0; i < state->NumElements(); ++i) {
            sum += s[i];
          }
          static_cast<float*>(out->element_data())[0] = static_cast<float>(sum);
          return Value(out);
        }).ok());
    return true;
  }();
  (void)registered;
}

// step(chunk, state) = (sum(state'), state') with state' = state + chunk[0].
std::string StreamExecutable() {
  vm::ExecBuilder b;
  b.EmitFunction("step", 2, {"chunk", "state"});
  b.EmitCall("test.stream.accumulate", {vm::Arg::Register(1), vm::Arg::Register(0)}, 2);
  b.EmitCall("test.stream.sum", {vm::Arg::Register(2)}, 3);
  b.EmitCall("vm.builtin.make_tuple", {vm::Arg::Register(3), vm::Arg::Register(2)}, 4);
  b.EmitRet(4);
  b.EndFunction("step");
  auto exec = b.Get();
  EXPECT_TRUE(exec.ok()) << exec.status();
  return exec.ok() ? (*exec)->SaveToBytes() : std::string();
}

Tensor Filled(int64_t n, float value) {
  const int64_t shape[] = {n};
  Tensor t = *Tensor::Empty(shape, DataType::Float(32), Device::Cpu());
  float* p = static_cast<float*>(t->element_data());
  for (int64_t i = 0; i < n; ++i) p[i] = value;
  return t;
}

float First(const Value& v) {
  EXPECT_TRUE(v.is_tensor()) << v.TypeName();
  return v.is_tensor() ? static_cast<const float*>(v.AsRef<TensorObj>()->element_data())[0] : 0;
}

class StatefulStreamTest : public ::testing::TestWithParam<TransportKind> {
 protected:
  void SetUp() override {
    RegisterStreamFunctions();
    server::DaemonOptions options;
    options.listen = {"127.0.0.1:0"};
    options.log_events = false;
    options.metrics = &metrics_;
    auto daemon = server::Daemon::Start(options);
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = std::move(*daemon);
    ConnectOptions connect;
    connect.transport = GetParam();
    auto session = RemoteSession::Connect(daemon_->target(), connect);
    ASSERT_TRUE(session.ok()) << session.status();
    session_ = std::move(*session);
    auto sha = session_->UploadModule(StreamExecutable());
    ASSERT_TRUE(sha.ok()) << sha.status();
    RemoteVmOptions vm_options;
    vm_options.transport = GetParam();
    auto vm = RemoteVM::Create(session_.get(), *sha, {}, "", vm_options);
    ASSERT_TRUE(vm.ok()) << vm.status();
    vm_ = std::move(*vm);
  }
  void TearDown() override {
    vm_.reset();
    session_.reset();
    if (daemon_) daemon_->Shutdown();
    daemon_.reset();
  }

  RecordingMetrics metrics_;  // outlives the daemon
  std::unique_ptr<server::Daemon> daemon_;
  std::unique_ptr<RemoteSession> session_;
  std::unique_ptr<RemoteVM> vm_;
};

TEST_P(StatefulStreamTest, StateStaysOnTheDaemonAndHandlesStayFlat) {
  ASSERT_EQ(vm_->transport(), GetParam());
  auto stream = StatefulStream::Create(vm_.get(), "step",
                                       {Value(), Value(Filled(kStateElements, 1.0f))}, {{1, 1}});
  ASSERT_TRUE(stream.ok()) << stream.status();
  constexpr int kChunks = 300;
  const uint64_t sent_before = metrics_.sent();
  uint64_t objects_after_first = 0;
  double added = 0;
  for (int i = 1; i <= kChunks; ++i) {
    const float c = static_cast<float>(i % 7) * 0.25f;
    added += c;
    const std::pair<int, Value> chunk[] = {{0, Value(Filled(1, c))}};
    auto out = (*stream)->Step(chunk);
    ASSERT_TRUE(out.ok()) << "chunk " << i << ": " << out.status();
    ASSERT_EQ(out->size(), 2u);
    // The output is exact: every element of the state is 1 + the sum of the chunks so far.
    ASSERT_FLOAT_EQ(First((*out)[0]), static_cast<float>((1.0 + added) * kStateElements))
        << "chunk " << i;
    const RemoteHandleObj* state = AsRemoteHandle((*out)[1]);
    ASSERT_NE(state, nullptr) << "the carried output came back as " << (*out)[1].TypeName();
    if (i == 1) objects_after_first = metrics_.session_objects();
    ASSERT_EQ(metrics_.session_objects(), objects_after_first) << "after chunk " << i;
  }
  // The VM, the state: the handles of one chunk, whatever the count of chunks.
  EXPECT_EQ(objects_after_first, 2u);
  // 300 chunks of outputs and replies in fewer bytes than one copy of the state.
  const uint64_t streamed = metrics_.sent() - sent_before;
  EXPECT_LT(streamed, kStateBytes) << "the daemon sent " << streamed << " bytes for " << kChunks
                                   << " chunks; the state alone is " << kStateBytes;

  // The one download of the state, at the end: the count sees it.
  const uint64_t before_download = metrics_.sent();
  auto state = (*stream)->DownloadState(1);
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_GE(metrics_.SentReaching(before_download + kStateBytes) - before_download, kStateBytes);
  ASSERT_EQ((*state)->NumElements(), kStateElements);
  EXPECT_FLOAT_EQ(static_cast<const float*>((*state)->element_data())[kStateElements - 1],
                  static_cast<float>(1.0 + added));

  // Closing frees the state: the VM is all that is left.
  ASSERT_TRUE((*stream)->Close().ok());
  EXPECT_EQ(metrics_.session_objects(), 1u);
  const std::pair<int, Value> chunk[] = {{0, Value(Filled(1, 1.0f))}};
  EXPECT_EQ((*stream)->Step(chunk).status().code(), absl::StatusCode::kFailedPrecondition);
}

// The control: the naive loop, the state up and down each call, moves a copy
// per chunk through the same count.
TEST_P(StatefulStreamTest, NaiveLoopSendsTheStateEveryChunk) {
  constexpr int kChunks = 5;
  Value state(Filled(kStateElements, 0.0f));
  const uint64_t sent_before = metrics_.sent();
  for (int i = 0; i < kChunks; ++i) {
    const Value args[] = {Value(Filled(1, 1.0f)), state};
    auto out = vm_->Invoke("step", args);
    ASSERT_TRUE(out.ok()) << out.status();
    state = out->AsRef<TupleObj>()->fields[1];
    ASSERT_TRUE(state.is_tensor());
  }
  EXPECT_GE(metrics_.SentReaching(sent_before + kChunks * kStateBytes) - sent_before,
            kChunks * kStateBytes);
  EXPECT_FLOAT_EQ(First(state), static_cast<float>(kChunks));
}

TEST_P(StatefulStreamTest, CarriedOutputThatDoesNotFitLeavesTheStateAndNoHandles) {
  // Output 0 is [1], input 1 is [16384].
  auto stream = StatefulStream::Create(vm_.get(), "step",
                                       {Value(), Value(Filled(kStateElements, 2.0f))}, {{0, 1}});
  ASSERT_TRUE(stream.ok()) << stream.status();
  const uint64_t objects = metrics_.session_objects();
  const std::pair<int, Value> chunk[] = {{0, Value(Filled(1, 1.0f))}};
  auto out = (*stream)->Step(chunk);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("carried output 0 is float32 [1], but input 1 it feeds "
                                        "is float32 [16384]"),
            std::string::npos)
      << out.status();
  EXPECT_EQ(metrics_.session_objects(), objects);
  // The first state is still there, untouched.
  auto state = (*stream)->DownloadState(1);
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_FLOAT_EQ(static_cast<const float*>((*state)->element_data())[0], 2.0f);
}

TEST_P(StatefulStreamTest, OutputPastTheOutputsIsAnIndexErrorAndKeepsNothing) {
  auto stream = StatefulStream::Create(vm_.get(), "step",
                                       {Value(), Value(Filled(kStateElements, 0.0f))}, {{2, 1}});
  ASSERT_TRUE(stream.ok()) << stream.status();
  const uint64_t objects = metrics_.session_objects();
  const std::pair<int, Value> chunk[] = {{0, Value(Filled(1, 1.0f))}};
  auto out = (*stream)->Step(chunk);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(GetErrorKind(out.status()), ErrorKind::kIndex);
  EXPECT_NE(out.status().message().find("handle_outputs names output 2 of step, which returned 2 "
                                        "outputs"),
            std::string::npos)
      << out.status();
  EXPECT_EQ(metrics_.session_objects(), objects);
  // The daemon goes on serving: a right stream on the same session runs.
  auto good = StatefulStream::Create(vm_.get(), "step",
                                     {Value(), Value(Filled(kStateElements, 0.0f))}, {{1, 1}});
  ASSERT_TRUE(good.ok()) << good.status();
  auto ran = (*good)->Step(chunk);
  ASSERT_TRUE(ran.ok()) << ran.status();
  EXPECT_FLOAT_EQ(First((*ran)[0]), static_cast<float>(kStateElements));
}

TEST_P(StatefulStreamTest, UnknownHandleToFreeIsRefusedBeforeTheCallRuns) {
  auto state = session_->UploadTensor(Filled(kStateElements, 0.0f));
  ASSERT_TRUE(state.ok()) << state.status();
  const Value args[] = {Value(Filled(1, 1.0f)), *state};
  const uint32_t keep[] = {1};
  const uint64_t bogus[] = {AsRemoteHandle(*state)->id(), 999999};
  const uint64_t objects = metrics_.session_objects();
  auto out = vm_->InvokeKeeping("step", args, keep, bogus);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(out.status().message().find("free_on_success names handle 999999"), std::string::npos)
      << out.status();
  // Nothing ran, nothing was freed: the state is still there.
  EXPECT_EQ(metrics_.session_objects(), objects);
  EXPECT_TRUE(session_->DownloadTensor(*state).ok());
  // Freed with the call when every id exists.
  const uint64_t previous[] = {AsRemoteHandle(*state)->id()};
  out = vm_->InvokeKeeping("step", args, keep, previous);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(metrics_.session_objects(), objects);  // one state freed, one made
  EXPECT_EQ(session_->DownloadTensor(*state).status().code(), absl::StatusCode::kNotFound);
}

TEST_P(StatefulStreamTest, CreateRefusesBadCarries) {
  const std::vector<Value> inputs = {Value(), Value(Filled(4, 0.0f))};
  struct Case {
    std::vector<CarriedState> carries;
    const char* message;
  };
  const Case cases[] = {
      {{{1, 2}}, "carried input 2 is out of range; it takes 2 inputs"},
      {{{1, 1}, {0, 1}}, "input 1 is carried twice"},
      {{{1, 1}, {1, 0}}, "output 1 is carried twice"},
      {{{1, 0}}, "carried input 0 needs a first value that is a tensor, got None"},
  };
  for (const Case& c : cases) {
    auto stream = StatefulStream::Create(vm_.get(), "step", inputs, c.carries);
    ASSERT_FALSE(stream.ok()) << c.message;
    EXPECT_EQ(stream.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(stream.status().message().find(c.message), std::string::npos) << stream.status();
  }
  auto wrong_count = StatefulStream::Create(vm_.get(), "step", {Value()}, {});
  EXPECT_EQ(wrong_count.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(metrics_.session_objects(), 1u);  // the VM only: nothing was uploaded
}

INSTANTIATE_TEST_SUITE_P(Transports, StatefulStreamTest,
                         ::testing::Values(TransportKind::kDirect, TransportKind::kStream),
                         [](const ::testing::TestParamInfo<TransportKind>& info) {
                           return std::string(TransportKindName(info.param));
                         });

}  // namespace
}  // namespace tether::client
