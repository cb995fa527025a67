// The ONNX importer's internals, shared by its two files: importer.cc (the
// graph walk, node contexts, inputs and initializers) and control_flow.cc
// (If, Loop, Scan and SequenceMap: subgraphs, outer-scope captures, loop
// functions).
// Not part of the library's interface; converters see only converter.h.
//
// A graph -- the model's, or a subgraph of If/Loop/Scan -- is converted into
// a list of binding blocks: runs of ordinary nodes become dataflow blocks,
// and each control-flow node closes the run and gets a binding block of its
// own (Relax allows no If inside a dataflow block). A value defined in one
// run and read after it (by a later node, a subgraph or as a graph output)
// is re-bound as an output var of its block, so it stays visible.
//
// Thread contract: thread-hostile; one GraphImporter per import.
#ifndef TETHER_COMPILER_FRONTEND_ONNX_GRAPH_IMPORTER_H_
#define TETHER_COMPILER_FRONTEND_ONNX_GRAPH_IMPORTER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compiler/frontend/onnx/converter.h"
#include "compiler/frontend/onnx/importer.h"
#include "compiler/relax/block_builder.h"
#include "onnx/onnx_pb.h"

namespace tether::compiler::onnx_frontend {

// A name usable as a symbolic var or function name in the text format.
std::string SymbolName(const std::string& name);

// The DynamicType of a sequence(tensor), optional(tensor) or
// optional(sequence(tensor)) type; nullopt for a tensor type; UNIMPLEMENTED
// naming `what` for anything else (maps, nested sequences). A dim_param is
// the var `dim_vars` holds for it (added when new), or undefined without.
absl::StatusOr<std::optional<DynamicType>> DynamicTypeOf(
    const ::onnx::TypeProto& type, absl::string_view what,
    std::map<std::string, Var>* dim_vars = nullptr);

class GraphImporter;

using DynamicTypes = std::vector<std::optional<DynamicType>>;

// The ConvertContext of one node.
class NodeContext final : public ConvertContext {
 public:
  NodeContext(GraphImporter* importer, const ::onnx::NodeProto& node, int64_t opset)
      : importer_(importer), node_(node), opset_(opset) {}

  const ::onnx::NodeProto& node() const override { return node_; }
  int64_t opset() const override { return opset_; }
  std::string Describe() const override;

  int num_inputs() const override { return node_.input_size(); }
  bool HasInput(int i) const override {
    return i >= 0 && i < node_.input_size() && !node_.input(i).empty();
  }
  absl::StatusOr<Expr> Input(int i) override;
  absl::StatusOr<const TensorStructInfoNode*> InputTensorInfo(int i) override;
  std::optional<Tensor> ConstantInput(int i) const override;
  std::optional<DynamicType> InputDynamicType(int i) const override;
  std::optional<KnownInts> KnownInput(int i) const override;
  absl::StatusOr<std::vector<int64_t>> ConstantInts(int i, absl::string_view what) override;
  absl::StatusOr<KnownInts> KnownOrRunTimeInts(int i, absl::string_view what) override;
  absl::StatusOr<KnownInts> RunTimeInts(const Expr& value, absl::string_view name) override;

  bool HasAttr(absl::string_view name) const override { return FindAttr(name) != nullptr; }
  int64_t AttrInt(absl::string_view name, int64_t def) const override;
  float AttrFloat(absl::string_view name, float def) const override;
  std::string AttrString(absl::string_view name, absl::string_view def) const override;
  std::vector<int64_t> AttrInts(absl::string_view name, std::vector<int64_t> def) const override;
  std::vector<float> AttrFloats(absl::string_view name, std::vector<float> def) const override;
  std::vector<std::string> AttrStrings(absl::string_view name,
                                       std::vector<std::string> def) const override;
  absl::StatusOr<Tensor> AttrTensor(absl::string_view name) const override;
  // The GRAPH attribute `name`; INVALID_ARGUMENT when absent or of another type.
  absl::StatusOr<const ::onnx::GraphProto*> AttrGraph(absl::string_view name) const;

  absl::StatusOr<Expr> Emit(const Expr& value) override;
  absl::StatusOr<Expr> EmitMatchCast(const Expr& value, const StructInfo& sinfo) override;
  absl::StatusOr<Expr> EmitOp(absl::string_view op, std::vector<Expr> args, Attrs attrs) override;

  absl::Status Unsupported(absl::string_view what) const override;
  absl::Status Invalid(absl::string_view what) const override;

  // The first attribute of the wrong type an accessor met (converters read
  // attributes without status; the importer checks this after the call).
  const absl::Status& attr_error() const { return attr_error_; }

 private:
  const ::onnx::AttributeProto* FindAttr(absl::string_view name) const {
    for (const auto& a : node_.attribute()) {
      if (a.name() == name) return &a;
    }
    return nullptr;
  }
  // The attribute `name` when present with one of `types`; records an error
  // when present with another type.
  const ::onnx::AttributeProto* TypedAttr(absl::string_view name,
                                          std::initializer_list<int> types) const;
  const OnnxValue* Value(int i) const;

  GraphImporter* importer_;
  const ::onnx::NodeProto& node_;
  int64_t opset_;
  mutable absl::Status attr_error_;
  std::deque<StructInfo> sinfo_keepalive_;
};

class GraphImporter {
 public:
  GraphImporter(const ::onnx::ModelProto& model, const OnnxImportOptions& options,
                std::string base_dir)
      : model_(model), options_(options), base_dir_(std::move(base_dir)), bb_(&module_) {}

  absl::StatusOr<ImportedModel> Run();

  // Used by NodeContext.
  const std::string& base_dir() const { return base_dir_; }
  const OnnxValue* Find(const std::string& name) const {
    auto it = values_.find(name);
    return it == values_.end() ? nullptr : &it->second;
  }
  const Tensor* InitializerValue(const std::string& name) const {
    auto it = initializer_values_.find(name);
    return it == initializer_values_.end() ? nullptr : &it->second;
  }
  // The value `name` as a Relax leaf, materializing known ints (cached).
  absl::StatusOr<Expr> Materialize(const std::string& name, const NodeContext* ctx);
  // Run-time integer values read into symbolic vars, by value name
  // (NodeContext::KnownOrRunTimeInts). Kept apart from values_, so other
  // converters still see those values as tensors.
  std::map<std::string, KnownInts>& runtime_ints() { return runtime_ints_; }
  BlockBuilder& builder() { return bb_; }
  // The vars of the model's dim_params, by name.
  std::map<std::string, Var>* dim_vars() { return &dim_vars_; }

 private:
  // One iteration of a loop function (control_flow.cc): the values the body
  // computed from the iteration's parameters.
  struct LoopStep {
    Expr cond;                  // the condition for the next iteration, or undefined
    std::vector<Expr> carried;  // the loop-carried values for the next iteration
    std::vector<Expr> scans;    // this iteration's element of each scan output
  };
  // What EmitLoop builds (control_flow.cc).
  struct LoopSpec {
    std::string name_hint;
    Expr trip_count;            // an int64 tensor of one element, or undefined
    Expr cond;                  // a bool tensor of one element, or undefined
    std::vector<Expr> carried;  // initial values
    // Per carried value: its type when it is a sequence or an optional (then
    // the loop function takes and returns it as R.Object).
    std::vector<std::optional<DynamicType>> carried_dynamic;
    std::vector<bool> scan_prepend;  // per scan output: newest element first
    std::set<std::string> captures;  // outer values the body reads
    // Converts the body into `blocks`, given the iteration number (an int64
    // scalar tensor), the condition the iteration was entered with (a
    // constant true without a condition) and the carried values; the
    // captured names are bound to the loop function's parameters meanwhile.
    std::function<absl::StatusOr<LoopStep>(const Expr& iter, const Expr& cond,
                                           const std::vector<Expr>& carried,
                                           std::vector<BindingBlock>* blocks)>
        body;
  };

  // What a subgraph's conversion changes and must give back (control_flow.cc).
  struct Scope {
    std::map<std::string, OnnxValue> values;
    std::map<std::string, KnownInts> runtime_ints;
  };
  Scope SaveScope() const { return Scope{values_, runtime_ints_}; }
  void RestoreScope(Scope scope) {
    values_ = std::move(scope.values);
    runtime_ints_ = std::move(scope.runtime_ints);
  }

  absl::Status ReadOpset();
  absl::Status AddInitializers();
  absl::Status AddInputs();
  absl::StatusOr<StructInfo> InputStructInfo(const ::onnx::ValueInfoProto& input);
  // INVALID_ARGUMENT naming the first input the node reads that is not defined.
  absl::Status CheckInputsDefined(const NodeContext& ctx) const;
  // Converts one ordinary node; outputs named in `escaping` are re-bound as
  // output vars of the open dataflow block.
  absl::Status ConvertNode(const ::onnx::NodeProto& node, const std::set<std::string>& escaping);

  // control_flow.cc.
  // Converts the nodes of `graph` (whose inputs are already bound) into
  // `blocks` and returns its outputs, each an output var of the last block.
  // With `dynamic`, also the type of each output that is a sequence or an
  // optional (nullopt for the others).
  absl::StatusOr<std::vector<Expr>> ConvertGraph(const ::onnx::GraphProto& graph,
                                                 std::vector<BindingBlock>* blocks,
                                                 DynamicTypes* dynamic = nullptr);
  absl::Status AddSubgraphInitializers(const ::onnx::GraphProto& graph);
  absl::Status ConvertControlFlow(const ::onnx::NodeProto& node, std::vector<BindingBlock>* blocks);
  absl::Status ConvertIf(NodeContext& ctx, std::vector<BindingBlock>* blocks);
  absl::Status ConvertLoop(NodeContext& ctx, std::vector<BindingBlock>* blocks);
  absl::Status ConvertScan(NodeContext& ctx, std::vector<BindingBlock>* blocks);
  absl::Status ConvertSequenceMap(NodeContext& ctx, std::vector<BindingBlock>* blocks);
  // A branch of an If in its own scope, as a SeqExpr (a tuple of the outputs
  // when there are several).
  absl::StatusOr<Expr> ConvertBranch(const ::onnx::GraphProto& graph, DynamicTypes* dynamic);
  // A loop function added to the module and its call, emitted into a binding
  // block of `blocks`: the final carried values, then each scan output
  // stacked along a new axis 0.
  absl::StatusOr<std::vector<Expr>> EmitLoop(NodeContext& ctx, const LoopSpec& spec,
                                             std::vector<BindingBlock>* blocks);
  // Binds the outputs of a control-flow node; those of R.Object struct info
  // get their type from `dynamic`.
  void BindOutputs(const ::onnx::NodeProto& node, const std::vector<Expr>& outs,
                   const DynamicTypes& dynamic = {});

  const ::onnx::ModelProto& model_;
  const OnnxImportOptions& options_;
  const std::string base_dir_;
  IRModule module_;
  BlockBuilder bb_;
  int64_t opset_ = 0;
  std::map<std::string, OnnxValue> values_;
  std::map<std::string, KnownInts> runtime_ints_;
  std::map<std::string, Tensor> initializer_values_;
  std::map<std::string, Var> dim_vars_;              // by dim_param
  std::map<std::string, int64_t> fixed_dim_params_;  // dim_params fixed by input_shapes
  std::vector<Expr> params_;
  std::vector<Expr> kept_params_;
  ImportedModel result_;
};

// The control-flow operators, which the importer converts itself
// (control_flow.cc) rather than through the converter registry.
bool IsControlFlowOp(const ::onnx::NodeProto& node);
std::vector<std::string> ControlFlowOps();

}  // namespace tether::compiler::onnx_frontend

#endif  // TETHER_COMPILER_FRONTEND_ONNX_GRAPH_IMPORTER_H_
