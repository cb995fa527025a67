// End to end through a real daemon: a Relax text model built by Build(),
// uploaded to an in-process tetherd on 127.0.0.1:0 and run through
// client::RemoteVM, compared with a C++ reference. The daemon loads the
// embedded kernel library exactly as a board's tetherd would.
#include <random>

#include "client/remote_session.h"
#include "client/remote_vm.h"
#include "compiler/build.h"
#include "compiler/text/parser.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/daemon.h"
#include "tests/testing/test_functions.h"

namespace tether::compiler {
namespace {

using ::testing::HasSubstr;
using tether::testing::MakeFloatTensor;
using tether::testing::ReadFloats;

constexpr char kScaleAdd[] = R"(
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 3), "float32"), y: R.Tensor(("n", 3), "float32")) -> R.Tensor(("n", 3), "float32"):
        with R.dataflow():
            lv0 = R.add(x, y)
            gv = R.multiply(lv0, y)
            R.output(gv)
        return gv
)";

TEST(E2ERemoteTest, BuiltExecutableRunsOnTetherd) {
  auto module = ParseModule(kScaleAdd);
  ASSERT_TRUE(module.ok()) << module.status();
  auto exec = Build(*module, {});
  ASSERT_TRUE(exec.ok()) << exec.status();

  server::DaemonOptions options;
  options.listen = {"127.0.0.1:0"};
  auto daemon = server::Daemon::Start(options);
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  {
    auto session = client::RemoteSession::Connect((*daemon)->target());
    ASSERT_TRUE(session.ok()) << session.status();
    auto sha = (*session)->UploadModule((*exec)->SaveToBytes());
    ASSERT_TRUE(sha.ok()) << sha.status();
    auto vm = client::RemoteVM::Create(session->get(), *sha, {Device::Cpu()});
    ASSERT_TRUE(vm.ok()) << vm.status();
    for (int64_t n : {2, 4}) {
      std::vector<float> x(static_cast<size_t>(n * 3)), y(x.size()), want(x.size());
      for (size_t i = 0; i < x.size(); ++i) {
        x[i] = 0.5f * static_cast<float>(i);
        y[i] = 1.0f - 0.25f * static_cast<float>(i);
        want[i] = (x[i] + y[i]) * y[i];
      }
      Value args[] = {MakeFloatTensor({n, 3}, x), MakeFloatTensor({n, 3}, y)};
      auto out = (*vm)->Invoke("main", args);
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_EQ(ReadFloats(Tensor(out->AsRef<TensorObj>())), want);
    }
    Value bad[] = {MakeFloatTensor({2, 3}, std::vector<float>(6, 0.0f)),
                   MakeFloatTensor({3, 3}, std::vector<float>(9, 0.0f))};
    auto out = (*vm)->Invoke("main", bad);
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(out.status().message(),
                HasSubstr("main: parameter y (annotated R.Tensor((n, 3), \"float32\")): shape[0]"));
  }
  (*daemon)->Shutdown();
}

}  // namespace
}  // namespace tether::compiler
