// StaticPlanBlockMemory on hand-built call_tir chains: storage reuse after
// the last use, escaping outputs, aliases through views, symbolic shapes and
// the destination-passing form the VM code generator consumes.
#include "compiler/transform/memory_plan.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/compiler/transform_test_util.h"

namespace tether::compiler {
namespace {

using testing::BindingsCalling;
using testing::CallTIR;
using testing::F32;
using testing::FunctionSketch;
using ::testing::HasSubstr;

constexpr int64_t kMiB = 1 << 20;

IRModule ModuleOf(Expr main, std::vector<std::string> kernels = {"k", "k2"}) {
  IRModule m;
  m.functions["main"] = std::move(main);
  for (const std::string& k : kernels) m.kernels[k] = testing::EmptyKernel(k);
  return m;
}

// The storage var an R.memory.alloc_tensor binding of `name` draws from.
const VarNode* StorageOf(const IRModule& m, const std::string& name) {
  for (const Binding& b : BindingsCalling(m, "relax.memory.alloc_tensor")) {
    if (b.var.as<VarNode>()->name_hint == name)
      return b.value.as<CallNode>()->args[0].as<VarNode>();
  }
  return nullptr;
}

// x -> a -> b -> c -> gv, each 256 x 1024 float32 (1 MiB); gv returned.
IRModule FourOpChain() {
  FunctionSketch f;
  StructInfo s = F32({256, 1024});
  Expr x = f.Param("x", s);
  Expr a = f.Bind(CallTIR("k", {x}, s), s, "a");
  Expr b = f.Bind(CallTIR("k", {a}, s), s, "b");
  Expr c = f.Bind(CallTIR("k", {b}, s), s, "c");
  Expr gv = f.Output(CallTIR("k", {c}, s), s, "gv");
  return ModuleOf(f.Finish(gv));
}

TEST(StaticPlanBlockMemoryTest, ChainOfFourReusesTwoStorages) {
  auto planned = StaticPlanBlockMemory(FourOpChain());
  ASSERT_TRUE(planned.ok()) << planned.status();
  auto peak = PlannedPeakBytes(*planned, "main");
  ASSERT_TRUE(peak.ok()) << peak.status();
  EXPECT_EQ(*peak, 2 * kMiB);
  EXPECT_EQ(BindingsCalling(*planned, "relax.memory.alloc_storage").size(), 2u);
  // a and c share a storage (a is dead once b is computed); b has the other.
  EXPECT_EQ(StorageOf(*planned, "a"), StorageOf(*planned, "c"));
  EXPECT_NE(StorageOf(*planned, "a"), StorageOf(*planned, "b"));
  EXPECT_TRUE(BindingsCalling(*planned, "relax.call_tir").empty());
}

TEST(StaticPlanBlockMemoryTest, ReturnedTensorGetsItsOwnAllocation) {
  auto planned = StaticPlanBlockMemory(FourOpChain());
  ASSERT_TRUE(planned.ok()) << planned.status();
  auto runtime = BindingsCalling(*planned, "relax.builtin.alloc_tensor");
  ASSERT_EQ(runtime.size(), 1u);
  EXPECT_EQ(runtime[0].var.as<VarNode>()->name_hint, "gv");
  EXPECT_EQ(StorageOf(*planned, "gv"), nullptr);
}

TEST(StaticPlanBlockMemoryTest, EmitsDestinationPassingCalls) {
  auto planned = StaticPlanBlockMemory(FourOpChain());
  ASSERT_TRUE(planned.ok()) << planned.status();
  std::vector<Binding> all = testing::Bindings(*planned);
  // Storages first, then per tensor: the allocation and the kernel call.
  ASSERT_EQ(all.size(), 2u + 4u * 2u);
  const Binding& alloc_a = all[2];
  const Binding& call_a = all[3];
  EXPECT_EQ(alloc_a.var.as<VarNode>()->name_hint, "a");
  const auto* call = call_a.value.as<CallNode>();
  ASSERT_NE(call, nullptr);
  const auto* gv = call->op.as<GlobalVarNode>();
  ASSERT_NE(gv, nullptr);
  EXPECT_EQ(gv->name_hint, "k");
  ASSERT_EQ(call->args.size(), 2u);  // x, then the output a
  EXPECT_EQ(call->args[0].as<VarNode>()->name_hint, "x");
  EXPECT_TRUE(call->args[1].same_as(alloc_a.var));
  const auto* ret = call_a.value.struct_info().as<TupleStructInfoNode>();
  ASSERT_NE(ret, nullptr);
  EXPECT_TRUE(ret->fields.empty());
  // The storage allocation: R.shape([bytes]), R.prim_value(0), R.str("global"), R.dtype("uint8").
  const auto* storage = all[0].value.as<CallNode>();
  ASSERT_EQ(storage->args.size(), 4u);
  EXPECT_EQ(*storage->args[0].as<ShapeExprNode>()->values[0].as_int(), kMiB);
  EXPECT_EQ(storage->args[2].as<StringImmNode>()->value, "global");
  EXPECT_EQ(storage->args[3].as<DataTypeImmNode>()->value, DataType::UInt(8));
}

TEST(StaticPlanBlockMemoryTest, DataflowBlocksBecomeOrdinaryBlocks) {
  auto planned = StaticPlanBlockMemory(FourOpChain());
  ASSERT_TRUE(planned.ok()) << planned.status();
  const auto* seq = planned->Lookup("main").as<FunctionNode>()->body.as<SeqExprNode>();
  for (const BindingBlock& block : seq->blocks) {
    EXPECT_FALSE(block.is_dataflow);
    for (const Binding& b : block.bindings) {
      EXPECT_NE(b.var.kind(), ExprKind::kDataflowVar) << b.var.as<VarNode>()->name_hint;
    }
  }
  // The returned variable is the one the last kernel writes.
  std::vector<Binding> bindings = testing::Bindings(*planned);
  const Binding* gv = testing::FindBinding(bindings, "gv");
  ASSERT_NE(gv, nullptr);
  EXPECT_TRUE(seq->body.same_as(gv->var));
}

TEST(StaticPlanBlockMemoryTest, TensorStillReadLaterIsNotOverwritten) {
  // a = k(x); b = k(a); c = k2(a, b); gv = k(c): a is read by c, so c and b
  // cannot take a's storage.
  FunctionSketch f;
  StructInfo s = F32({256, 1024});
  Expr x = f.Param("x", s);
  Expr a = f.Bind(CallTIR("k", {x}, s), s, "a");
  Expr b = f.Bind(CallTIR("k", {a}, s), s, "b");
  Expr c = f.Bind(CallTIR("k2", {a, b}, s), s, "c");
  Expr gv = f.Output(CallTIR("k", {c}, s), s, "gv");
  auto planned = StaticPlanBlockMemory(ModuleOf(f.Finish(gv)));
  ASSERT_TRUE(planned.ok()) << planned.status();
  EXPECT_NE(StorageOf(*planned, "a"), StorageOf(*planned, "b"));
  EXPECT_NE(StorageOf(*planned, "c"), StorageOf(*planned, "a"));
  EXPECT_NE(StorageOf(*planned, "c"), StorageOf(*planned, "b"));
  EXPECT_EQ(*PlannedPeakBytes(*planned, "main"), 3 * kMiB);
}

TEST(StaticPlanBlockMemoryTest, ViewKeepsItsSourceAlive) {
  // a = k(x); v = reshape view of a; b = k(x); c = k2(v, b): a lives as long as v.
  FunctionSketch f;
  StructInfo s = F32({256, 1024});
  StructInfo flat = F32({256 * 1024});
  Expr x = f.Param("x", s);
  Expr a = f.Bind(CallTIR("k", {x}, s), s, "a");
  Expr view =
      MakeCall(GetOp("relax.call_pure_packed"),
               {MakeExternFunc("vm.builtin.reshape"), a, MakeShapeExpr({256 * 1024})}, {}, {flat});
  Expr v = f.Bind(view, flat, "v");
  Expr b = f.Bind(CallTIR("k", {x}, s), s, "b");
  Expr c = f.Bind(CallTIR("k2", {v, b}, flat), flat, "c");
  Expr gv = f.Output(CallTIR("k", {c}, flat), flat, "gv");
  auto planned = StaticPlanBlockMemory(ModuleOf(f.Finish(gv)));
  ASSERT_TRUE(planned.ok()) << planned.status();
  EXPECT_NE(StorageOf(*planned, "a"), StorageOf(*planned, "b"));
}

TEST(StaticPlanBlockMemoryTest, ReusesAcrossDtypesBestFitBySize) {
  // a (1 MiB) and b (64 KiB) both die at c; d (64 KiB of int8) then takes
  // the smallest free storage that fits: b's, not a's.
  FunctionSketch f;
  StructInfo big = F32({256, 1024});
  StructInfo small = F32({16, 1024});
  StructInfo bytes = TensorSInfo({64 * 1024}, DataType::Int(8));
  Expr x = f.Param("x", big);
  Expr a = f.Bind(CallTIR("k", {x}, big), big, "a");
  Expr b = f.Bind(CallTIR("k", {x}, small), small, "b");
  Expr c = f.Bind(CallTIR("k2", {a, b}, big), big, "c");
  Expr d = f.Bind(CallTIR("k", {c}, bytes), bytes, "d");
  Expr gv = f.Output(CallTIR("k", {d}, bytes), bytes, "gv");
  auto planned = StaticPlanBlockMemory(ModuleOf(f.Finish(gv)));
  ASSERT_TRUE(planned.ok()) << planned.status();
  EXPECT_EQ(StorageOf(*planned, "d"), StorageOf(*planned, "b"));
  EXPECT_NE(StorageOf(*planned, "c"), StorageOf(*planned, "a"));
  EXPECT_EQ(*PlannedPeakBytes(*planned, "main"), 2 * kMiB + 64 * 1024);
}

TEST(StaticPlanBlockMemoryTest, SymbolicShapesFallBackToRuntimeAllocation) {
  FunctionSketch f;
  Var n("n");
  StructInfo s = F32({n, 4});
  Expr x = f.Param("x", s);
  Expr a = f.Bind(CallTIR("k", {x}, s), s, "a");
  Expr gv = f.Output(CallTIR("k", {a}, s), s, "gv");
  auto planned = StaticPlanBlockMemory(ModuleOf(f.Finish(gv)));
  ASSERT_TRUE(planned.ok()) << planned.status();
  EXPECT_TRUE(BindingsCalling(*planned, "relax.memory.alloc_storage").empty());
  auto runtime = BindingsCalling(*planned, "relax.builtin.alloc_tensor");
  ASSERT_EQ(runtime.size(), 2u);
  const auto* shape = runtime[0].value.as<CallNode>()->args[0].as<ShapeExprNode>();
  ASSERT_NE(shape, nullptr);
  EXPECT_TRUE(shape->values[0].same_as(n));
  EXPECT_EQ(*PlannedPeakBytes(*planned, "main"), 0);
}

TEST(StaticPlanBlockMemoryTest, TupleOutputsAreAllocatedAndRepacked) {
  FunctionSketch f;
  StructInfo s = F32({4});
  StructInfo pair = TupleSInfo({s, s});
  Expr x = f.Param("x", s);
  Expr t = f.Bind(CallTIR("k", {x}, pair), pair, "t");
  Expr gv = f.Output(MakeTupleGetItem(t, 1), s, "gv");
  auto planned = StaticPlanBlockMemory(ModuleOf(f.Finish(gv)));
  ASSERT_TRUE(planned.ok()) << planned.status();
  EXPECT_EQ(BindingsCalling(*planned, "relax.builtin.alloc_tensor").size(), 2u);
  std::vector<Binding> bindings = testing::Bindings(*planned);
  const Binding* tb = testing::FindBinding(bindings, "t");
  ASSERT_NE(tb, nullptr);
  const auto* tuple = tb->value.as<TupleNode>();
  ASSERT_NE(tuple, nullptr);
  EXPECT_EQ(tuple->fields.size(), 2u);
}

TEST(StaticPlanBlockMemoryTest, RejectsCallToUnknownKernel) {
  FunctionSketch f;
  StructInfo s = F32({4});
  Expr x = f.Param("x", s);
  Expr gv = f.Output(CallTIR("missing", {x}, s), s, "gv");
  auto planned = StaticPlanBlockMemory(ModuleOf(f.Finish(gv)));
  EXPECT_EQ(planned.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(planned.status().message(), HasSubstr("missing is not a kernel"));
}

TEST(StaticPlanBlockMemoryTest, PeakOfUnknownFunctionIsNotFound) {
  auto peak = PlannedPeakBytes(FourOpChain(), "nope");
  EXPECT_EQ(peak.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(peak.status().message(), HasSubstr("nope"));
}

}  // namespace
}  // namespace tether::compiler
