// Weights on the device through a real daemon: param files in the store
// beside modules, CreateVm with params_sha256, calls that pass the data
// inputs only, and the refusals (a corrupt file, a tensor no function takes,
// a shape the module's signature refuses) after which the daemon serves on.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/module/param_dict.h"
#include "runtime/vm/executable.h"
#include "tests/server/daemon_fixture.h"

namespace tether::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using tether::testing::MakeFloatTensor;

std::string ParamBytes(const ParamList& params) {
  absl::StatusOr<std::string> bytes = SaveParamDict(params);
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  return bytes.ok() ? *bytes : std::string();
}

// The session test executable (main(a, b) = a + b, swap(a, b) = (b, a),
// ...) with the parameter types of main and swap recorded as a compiled
// one records them (metadata "param_types.<f>").
std::string TypedExecutable() {
  auto exec = vm::Executable::LoadFromBytes(tether::testing::SessionTestExecutable());
  EXPECT_TRUE(exec.ok()) << exec.status();
  (*exec)->metadata["param_types.main"] = "float32[?]\nfloat32[3]";
  (*exec)->metadata["param_types.swap"] = "float32[*]\n?[*]";
  return (*exec)->SaveToBytes();
}

class ParamsTest : public DaemonTest {
 protected:
  std::string UploadBytes(const std::string& bytes) {
    std::string sha = rpc::Sha256Hex(bytes);
    grpc::Status s = Upload(bytes, sha, bytes.size());
    EXPECT_TRUE(s.ok()) << s.error_message();
    return sha;
  }

  grpc::Status CreateVmWith(const std::string& session, const std::string& module,
                            const std::string& params, v1::CallResponse* resp) {
    v1::CallRequest req;
    req.set_session_id(session);
    req.mutable_create_vm()->set_module_sha256(module);
    req.mutable_create_vm()->set_params_sha256(params);
    return Call(req, resp);
  }

  grpc::Status Invoke(const std::string& session, uint64_t vm, const std::string& function,
                      std::vector<v1::Value> args, v1::CallResponse* resp) {
    v1::CallRequest req;
    req.set_session_id(session);
    req.mutable_invoke()->set_vm_id(vm);
    req.mutable_invoke()->set_function(function);
    for (v1::Value& a : args) *req.mutable_invoke()->add_args() = std::move(a);
    return Call(req, resp);
  }

  // The daemon still creates and runs VMs (without params).
  void ExpectStillServing(const std::string& session) {
    uint64_t vm = CreateVm(session, UploadExec());
    v1::CallResponse resp;
    grpc::Status s =
        Invoke(session, vm, "main",
               {FloatTensorValue({2}, {1, 2}), FloatTensorValue({2}, {10, 20})}, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_THAT(Floats(resp.value()), ElementsAre(11, 22));
  }
};

TEST_F(ParamsTest, BoundWeightsFillTheParametersOfTheirName) {
  std::string session = Open();
  std::string module = UploadBytes(TypedExecutable());
  std::string params = UploadBytes(ParamBytes({{"b", MakeFloatTensor({3}, {100, 200, 300})}}));
  v1::HasModuleRequest has;
  has.set_sha256(params);
  v1::HasModuleResponse present;
  grpc::ClientContext ctx;
  ASSERT_TRUE(stub_->HasModule(&ctx, has, &present).ok());
  EXPECT_TRUE(present.present());

  v1::CallResponse created;
  grpc::Status s = CreateVmWith(session, module, params, &created);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(created.create_vm().functions_size(), 4);  // main, swap, pair, loop
  const v1::FunctionInfo& main = created.create_vm().functions(0);
  EXPECT_EQ(main.name(), "main");
  EXPECT_EQ(main.num_args(), 1);
  EXPECT_THAT(main.param_names(), ElementsAre("a"));
  EXPECT_THAT(main.bound_param_names(), ElementsAre("b"));
  const uint64_t vm = created.create_vm().vm_id();

  v1::CallResponse out;
  s = Invoke(session, vm, "main", {FloatTensorValue({3}, {1, 2, 3})}, &out);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_THAT(Floats(out.value()), ElementsAre(101, 202, 303));
  // Every function with a parameter of the name takes the weight.
  s = Invoke(session, vm, "swap", {FloatTensorValue({1}, {7})}, &out);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_THAT(Floats(out.value().tuple().fields(0)), ElementsAre(100, 200, 300));

  // Passing the weight too is a wrong argument count that says why.
  s = Invoke(session, vm, "main",
             {FloatTensorValue({3}, {1, 2, 3}), FloatTensorValue({3}, {1, 2, 3})}, &out);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("expects 1 argument (a), got 2; b is bound"));

  v1::CallRequest info;
  info.set_session_id(session);
  info.mutable_get_function_info()->set_vm_id(vm);
  info.mutable_get_function_info()->set_function("main");
  s = Call(info, &out);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(out.function_info().num_args(), 1);
  EXPECT_THAT(out.function_info().bound_param_names(), ElementsAre("b"));

  // The stateful API takes the data inputs only, too.
  v1::CallRequest set;
  set.set_session_id(session);
  set.mutable_set_input()->set_vm_id(vm);
  set.mutable_set_input()->set_function("main");
  *set.mutable_set_input()->add_args() = FloatTensorValue({3}, {0, 0, 1});
  ASSERT_TRUE(Call(set, &out).ok());
  v1::CallRequest run;
  run.set_session_id(session);
  run.mutable_invoke_stateful()->set_vm_id(vm);
  run.mutable_invoke_stateful()->set_function("main");
  ASSERT_TRUE(Call(run, &out).ok());
  v1::CallRequest get;
  get.set_session_id(session);
  get.mutable_get_outputs()->set_vm_id(vm);
  get.mutable_get_outputs()->set_function("main");
  s = Call(get, &out);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_THAT(Floats(out.value()), ElementsAre(100, 200, 301));
}

TEST_F(ParamsTest, CorruptParamFileIsRefusedAndTheDaemonServesOn) {
  std::string session = Open();
  std::string module = UploadBytes(TypedExecutable());
  std::string good = ParamBytes({{"b", MakeFloatTensor({3}, {1, 2, 3})}});
  std::string truncated = UploadBytes(good.substr(0, good.size() - 5));
  v1::CallResponse resp;
  grpc::Status s = CreateVmWith(session, module, truncated, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr(absl::StrCat("param file ", truncated.substr(0, 12),
                                                        " is not a valid param dict")));
  EXPECT_THAT(s.error_message(), HasSubstr("truncated param dict"));
  // A module named as the param file is refused the same way.
  s = CreateVmWith(session, module, module, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("is not a valid param dict"));
  ExpectStillServing(session);
}

TEST_F(ParamsTest, MismatchesBetweenParamsAndModuleAreRefusedWithBothNamed) {
  std::string session = Open();
  std::string module = UploadBytes(TypedExecutable());
  v1::CallResponse resp;

  std::string wide = UploadBytes(ParamBytes({{"b", MakeFloatTensor({4}, {1, 2, 3, 4})}}));
  grpc::Status s = CreateVmWith(session, module, wide, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(),
              HasSubstr(absl::StrCat("param file ", wide.substr(0, 12),
                                     " has b as float32[4], but parameter b of main in module ",
                                     module.substr(0, 12), " is float32[3]")));

  Tensor ints = MakeFloatTensor({3}, {1, 2, 3});
  auto as_int = Tensor::Empty(std::vector<int64_t>{3}, DataType::Int(32), Device::Cpu());
  ASSERT_TRUE(as_int.ok());
  std::string wrong_dtype = UploadBytes(ParamBytes({{"b", *as_int}}));
  s = CreateVmWith(session, module, wrong_dtype, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("has b as int32[3], but parameter b of main"));

  std::string unknown = UploadBytes(ParamBytes({{"b", ints}, {"w9", ints}}));
  s = CreateVmWith(session, module, unknown, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(
      s.error_message(),
      HasSubstr(absl::StrCat("has tensor w9, which no function of module ", module.substr(0, 12),
                             " takes as a parameter (main takes a, b)")));

  std::string absent(64, 'c');
  s = CreateVmWith(session, module, absent, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  s = CreateVmWith(session, module, "../etc/passwd", &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  ExpectStillServing(session);
}

TEST_F(ParamsTest, ParamFilesShareTheQuotaAndAreNotEvictedWhileInUse) {
  std::string module_bytes = TypedExecutable();
  std::string big = ParamBytes({{"b", MakeFloatTensor({3}, {1, 2, 3})},
                                {"a", MakeFloatTensor({4000}, std::vector<float>(4000, 1))}});
  // Room for the module and one param file, not two.
  StartDaemon(absl::Minutes(10), [&](DaemonOptions& o) {
    o.store_quota_bytes = module_bytes.size() + big.size() + 1000;
  });
  std::string session = Open();
  std::string module = UploadBytes(module_bytes);
  std::string params = UploadBytes(big);
  v1::CallResponse created;
  grpc::Status s = CreateVmWith(session, module, params, &created);
  ASSERT_TRUE(s.ok()) << s.error_message();
  // Both pinned by the VM: a second param file does not fit.
  std::string other = ParamBytes({{"b", MakeFloatTensor({3}, {4, 5, 6})},
                                  {"a", MakeFloatTensor({4000}, std::vector<float>(4000, 2))}});
  s = Upload(other, rpc::Sha256Hex(other), other.size());
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_THAT(StoreFiles(), ::testing::UnorderedElementsAre(module, params));
  // Destroying the VM gives the pins back: the new file evicts the old one.
  v1::CallRequest destroy;
  destroy.set_session_id(session);
  destroy.mutable_destroy_vm()->set_vm_id(created.create_vm().vm_id());
  v1::CallResponse resp;
  ASSERT_TRUE(Call(destroy, &resp).ok());
  std::string other_sha = UploadBytes(other);
  EXPECT_THAT(StoreFiles(), ::testing::Contains(other_sha));
  EXPECT_THAT(StoreFiles(), ::testing::Not(::testing::Contains(params)));
  UploadBytes(module_bytes);  // evicted too if it was used less recently
  s = CreateVmWith(session, module, other_sha, &created);
  ASSERT_TRUE(s.ok()) << s.error_message();
  s = Invoke(session, created.create_vm().vm_id(), "swap", {}, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_THAT(Floats(resp.value().tuple().fields(0)), ElementsAre(4, 5, 6));
}

}  // namespace
}  // namespace tether::server
