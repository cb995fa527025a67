// Control flow in the ONNX importer: If, Loop and Scan, whose bodies are
// subgraphs that may read any value of the scopes around them, and
// SequenceMap, converted as the Loop its ONNX function body is. Sequences
// and optionals of run-time structure (convert_sequence.cc) are carried
// through a Loop as R.Object, and an If whose branches return them in
// different structures gives an R.Object; their types (OnnxValue::dynamic)
// come from the values, else from the subgraphs' declared types.
//
// - If: a condition known at import time inlines the chosen branch;
//   otherwise the node becomes a Relax If whose branches are the two
//   subgraphs, each converted in its own scope.
// - Loop and Scan: each becomes a Relax function of the module, NAME_loop,
//   called where the node was:
//
//     NAME_loop(iter, [trip_count], [cond], carried..., stacked..., captured...):
//       if iter < trip_count [and cond]:
//         <the body>
//         stacked_k' = concat(stacked_k, expand_dims(scan_k, 0))
//         return NAME_loop(iter + 1, trip_count, cond', carried'..., stacked'..., captured...)
//       else:
//         return (carried..., stacked...)
//
//   The recursive call is a tail call, which the VM code generator turns
//   into a jump, so a loop runs in one frame whatever its trip count. The
//   values of enclosing scopes that the body reads ("captured": the free
//   names of the subgraph, nested subgraphs included) are passed as
//   parameters; constants and import-time integers are used directly. A
//   carried value whose shape changes between iterations is given symbolic
//   dims (the body is converted again with them) and comes back to the
//   caller with fresh symbolic dims. Scan slices each scan input with `take`
//   at the iteration number (trip_count - 1 - iter for a reverse one),
//   prepends reverse scan outputs instead of appending them, and permutes
//   the stacked outputs to their scan_output_axes.
//
// Stacking appends by concatenation, so a scan output costs O(trip count^2)
// element copies; the loops of the models we have seen are short.
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "compiler/frontend/onnx/graph_importer.h"
#include "compiler/frontend/onnx/known_ints.h"
#include "compiler/frontend/onnx/tensor_proto.h"
#include "compiler/tir/arith.h"
#include "runtime/core/error.h"

namespace tether::compiler::onnx_frontend {
namespace {

// How often a loop body is converted again with more general shapes for
// its carried values before the importer gives up.
constexpr int kMaxShapeRounds = 4;

void CollectFreeNames(const ::onnx::GraphProto& graph, std::set<std::string>* out);

// The values a node reads: its inputs and what its subgraphs read from
// outside themselves.
std::set<std::string> NodeUses(const ::onnx::NodeProto& node) {
  std::set<std::string> uses;
  for (const std::string& in : node.input()) {
    if (!in.empty()) uses.insert(in);
  }
  for (const auto& a : node.attribute()) {
    if (a.type() == ::onnx::AttributeProto::GRAPH) CollectFreeNames(a.g(), &uses);
    if (a.type() == ::onnx::AttributeProto::GRAPHS) {
      for (const auto& g : a.graphs()) CollectFreeNames(g, &uses);
    }
  }
  return uses;
}

// The names `graph` reads from enclosing scopes: everything its nodes and
// outputs read that it does not define (inputs, initializers, node outputs).
void CollectFreeNames(const ::onnx::GraphProto& graph, std::set<std::string>* out) {
  std::set<std::string> defined;
  for (const auto& in : graph.input()) defined.insert(in.name());
  for (const auto& init : graph.initializer()) defined.insert(init.name());
  for (const auto& node : graph.node()) {
    for (const std::string& u : NodeUses(node)) {
      if (!defined.count(u)) out->insert(u);
    }
    for (const std::string& o : node.output()) {
      if (!o.empty()) defined.insert(o);
    }
  }
  for (const auto& o : graph.output()) {
    if (!defined.count(o.name())) out->insert(o.name());
  }
}

// The outputs of ordinary nodes of `graph` that are read after the run of
// ordinary nodes they belong to: by a control-flow node or its subgraphs, by
// a node of a later run, or as a graph output.
std::set<std::string> EscapingValues(const ::onnx::GraphProto& graph) {
  std::map<std::string, int> run_of;
  std::set<std::string> escaping;
  int run = 0;
  auto use = [&](const std::string& name) {
    auto it = run_of.find(name);
    if (it != run_of.end() && it->second < run) escaping.insert(name);
  };
  for (const auto& node : graph.node()) {
    const bool control = IsControlFlowOp(node);
    if (control) ++run;
    for (const std::string& u : NodeUses(node)) use(u);
    if (control) {
      ++run;  // its outputs are bound outside dataflow blocks already
      continue;
    }
    for (const std::string& o : node.output()) {
      if (!o.empty()) run_of[o] = run;
    }
  }
  for (const auto& o : graph.output()) use(o.name());
  return escaping;
}

const TensorStructInfoNode* TensorInfo(const Expr& e) {
  return e.struct_info().as<TensorStructInfoNode>();
}

// A one-element tensor (M and cond of Loop may be [1]) as a 0-D one.
absl::StatusOr<Expr> Scalar(NodeContext& ctx, const Expr& x) {
  const TensorStructInfoNode* t = TensorInfo(x);
  if (t != nullptr && t->ndim == 0) return x;
  return ctx.EmitOp("relax.reshape", {x, MakeShapeExpr({})}, {});
}

absl::StatusOr<Expr> IntConstant(int64_t value) {
  return ScalarConstant(DataType::Int(64), static_cast<double>(value));
}

// The type of a loop-carried value when it is a sequence or an optional (the
// loop carries it as R.Object): as the body declares its input, else as the
// initial value's type or static tuple gives it; nullopt for a tensor.
absl::StatusOr<std::optional<DynamicType>> CarriedType(const std::optional<DynamicType>& init_type,
                                                       const Expr& init,
                                                       const ::onnx::TypeProto& declared,
                                                       const std::string& what,
                                                       std::map<std::string, Var>* dim_vars) {
  std::optional<DynamicType> type = init_type;
  if (!type.has_value() && init.struct_info().as<TupleStructInfoNode>() != nullptr) {
    type = SequenceTypeOfTuple(init.struct_info());
  }
  if (declared.value_case() != ::onnx::TypeProto::VALUE_NOT_SET && !declared.has_tensor_type()) {
    TETHER_ASSIGN_OR_RETURN(std::optional<DynamicType> d, DynamicTypeOf(declared, what, dim_vars));
    if (type.has_value()) {
      d->optional |= type->optional;
      if (!d->dtype.has_value()) d->dtype = type->dtype;
      if (d->ndim < 0) {
        d->ndim = type->ndim;
        d->dims = type->dims;
      }
    }
    type = d;
  }
  return type;
}

}  // namespace

bool IsControlFlowOp(const ::onnx::NodeProto& node) {
  if (!node.domain().empty() && node.domain() != "ai.onnx") return false;
  const std::string& op = node.op_type();
  return op == "If" || op == "Loop" || op == "Scan" || op == "SequenceMap";
}

std::vector<std::string> ControlFlowOps() { return {"If", "Loop", "Scan", "SequenceMap"}; }

absl::Status GraphImporter::CheckInputsDefined(const NodeContext& ctx) const {
  const ::onnx::NodeProto& node = ctx.node();
  for (int i = 0; i < node.input_size(); ++i) {
    if (!node.input(i).empty() && Find(node.input(i)) == nullptr) {
      return ctx.Invalid(absl::StrCat("input ", i, " reads undefined value '", node.input(i), "'"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Expr>> GraphImporter::ConvertGraph(const ::onnx::GraphProto& graph,
                                                              std::vector<BindingBlock>* blocks,
                                                              DynamicTypes* dynamic) {
  const std::set<std::string> escaping = EscapingValues(graph);
  auto close = [&] {
    BindingBlock block = bb_.EndBlock();
    if (!block.bindings.empty()) blocks->push_back(std::move(block));
  };
  bb_.BeginDataflowBlock();
  for (const auto& node : graph.node()) {
    absl::Status s;
    if (IsControlFlowOp(node)) {
      close();
      s = ConvertControlFlow(node, blocks);
      bb_.BeginDataflowBlock();
    } else {
      s = ConvertNode(node, escaping);
    }
    if (!s.ok()) {
      bb_.EndBlock();
      return s;
    }
  }
  std::vector<Expr> outputs;
  for (const auto& out : graph.output()) {
    absl::StatusOr<Expr> e =
        Find(out.name()) == nullptr
            ? absl::InvalidArgumentError(
                  absl::StrCat("onnx: graph output '", out.name(), "' is not produced by any node"))
            : Materialize(out.name(), nullptr);
    if (dynamic != nullptr && e.ok()) {
      // A sequence or an optional: its type as the value has it, else as a
      // static tuple's fields give it, else as the graph declares it.
      std::optional<DynamicType> type = Find(out.name())->dynamic;
      if (!type.has_value() && e->struct_info().as<TupleStructInfoNode>() != nullptr) {
        type = SequenceTypeOfTuple(e->struct_info());
      }
      if (!type.has_value()) {
        absl::StatusOr<std::optional<DynamicType>> declared =
            DynamicTypeOf(out.type(), absl::StrCat("graph output '", out.name(), "'"));
        if (declared.ok()) type = *declared;
      }
      dynamic->push_back(type);
    }
    absl::StatusOr<Expr> gv = e.ok() ? bb_.EmitOutput(*e, SymbolName(out.name())) : e;
    if (!gv.ok()) {
      bb_.EndBlock();
      return gv.status();
    }
    outputs.push_back(*gv);
  }
  close();
  return outputs;
}

absl::Status GraphImporter::AddSubgraphInitializers(const ::onnx::GraphProto& graph) {
  if (graph.sparse_initializer_size() > 0) {
    return absl::UnimplementedError(absl::StrCat("onnx: sparse initializer '",
                                                 graph.sparse_initializer(0).values().name(),
                                                 "' of a subgraph is not supported"));
  }
  for (const auto& init : graph.initializer()) {
    absl::StatusOr<Tensor> t = TensorFromProto(init, base_dir_);
    if (!t.ok()) {
      return absl::Status(t.status().code(),
                          absl::StrCat("onnx: subgraph initializer: ", t.status().message()));
    }
    values_[init.name()] = OnnxValue::Of(MakeConstant(*t));
  }
  return absl::OkStatus();
}

void GraphImporter::BindOutputs(const ::onnx::NodeProto& node, const std::vector<Expr>& outs,
                                const DynamicTypes& dynamic) {
  for (size_t k = 0; k < outs.size() && k < static_cast<size_t>(node.output_size()); ++k) {
    const std::string& name = node.output(static_cast<int>(k));
    if (name.empty()) continue;
    values_[name] = OnnxValue::Of(outs[k]);
    if (k < dynamic.size() && outs[k].struct_info().kind() == StructInfoKind::kObject) {
      values_[name].dynamic = dynamic[k];
    }
  }
}

absl::Status GraphImporter::ConvertControlFlow(const ::onnx::NodeProto& node,
                                               std::vector<BindingBlock>* blocks) {
  NodeContext ctx(this, node, opset_);
  TETHER_RETURN_IF_ERROR(CheckInputsDefined(ctx));
  absl::Status s;
  if (node.op_type() == "If") {
    s = ConvertIf(ctx, blocks);
  } else if (node.op_type() == "Loop") {
    s = ConvertLoop(ctx, blocks);
  } else if (node.op_type() == "SequenceMap") {
    s = opset_ < 17 ? ctx.Unsupported("unsupported operator (supported from opset 17)")
                    : ConvertSequenceMap(ctx, blocks);
  } else if (opset_ < 9) {
    // Scan-8 has a batch axis and sequence_lens; Scan-9 is the one in use.
    s = ctx.Unsupported("unsupported operator (supported from opset 9)");
  } else {
    s = ConvertScan(ctx, blocks);
  }
  if (!ctx.attr_error().ok()) return ctx.attr_error();
  return s;
}

absl::StatusOr<Expr> GraphImporter::ConvertBranch(const ::onnx::GraphProto& graph,
                                                  DynamicTypes* dynamic) {
  Scope saved = SaveScope();
  std::vector<BindingBlock> blocks;
  absl::Status s = AddSubgraphInitializers(graph);
  absl::StatusOr<std::vector<Expr>> outs =
      s.ok() ? ConvertGraph(graph, &blocks, dynamic) : absl::StatusOr<std::vector<Expr>>(s);
  RestoreScope(std::move(saved));
  if (!outs.ok()) return outs.status();
  Expr body = outs->size() == 1 ? (*outs)[0] : MakeTuple(*outs);
  return MakeSeqExpr(std::move(blocks), body);
}

absl::Status GraphImporter::ConvertIf(NodeContext& ctx, std::vector<BindingBlock>* blocks) {
  const ::onnx::NodeProto& node = ctx.node();
  TETHER_ASSIGN_OR_RETURN(const ::onnx::GraphProto* then_graph, ctx.AttrGraph("then_branch"));
  TETHER_ASSIGN_OR_RETURN(const ::onnx::GraphProto* else_graph, ctx.AttrGraph("else_branch"));
  if (node.output_size() == 0) return ctx.Invalid("If has no outputs");
  for (const auto& [which, g] : {std::pair{"then", then_graph}, std::pair{"else", else_graph}}) {
    if (g->input_size() != 0) {
      return ctx.Invalid(absl::StrCat("the ", which, " branch declares ", g->input_size(),
                                      " inputs; If branches take none"));
    }
    if (g->output_size() != node.output_size()) {
      return ctx.Invalid(absl::StrCat("the ", which, " branch has ", g->output_size(),
                                      " outputs, the node ", node.output_size()));
    }
  }
  if (!ctx.HasInput(0)) return ctx.Invalid("input 0 (cond) is absent");

  // A condition known now: only the chosen branch is converted, inline.
  if (std::optional<Tensor> known = ctx.ConstantInput(0); known.has_value()) {
    std::optional<std::vector<int64_t>> v = IntsFromTensor(*known);
    if (!v.has_value() || v->size() != 1) {
      return ctx.Invalid(absl::StrCat("cond must be one bool, got ", known->ToString()));
    }
    const ::onnx::GraphProto& chosen = (*v)[0] != 0 ? *then_graph : *else_graph;
    Scope saved = SaveScope();
    absl::Status s = AddSubgraphInitializers(chosen);
    DynamicTypes dynamic;
    absl::StatusOr<std::vector<Expr>> outs =
        s.ok() ? ConvertGraph(chosen, blocks, &dynamic) : absl::StatusOr<std::vector<Expr>>(s);
    RestoreScope(std::move(saved));
    if (!outs.ok()) return outs.status();
    BindOutputs(node, *outs, dynamic);
    return absl::OkStatus();
  }

  TETHER_ASSIGN_OR_RETURN(Expr cond, ctx.Input(0));
  DynamicTypes then_types, else_types;
  TETHER_ASSIGN_OR_RETURN(Expr then_body, ConvertBranch(*then_graph, &then_types));
  TETHER_ASSIGN_OR_RETURN(Expr else_body, ConvertBranch(*else_graph, &else_types));
  // A sequence or optional output: the type either branch knows best (an
  // optional when either branch's is).
  DynamicTypes dynamic = then_types;
  for (size_t k = 0; k < dynamic.size() && k < else_types.size(); ++k) {
    if (!dynamic[k].has_value()) dynamic[k] = else_types[k];
    if (!dynamic[k].has_value() || !else_types[k].has_value()) continue;
    const DynamicType& other = *else_types[k];
    dynamic[k]->optional |= other.optional;
    if (!dynamic[k]->dtype.has_value()) dynamic[k]->dtype = other.dtype;
    if (dynamic[k]->ndim < 0) dynamic[k]->ndim = other.ndim;
  }
  bb_.BeginBindingBlock();
  std::vector<Expr> outs;
  absl::StatusOr<Expr> result = ctx.Emit(MakeIf(cond, then_body, else_body));
  for (int k = 0; result.ok() && k < node.output_size(); ++k) {
    if (node.output_size() == 1) {
      outs.push_back(*result);
      break;
    }
    absl::StatusOr<Expr> item = ctx.Emit(MakeTupleGetItem(*result, k));
    if (!item.ok()) result = item.status();
    if (item.ok()) outs.push_back(*item);
  }
  blocks->push_back(bb_.EndBlock());
  if (!result.ok()) return result.status();
  BindOutputs(node, outs, dynamic);
  return absl::OkStatus();
}

absl::Status GraphImporter::ConvertLoop(NodeContext& ctx, std::vector<BindingBlock>* blocks) {
  const ::onnx::NodeProto& node = ctx.node();
  TETHER_ASSIGN_OR_RETURN(const ::onnx::GraphProto* body, ctx.AttrGraph("body"));
  if (node.input_size() < 2) {
    return ctx.Invalid(
        absl::StrCat("Loop takes at least 2 inputs (M, cond), got ", node.input_size()));
  }
  const int num_carried = node.input_size() - 2;
  if (body->input_size() != 2 + num_carried) {
    return ctx.Invalid(absl::StrCat("the body declares ", body->input_size(), " inputs; ",
                                    num_carried, " loop-carried values need 2 + ", num_carried));
  }
  const int num_scans = body->output_size() - 1 - num_carried;
  if (num_scans < 0) {
    return ctx.Invalid(absl::StrCat("the body has ", body->output_size(), " outputs; ", num_carried,
                                    " loop-carried values need at least ", 1 + num_carried));
  }
  if (node.output_size() > num_carried + num_scans) {
    return ctx.Invalid(absl::StrCat("the node has ", node.output_size(), " outputs, the body ",
                                    num_carried + num_scans));
  }
  LoopSpec spec;
  spec.name_hint = node.name().empty() ? node.output(0) : node.name();
  if (ctx.HasInput(0)) {
    TETHER_ASSIGN_OR_RETURN(spec.trip_count, ctx.Input(0));
  }
  if (ctx.HasInput(1)) {
    TETHER_ASSIGN_OR_RETURN(spec.cond, ctx.Input(1));
  }
  if (!spec.trip_count.defined() && !spec.cond.defined()) {
    return ctx.Unsupported("a Loop with neither a trip count nor a condition never ends");
  }
  for (int j = 0; j < num_carried; ++j) {
    if (!ctx.HasInput(2 + j)) {
      return ctx.Invalid(absl::StrCat("loop-carried input ", j, " is absent"));
    }
    TETHER_ASSIGN_OR_RETURN(Expr init, ctx.Input(2 + j));
    spec.carried.push_back(init);
    TETHER_ASSIGN_OR_RETURN(
        std::optional<DynamicType> type,
        CarriedType(ctx.InputDynamicType(2 + j), init, body->input(2 + j).type(),
                    absl::StrCat("the body's input '", body->input(2 + j).name(), "'"),
                    &dim_vars_));
    spec.carried_dynamic.push_back(type);
  }
  spec.scan_prepend.assign(static_cast<size_t>(num_scans), false);
  CollectFreeNames(*body, &spec.captures);
  const bool has_cond = spec.cond.defined();
  spec.body = [&, body, num_carried, has_cond](
                  const Expr& iter, const Expr& cond, const std::vector<Expr>& carried,
                  std::vector<BindingBlock>* body_blocks) -> absl::StatusOr<LoopStep> {
    auto bind = [&](int i, const Expr& e, std::optional<DynamicType> type = std::nullopt) {
      const std::string& name = body->input(i).name();
      if (!name.empty()) values_[name] = OnnxValue{e, std::nullopt, std::move(type)};
    };
    bind(0, iter);
    bind(1, cond);
    for (int j = 0; j < num_carried; ++j) {
      bind(2 + j, carried[static_cast<size_t>(j)], spec.carried_dynamic[static_cast<size_t>(j)]);
    }
    TETHER_RETURN_IF_ERROR(AddSubgraphInitializers(*body));
    TETHER_ASSIGN_OR_RETURN(std::vector<Expr> outs, ConvertGraph(*body, body_blocks));
    LoopStep step;
    // Without a cond input the loop is a for loop: the body's condition is
    // ignored, as the operator's definition says.
    if (has_cond) step.cond = outs[0];
    step.carried.assign(outs.begin() + 1, outs.begin() + 1 + num_carried);
    step.scans.assign(outs.begin() + 1 + num_carried, outs.end());
    return step;
  };
  TETHER_ASSIGN_OR_RETURN(std::vector<Expr> outs, EmitLoop(ctx, spec, blocks));
  BindOutputs(node, outs, spec.carried_dynamic);
  return absl::OkStatus();
}

namespace {

::onnx::NodeProto MakeNodeProto(const std::string& op, std::vector<std::string> inputs,
                                std::vector<std::string> outputs) {
  ::onnx::NodeProto n;
  n.set_op_type(op);
  for (std::string& in : inputs) n.add_input(std::move(in));
  for (std::string& out : outputs) n.add_output(std::move(out));
  return n;
}

// A graph input or output `name` of a scalar tensor of ONNX element type `elem`.
::onnx::ValueInfoProto ScalarInfo(const std::string& name, int elem) {
  ::onnx::ValueInfoProto v;
  v.set_name(name);
  v.mutable_type()->mutable_tensor_type()->set_elem_type(elem);
  v.mutable_type()->mutable_tensor_type()->mutable_shape();
  return v;
}

// A graph input or output `name` of a sequence of `elem`-typed tensors.
::onnx::ValueInfoProto SequenceInfo(const std::string& name, const ::onnx::TypeProto& elem) {
  ::onnx::ValueInfoProto v;
  v.set_name(name);
  *v.mutable_type()->mutable_sequence_type()->mutable_elem_type() = elem;
  return v;
}

}  // namespace

// SequenceMap as ONNX defines it (its function body): a Loop over the first
// sequence's length whose body reads element `iter` of every sequence input
// (tensor inputs as they are), runs the body graph and appends each of its
// outputs to a sequence carried through the loop, starting empty.
absl::Status GraphImporter::ConvertSequenceMap(NodeContext& ctx,
                                               std::vector<BindingBlock>* blocks) {
  const ::onnx::NodeProto& node = ctx.node();
  TETHER_ASSIGN_OR_RETURN(const ::onnx::GraphProto* body, ctx.AttrGraph("body"));
  if (!ctx.HasInput(0)) return ctx.Invalid("input 0 (input_sequence) is absent");
  if (body->input_size() != node.input_size()) {
    return ctx.Invalid(absl::StrCat("the body declares ", body->input_size(), " inputs for the ",
                                    node.input_size(), " inputs of the node"));
  }
  if (node.output_size() == 0 || body->output_size() != node.output_size()) {
    return ctx.Invalid(absl::StrCat("the body has ", body->output_size(), " outputs, the node ",
                                    node.output_size()));
  }
  std::vector<bool> is_sequence;
  for (int i = 0; i < node.input_size(); ++i) {
    if (!ctx.HasInput(i)) return ctx.Invalid(absl::StrCat("input ", i, " is absent"));
    TETHER_ASSIGN_OR_RETURN(Expr e, ctx.Input(i));
    std::optional<DynamicType> type = ctx.InputDynamicType(i);
    if (type.has_value() && type->optional) {
      return ctx.Invalid(absl::StrCat("input ", i, " ('", node.input(i),
                                      "') is an optional, not a sequence or a tensor"));
    }
    is_sequence.push_back(type.has_value() || e.struct_info().as<TupleStructInfoNode>() != nullptr);
  }
  if (!is_sequence[0]) return ctx.Invalid("input 0 (input_sequence) is not a sequence");

  const std::string p =
      absl::StrCat("__", SymbolName(node.name().empty() ? node.output(0) : node.name()), "_map_");
  std::vector<::onnx::NodeProto> before;
  before.push_back(MakeNodeProto("SequenceLength", {node.input(0)}, {p + "len"}));
  before.push_back(MakeNodeProto("Constant", {}, {p + "cond"}));
  {
    ::onnx::AttributeProto* value = before.back().add_attribute();
    value->set_name("value");
    value->set_type(::onnx::AttributeProto::TENSOR);
    value->mutable_t()->set_data_type(::onnx::TensorProto::BOOL);
    value->mutable_t()->add_int32_data(1);
  }
  ::onnx::NodeProto loop = MakeNodeProto("Loop", {p + "len", p + "cond"}, {});
  loop.set_name(node.name());
  ::onnx::GraphProto* g = nullptr;
  {
    ::onnx::AttributeProto* a = loop.add_attribute();
    a->set_name("body");
    a->set_type(::onnx::AttributeProto::GRAPH);
    g = a->mutable_g();
  }
  g->set_name(body->name());
  *g->add_input() = ScalarInfo(p + "iter", ::onnx::TensorProto::INT64);
  *g->add_input() = ScalarInfo(p + "cond_in", ::onnx::TensorProto::BOOL);
  *g->add_output() = ScalarInfo(p + "cond_out", ::onnx::TensorProto::BOOL);
  for (int i = 0; i < node.input_size(); ++i) {
    *g->add_node() =
        is_sequence[static_cast<size_t>(i)]
            ? MakeNodeProto("SequenceAt", {node.input(i), p + "iter"}, {body->input(i).name()})
            : MakeNodeProto("Identity", {node.input(i)}, {body->input(i).name()});
  }
  for (const auto& n : body->node()) *g->add_node() = n;
  for (const auto& init : body->initializer()) *g->add_initializer() = init;
  *g->add_node() = MakeNodeProto("Identity", {p + "cond_in"}, {p + "cond_out"});
  for (int k = 0; k < node.output_size(); ++k) {
    const std::string empty = absl::StrCat(p, "empty", k), in = absl::StrCat(p, "out_in", k),
                      out = absl::StrCat(p, "out_out", k);
    const ::onnx::TypeProto& elem = body->output(k).type();
    before.push_back(MakeNodeProto("SequenceEmpty", {}, {empty}));
    if (elem.has_tensor_type() && elem.tensor_type().elem_type() != 0) {
      ::onnx::AttributeProto* dtype = before.back().add_attribute();
      dtype->set_name("dtype");
      dtype->set_type(::onnx::AttributeProto::INT);
      dtype->set_i(elem.tensor_type().elem_type());
    }
    loop.add_input(empty);
    loop.add_output(node.output(k));
    *g->add_input() = SequenceInfo(in, elem);
    *g->add_node() = MakeNodeProto("SequenceInsert", {in, body->output(k).name()}, {out});
    *g->add_output() = SequenceInfo(out, elem);
  }

  // The length, the condition and the empty sequences, then the loop.
  std::set<std::string> escaping;
  for (const auto& n : before) escaping.insert(n.output(0));
  bb_.BeginDataflowBlock();
  for (const auto& n : before) {
    absl::Status s = ConvertNode(n, escaping);
    if (!s.ok()) {
      bb_.EndBlock();
      return s;
    }
  }
  BindingBlock block = bb_.EndBlock();
  if (!block.bindings.empty()) blocks->push_back(std::move(block));
  NodeContext loop_ctx(this, loop, opset_);
  absl::Status s = ConvertLoop(loop_ctx, blocks);
  if (!loop_ctx.attr_error().ok()) return loop_ctx.attr_error();
  return s;
}

absl::Status GraphImporter::ConvertScan(NodeContext& ctx, std::vector<BindingBlock>* blocks) {
  const ::onnx::NodeProto& node = ctx.node();
  TETHER_ASSIGN_OR_RETURN(const ::onnx::GraphProto* body, ctx.AttrGraph("body"));
  const int64_t num_scan_inputs = ctx.AttrInt("num_scan_inputs", -1);
  if (num_scan_inputs < 1 || num_scan_inputs > node.input_size()) {
    return ctx.Invalid(absl::StrCat("num_scan_inputs is ", num_scan_inputs, " for ",
                                    node.input_size(), " inputs"));
  }
  const int num_states = node.input_size() - static_cast<int>(num_scan_inputs);
  const int num_scan_outputs = body->output_size() - num_states;
  if (body->input_size() != node.input_size() || num_scan_outputs < 0) {
    return ctx.Invalid(absl::StrCat("the body has ", body->input_size(), " inputs and ",
                                    body->output_size(), " outputs for ", num_states,
                                    " states and ", num_scan_inputs, " scan inputs"));
  }
  const size_t n_in = static_cast<size_t>(num_scan_inputs);
  const size_t n_out = static_cast<size_t>(num_scan_outputs);
  std::vector<int64_t> in_axes = ctx.AttrInts("scan_input_axes", std::vector<int64_t>(n_in, 0));
  std::vector<int64_t> in_dirs =
      ctx.AttrInts("scan_input_directions", std::vector<int64_t>(n_in, 0));
  std::vector<int64_t> out_axes = ctx.AttrInts("scan_output_axes", std::vector<int64_t>(n_out, 0));
  std::vector<int64_t> out_dirs =
      ctx.AttrInts("scan_output_directions", std::vector<int64_t>(n_out, 0));
  if (in_axes.size() != n_in || in_dirs.size() != n_in || out_axes.size() != n_out ||
      out_dirs.size() != n_out) {
    return ctx.Invalid(absl::StrCat("the scan axes and directions must have one entry per scan ",
                                    "input (", n_in, ") and output (", n_out, ")"));
  }

  // The trip count: the scanned dim of every scan input, known now.
  int64_t length = -1;
  for (size_t j = 0; j < n_in; ++j) {
    const int input = num_states + static_cast<int>(j);
    TETHER_ASSIGN_OR_RETURN(const TensorStructInfoNode* info, ctx.InputTensorInfo(input));
    const int64_t rank = info->ndim;
    if (rank < 1 || !info->shape.has_value()) {
      return ctx.Unsupported(absl::StrCat("scan input ", j, " has no known shape"));
    }
    int64_t& axis = in_axes[j];
    if (axis < -rank || axis >= rank) {
      return ctx.Invalid(absl::StrCat("scan_input_axes[", j, "] = ", axis, " for rank ", rank));
    }
    if (axis < 0) axis += rank;
    const PrimExpr& dim = (*info->shape)[static_cast<size_t>(axis)];
    const int64_t* n = dim.as_int();
    if (n == nullptr) {
      return ctx.Unsupported(absl::StrCat("the scan length (dim ", axis, " of scan input ", j,
                                          ") is '", ToString(dim),
                                          "', not a constant: Scan needs a static length"));
    }
    if (length >= 0 && *n != length) {
      return ctx.Invalid(
          absl::StrCat("scan input ", j, " has length ", *n, ", an earlier one ", length));
    }
    length = *n;
  }

  LoopSpec spec;
  spec.name_hint = node.name().empty() ? node.output(0) : node.name();
  TETHER_ASSIGN_OR_RETURN(spec.trip_count, IntConstant(length));
  for (int j = 0; j < num_states; ++j) {
    TETHER_ASSIGN_OR_RETURN(Expr init, ctx.Input(j));
    spec.carried.push_back(init);
    spec.carried_dynamic.push_back(std::nullopt);
  }
  for (int64_t d : out_dirs) spec.scan_prepend.push_back(d == 1);
  CollectFreeNames(*body, &spec.captures);
  for (size_t j = 0; j < n_in; ++j)
    spec.captures.insert(node.input(num_states + static_cast<int>(j)));
  spec.body = [&, body, num_states](
                  const Expr& iter, const Expr&, const std::vector<Expr>& carried,
                  std::vector<BindingBlock>* body_blocks) -> absl::StatusOr<LoopStep> {
    for (int j = 0; j < num_states; ++j) {
      values_[body->input(j).name()] = OnnxValue::Of(carried[static_cast<size_t>(j)]);
    }
    // This iteration's slice of each scan input.
    bb_.BeginDataflowBlock();
    absl::Status s;
    for (size_t j = 0; s.ok() && j < n_in; ++j) {
      const int input = num_states + static_cast<int>(j);
      absl::StatusOr<Expr> index = iter;
      if (in_dirs[j] == 1) {
        absl::StatusOr<Expr> last = IntConstant(length - 1);
        index = last.ok() ? ctx.EmitOp("relax.subtract", {*last, iter}, {}) : last;
      }
      absl::StatusOr<Expr> x = index.ok() ? Materialize(node.input(input), &ctx) : index;
      absl::StatusOr<Expr> elem =
          x.ok() ? ctx.EmitOp("relax.take", {*x, *index}, {{"axis", in_axes[j]}}) : x;
      if (elem.ok()) elem = bb_.EmitOutput(*elem, "scan_elem");
      s = elem.status();
      if (s.ok()) values_[body->input(input).name()] = OnnxValue::Of(*elem);
    }
    body_blocks->push_back(bb_.EndBlock());
    TETHER_RETURN_IF_ERROR(s);
    TETHER_RETURN_IF_ERROR(AddSubgraphInitializers(*body));
    TETHER_ASSIGN_OR_RETURN(std::vector<Expr> outs, ConvertGraph(*body, body_blocks));
    LoopStep step;
    step.carried.assign(outs.begin(), outs.begin() + num_states);
    step.scans.assign(outs.begin() + num_states, outs.end());
    return step;
  };
  TETHER_ASSIGN_OR_RETURN(std::vector<Expr> outs, EmitLoop(ctx, spec, blocks));

  // Stacked outputs to their scan_output_axes.
  bb_.BeginBindingBlock();
  absl::Status s;
  for (size_t k = 0; s.ok() && k < n_out; ++k) {
    Expr& stacked = outs[static_cast<size_t>(num_states) + k];
    const int64_t rank = TensorInfo(stacked)->ndim;
    int64_t axis = out_axes[k];
    if (axis < -rank || axis >= rank) {
      s = ctx.Invalid(absl::StrCat("scan_output_axes[", k, "] = ", axis, " for rank ", rank));
      break;
    }
    if (axis < 0) axis += rank;
    if (axis == 0) continue;
    std::vector<int64_t> perm;
    for (int64_t a = 1; a <= axis; ++a) perm.push_back(a);
    perm.push_back(0);
    for (int64_t a = axis + 1; a < rank; ++a) perm.push_back(a);
    absl::StatusOr<Expr> moved = ctx.EmitOp("relax.permute_dims", {stacked}, {{"axes", perm}});
    s = moved.status();
    if (moved.ok()) stacked = *moved;
  }
  blocks->push_back(bb_.EndBlock());
  TETHER_RETURN_IF_ERROR(s);
  BindOutputs(node, outs);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Expr>> GraphImporter::EmitLoop(NodeContext& ctx, const LoopSpec& spec,
                                                          std::vector<BindingBlock>* blocks) {
  const std::string name = module_.UniqueName(SymbolName(spec.name_hint) + "_loop");
  const Expr callee = MakeGlobalVar(name);
  const size_t num_carried = spec.carried.size();
  const size_t num_scans = spec.scan_prepend.size();

  std::vector<StructInfo> carried_sinfo;
  for (size_t j = 0; j < num_carried; ++j) {
    // A sequence or an optional is carried as R.Object: its length (or
    // presence) may change from one iteration to the next.
    if (spec.carried_dynamic[j].has_value()) {
      carried_sinfo.push_back(ObjectSInfo());
      continue;
    }
    if (TensorInfo(spec.carried[j]) == nullptr) {
      return ctx.Unsupported(absl::StrCat("loop-carried value ", j, " is ",
                                          ToString(spec.carried[j].struct_info()),
                                          ", not a tensor, a sequence or an optional"));
    }
    carried_sinfo.push_back(spec.carried[j].struct_info());
  }
  std::vector<bool> reshaped(num_carried, false);  // its shape changes between iterations
  std::set<const PrimVarNode*> general_dims;       // the symbolic dims given to those
  // Reserve the name (a nested loop converted meanwhile must not take it).
  module_.functions[name] = MakeFunction({}, MakeSeqExpr({}, MakeTuple({})), StructInfo());

  // Captured values that need a parameter: vars of the enclosing function.
  std::vector<std::string> captured_names;
  std::vector<Expr> captured;
  DynamicTypes captured_dynamic;
  for (const std::string& n : spec.captures) {
    const OnnxValue* v = Find(n);
    if (v == nullptr) {
      return ctx.Invalid(absl::StrCat("the body reads undefined value '", n, "'"));
    }
    // A static tuple (a sequence) may hold vars of the enclosing function.
    if (v->expr.kind() == ExprKind::kVar || v->expr.kind() == ExprKind::kDataflowVar ||
        v->expr.kind() == ExprKind::kTuple) {
      captured_names.push_back(n);
      captured.push_back(v->expr);
      captured_dynamic.push_back(v->dynamic);
    }
  }

  std::vector<StructInfo> scan_sinfo;  // per scan output: its element's
  for (int round = 0;; ++round) {
    Scope saved_values = SaveScope();
    std::set<std::string> saved_functions;
    for (const auto& [n, f] : module_.functions) saved_functions.insert(n);
    auto rollback = [&] {
      RestoreScope(saved_values);
      for (auto it = module_.functions.begin(); it != module_.functions.end();) {
        it = saved_functions.count(it->first) ? std::next(it) : module_.functions.erase(it);
      }
    };

    // Parameters.
    std::vector<Expr> params;
    Expr iter = MakeVar("iter", TensorSInfo({}, DataType::Int(64)));
    params.push_back(iter);
    Expr trip_count, cond;
    if (spec.trip_count.defined()) {
      trip_count = MakeVar("trip_count", TensorSInfo({}, DataType::Int(64)));
      params.push_back(trip_count);
    }
    if (spec.cond.defined()) {
      cond = MakeVar("cond", TensorSInfo({}, DataType::Bool()));
      params.push_back(cond);
    }
    std::vector<Expr> carried;
    for (size_t j = 0; j < num_carried; ++j) {
      carried.push_back(MakeVar(absl::StrCat("carried", j), carried_sinfo[j]));
      params.push_back(carried.back());
    }
    std::vector<Expr> captured_params;
    for (size_t k = 0; k < captured.size(); ++k) {
      captured_params.push_back(MakeVar(SymbolName(captured_names[k]), captured[k].struct_info()));
      values_[captured_names[k]] =
          OnnxValue{captured_params.back(), std::nullopt, captured_dynamic[k]};
    }
    Expr cond_in = cond;
    if (!cond_in.defined()) {
      absl::StatusOr<Tensor> t = TensorFromInts({1}, {}, DataType::Bool());
      if (!t.ok()) return t.status();
      cond_in = MakeConstant(*t);
    }

    std::vector<BindingBlock> then_blocks;
    absl::StatusOr<LoopStep> step = spec.body(iter, cond_in, carried, &then_blocks);
    if (!step.ok()) {
      rollback();
      return step.status();
    }
    if (step->carried.size() != num_carried || step->scans.size() != num_scans ||
        (cond.defined() && !step->cond.defined())) {
      rollback();
      return absl::InternalError(absl::StrCat("onnx: ", ctx.Describe(), ": loop body mismatch"));
    }

    // Does every carried value keep its shape? Else generalize and go again.
    bool again = false;
    for (size_t j = 0; j < num_carried; ++j) {
      const TensorStructInfoNode* in = carried_sinfo[j].as<TensorStructInfoNode>();
      const TensorStructInfoNode* out = TensorInfo(step->carried[j]);
      if (in == nullptr) {  // a sequence or an optional
        if (out != nullptr) {
          rollback();
          return ctx.Invalid(absl::StrCat("loop-carried value ", j,
                                          " enters as a sequence or an optional and leaves the "
                                          "body as a tensor"));
        }
        continue;
      }
      if (out == nullptr) {
        rollback();
        return ctx.Unsupported(absl::StrCat("the body's loop-carried output ", j, " is ",
                                            ToString(step->carried[j].struct_info()),
                                            ", not a tensor"));
      }
      if (in->dtype.has_value() && out->dtype.has_value() && *in->dtype != *out->dtype) {
        rollback();
        return ctx.Invalid(absl::StrCat("loop-carried value ", j, " enters as ",
                                        in->dtype->ToString(), " and leaves the body as ",
                                        out->dtype->ToString()));
      }
      if (!in->shape.has_value()) continue;
      if (out->ndim != in->ndim) {
        rollback();
        return ctx.Unsupported(absl::StrCat("loop-carried value ", j, " enters with rank ",
                                            in->ndim, " and leaves the body with rank ", out->ndim,
                                            " (rank changes are not supported)"));
      }
      std::vector<PrimExpr> dims = *in->shape;
      bool changed = false;
      for (size_t d = 0; d < dims.size(); ++d) {
        if (out->shape.has_value() && ProveEqual(dims[d], (*out->shape)[d])) continue;
        if (general_dims.count(dims[d].as<PrimVarNode>())) continue;  // already general
        Var v(absl::StrCat(name, "_c", j, "_d", d));
        general_dims.insert(v.as<PrimVarNode>());
        dims[d] = v;
        changed = true;
      }
      if (changed) {
        carried_sinfo[j] = TensorSInfo(std::move(dims), in->dtype);
        reshaped[j] = true;
        again = true;
      }
    }
    if (again) {
      rollback();
      if (round + 1 >= kMaxShapeRounds) {
        return ctx.Unsupported("the shapes of the loop-carried values do not settle");
      }
      continue;
    }

    // Stacks for the scan outputs; their elements need a static shape.
    std::vector<Expr> stacks;
    scan_sinfo.clear();
    for (size_t k = 0; k < num_scans; ++k) {
      const TensorStructInfoNode* elem = TensorInfo(step->scans[k]);
      std::vector<PrimExpr> dims = {Var(absl::StrCat(name, "_n", k))};
      bool is_static = elem != nullptr && elem->shape.has_value() && elem->dtype.has_value();
      for (size_t d = 0; is_static && d < elem->shape->size(); ++d) {
        is_static = (*elem->shape)[d].as_int() != nullptr;
        dims.push_back((*elem->shape)[d]);
      }
      if (!is_static) {
        rollback();
        return ctx.Unsupported(absl::StrCat("scan output ", k, " is ",
                                            ToString(step->scans[k].struct_info()),
                                            "; a scan output needs a static shape and dtype"));
      }
      scan_sinfo.push_back(step->scans[k].struct_info());
      stacks.push_back(MakeVar(absl::StrCat("stacked", k), TensorSInfo(dims, elem->dtype)));
      params.push_back(stacks.back());
    }
    params.insert(params.end(), captured_params.begin(), captured_params.end());

    std::vector<StructInfo> ret_fields;
    for (size_t j = 0; j < num_carried; ++j) {
      const auto* t = carried_sinfo[j].as<TensorStructInfoNode>();
      ret_fields.push_back(reshaped[j] ? TensorSInfoOfRank(t->ndim, t->dtype) : carried_sinfo[j]);
    }
    for (size_t k = 0; k < num_scans; ++k) {
      const auto* t = scan_sinfo[k].as<TensorStructInfoNode>();
      ret_fields.push_back(TensorSInfoOfRank(t->ndim + 1, t->dtype));
    }
    const StructInfo ret = TupleSInfo(ret_fields);
    std::vector<Expr> finals = carried;
    finals.insert(finals.end(), stacks.begin(), stacks.end());
    // Declared first, so the recursive call below finds its struct info.
    module_.functions[name] = MakeFunction(params, MakeSeqExpr({}, MakeTuple(finals)), ret);

    // The rest of an iteration: stack this iteration's scan elements, count,
    // and go again (the tail call).
    absl::StatusOr<Expr> one = IntConstant(1);
    if (!one.ok()) return one.status();
    bb_.BeginDataflowBlock();
    std::vector<Expr> next = {Expr()};
    absl::Status s;
    auto emit_out = [&](absl::StatusOr<Expr> e, const char* hint) {
      if (e.ok()) e = bb_.EmitOutput(*e, hint);
      if (!e.ok()) s = e.status();
      return e.ok() ? *e : Expr();
    };
    next[0] = emit_out(ctx.EmitOp("relax.add", {iter, *one}, {}), "next_iter");
    if (trip_count.defined()) next.push_back(trip_count);
    if (cond.defined()) next.push_back(emit_out(Scalar(ctx, step->cond), "next_cond"));
    next.insert(next.end(), step->carried.begin(), step->carried.end());
    for (size_t k = 0; s.ok() && k < num_scans; ++k) {
      absl::StatusOr<Expr> e =
          ctx.EmitOp("relax.expand_dims", {step->scans[k]}, {{"axis", std::vector<int64_t>{0}}});
      if (!e.ok()) {
        s = e.status();
        break;
      }
      std::vector<Expr> parts = {stacks[k], *e};
      if (spec.scan_prepend[k]) std::swap(parts[0], parts[1]);
      next.push_back(emit_out(
          ctx.EmitOp("relax.concat", {MakeTuple(parts)}, {{"axis", int64_t{0}}}), "stacked"));
    }
    then_blocks.push_back(bb_.EndBlock());
    next.insert(next.end(), captured_params.begin(), captured_params.end());
    bb_.BeginBindingBlock();
    absl::StatusOr<Expr> again_call = s.ok() ? ctx.Emit(MakeCall(callee, next)) : s;
    then_blocks.push_back(bb_.EndBlock());

    // The entry: go on while iter < trip_count and cond.
    bb_.BeginDataflowBlock();
    absl::StatusOr<Expr> keep = cond;
    if (trip_count.defined()) {
      keep = ctx.EmitOp("relax.less", {iter, trip_count}, {});
      if (keep.ok() && cond.defined()) keep = ctx.EmitOp("relax.logical_and", {*keep, cond}, {});
      if (keep.ok()) keep = bb_.EmitOutput(*keep, "keep_going");
    }
    BindingBlock entry = bb_.EndBlock();
    absl::StatusOr<Expr> result = again_call.ok() ? keep : again_call;
    bb_.BeginBindingBlock();
    if (result.ok()) {
      result = bb_.Emit(MakeIf(*keep, MakeSeqExpr(std::move(then_blocks), *again_call),
                               MakeSeqExpr({}, MakeTuple(finals))),
                        "result");
    }
    BindingBlock exit = bb_.EndBlock();
    RestoreScope(saved_values);
    if (!result.ok()) {
      rollback();
      return absl::Status(result.status().code(),
                          absl::StrCat("onnx: ", ctx.Describe(), ": ", result.status().message()));
    }
    std::vector<BindingBlock> body_blocks;
    if (!entry.bindings.empty()) body_blocks.push_back(std::move(entry));
    body_blocks.push_back(std::move(exit));
    module_.functions[name] =
        MakeFunction(params, MakeSeqExpr(std::move(body_blocks), *result), ret);
    break;
  }

  // The call, and its results with shapes again.
  bb_.BeginBindingBlock();
  absl::Status s;
  std::vector<Expr> args;
  auto add_arg = [&](absl::StatusOr<Expr> e) {
    if (!e.ok() && s.ok()) s = e.status();
    args.push_back(e.ok() ? *e : Expr());
  };
  add_arg(IntConstant(0));
  if (spec.trip_count.defined()) add_arg(Scalar(ctx, spec.trip_count));
  if (spec.cond.defined()) add_arg(Scalar(ctx, spec.cond));
  args.insert(args.end(), spec.carried.begin(), spec.carried.end());
  for (size_t k = 0; s.ok() && k < num_scans; ++k) {
    const auto* t = scan_sinfo[k].as<TensorStructInfoNode>();
    std::vector<PrimExpr> dims = {PrimExpr(0)};
    dims.insert(dims.end(), t->shape->begin(), t->shape->end());
    add_arg(ctx.EmitOp("relax.zeros", {MakeShapeExpr(dims)}, {{"dtype", *t->dtype}}));
  }
  args.insert(args.end(), captured.begin(), captured.end());
  std::vector<Expr> outs;
  absl::StatusOr<Expr> call = s.ok() ? ctx.Emit(MakeCall(callee, args)) : s;
  for (size_t i = 0; call.ok() && i < num_carried + num_scans; ++i) {
    absl::StatusOr<Expr> item = ctx.Emit(MakeTupleGetItem(*call, static_cast<int>(i)));
    const bool stacked = i >= num_carried;
    if (item.ok() && (stacked || reshaped[i])) {
      const auto* t = stacked ? scan_sinfo[i - num_carried].as<TensorStructInfoNode>()
                              : carried_sinfo[i].as<TensorStructInfoNode>();
      std::vector<PrimExpr> dims;
      if (stacked) {
        dims.push_back(Var(absl::StrCat(name, "_len", i - num_carried)));
        dims.insert(dims.end(), t->shape->begin(), t->shape->end());
      } else {
        for (int64_t d = 0; d < t->ndim; ++d)
          dims.push_back(Var(absl::StrCat(name, "_", i, "_d", d)));
      }
      item = bb_.EmitMatchCast(*item, TensorSInfo(std::move(dims), t->dtype), "loop_out");
    }
    if (!item.ok()) call = item.status();
    if (item.ok()) outs.push_back(*item);
  }
  blocks->push_back(bb_.EndBlock());
  if (!call.ok()) return call.status();
  return outs;
}

}  // namespace tether::compiler::onnx_frontend
