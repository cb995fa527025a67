// relax.einsum(x0, x1, ...) with attr "labels": Einstein summation over
// integer labels, the ONNX importer's parse of an equation (ellipses
// already expanded into labels of their own). "labels" is every operand's
// labels, each list ended by -1, then the output's: "ij,jk->ik" is
// [0, 1, -1, 1, 2, -1, 0, 2]. A label repeated within an operand takes its
// diagonal; a label of the operands missing from the output is summed over.
// A label's extent is the largest of its dims, and a dim of 1 broadcasts
// (ellipsis dims), as numpy.einsum.
//
// One thread per output element sums the products over the summed labels
// in serial loops (the output's own labels fixed). Einsums that are matrix
// products should not reach this kernel: the importer lowers those to
// relax.matmul.
#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler/lower/lower.h"
#include "compiler/op/op.h"
#include "compiler/op/op_common.h"
#include "compiler/tir/arith.h"
#include "runtime/core/error.h"

namespace tether::compiler {
namespace {

struct Parsed {
  std::vector<std::vector<int64_t>> operands;
  std::vector<int64_t> output;
};

absl::StatusOr<Parsed> ParseLabels(const CallNode& call) {
  auto it = call.attrs.find("labels");
  if (it == call.attrs.end() || !std::holds_alternative<std::vector<int64_t>>(it->second)) {
    return OpError(call, "missing attribute labels");
  }
  Parsed p;
  std::vector<int64_t> cur;
  for (int64_t l : std::get<std::vector<int64_t>>(it->second)) {
    if (l == -1) {
      p.operands.push_back(cur);
      cur.clear();
    } else if (l < 0) {
      return OpError(call, absl::StrCat("bad label ", l));
    } else {
      cur.push_back(l);
    }
  }
  p.output = cur;
  if (p.operands.size() != call.args.size()) {
    return OpError(call, absl::StrCat(p.operands.size(), " operand label lists for ",
                                      call.args.size(), " operands"));
  }
  return p;
}

// The extent of every label (the largest of its dims; 1 broadcasts).
absl::StatusOr<std::map<int64_t, PrimExpr>> LabelExtents(
    const CallNode& call, const Parsed& p, const std::vector<std::vector<PrimExpr>>& shapes) {
  std::map<int64_t, PrimExpr> extent;
  for (size_t i = 0; i < p.operands.size(); ++i) {
    if (shapes[i].size() != p.operands[i].size()) {
      return OpError(call, absl::StrCat("operand ", i, " has ", shapes[i].size(), " dims for ",
                                        p.operands[i].size(), " labels"));
    }
    for (size_t d = 0; d < shapes[i].size(); ++d) {
      const int64_t l = p.operands[i][d];
      const PrimExpr& dim = shapes[i][d];
      auto e = extent.find(l);
      if (e == extent.end() || AsConstInt(e->second) == 1) {
        extent[l] = dim;
        continue;
      }
      if (AsConstInt(dim) == 1 || ProveEqual(e->second, dim)) continue;
      std::optional<int64_t> a = AsConstInt(e->second), b = AsConstInt(dim);
      if (a.has_value() && b.has_value()) {
        return OpError(call, absl::StrCat("label ", l, " has extents ", *a, " and ", *b));
      }
    }
  }
  for (int64_t l : p.output) {
    if (!extent.count(l))
      return OpError(call, absl::StrCat("output label ", l, " is no operand's"));
  }
  return extent;
}

absl::StatusOr<StructInfo> InferEinsum(const CallNode& call) {
  if (call.args.empty()) return OpError(call, "expects at least one operand");
  TETHER_ASSIGN_OR_RETURN(Parsed p, ParseLabels(call));
  std::vector<std::vector<PrimExpr>> shapes;
  std::optional<DataType> dtype;
  for (size_t i = 0; i < call.args.size(); ++i) {
    TETHER_ASSIGN_OR_RETURN(const TensorStructInfoNode* t, TensorArg(call, i));
    if (!t->shape.has_value() || !t->dtype.has_value()) {
      return OpError(call, absl::StrCat("operand ", i, " has no known shape and dtype"));
    }
    if (dtype.has_value() && *dtype != *t->dtype) {
      return OpError(
          call, absl::StrCat("operands of ", dtype->ToString(), " and ", t->dtype->ToString()));
    }
    dtype = t->dtype;
    shapes.push_back(*t->shape);
  }
  TETHER_ASSIGN_OR_RETURN(auto extent, LabelExtents(call, p, shapes));
  std::vector<PrimExpr> out;
  for (int64_t l : p.output) out.push_back(extent.at(l));
  return TensorSInfo(std::move(out), dtype);
}

absl::StatusOr<Stmt> ScheduleEinsum(const LowerContext& ctx, const std::vector<Buffer>& outputs,
                                    const Epilogue& epilogue) {
  const CallNode& call = *ctx.call;
  TETHER_ASSIGN_OR_RETURN(Parsed p, ParseLabels(call));
  std::vector<std::vector<PrimExpr>> shapes;
  for (size_t i = 0; i < call.args.size(); ++i) shapes.push_back(ArgShape(ctx, i));
  TETHER_ASSIGN_OR_RETURN(auto extent, LabelExtents(call, p, shapes));
  std::vector<int64_t> summed;
  for (const auto& [l, e] : extent) {
    if (std::find(p.output.begin(), p.output.end(), l) == p.output.end()) summed.push_back(l);
  }
  const Buffer& out = outputs[0];
  const DataType dtype = out->dtype;
  return MakeParallelLoopNest(
      OutShape(ctx),
      [&](const std::vector<PrimExpr>& out_idx) -> Stmt {
        std::map<int64_t, PrimExpr> at;
        for (size_t d = 0; d < p.output.size(); ++d) at[p.output[d]] = out_idx[d];
        std::vector<Var> loops;
        for (int64_t l : summed) {
          loops.emplace_back(absl::StrCat("k", l));
          at[l] = loops.back();
        }
        PrimExpr product;
        for (size_t i = 0; i < p.operands.size(); ++i) {
          std::vector<PrimExpr> idx;
          for (size_t d = 0; d < p.operands[i].size(); ++d) {
            const PrimExpr& dim = shapes[i][d];
            const bool broadcast =
                AsConstInt(dim) == 1 && AsConstInt(extent.at(p.operands[i][d])) != 1;
            idx.push_back(broadcast ? PrimExpr(0) : at.at(p.operands[i][d]));
          }
          PrimExpr v = ctx.inputs[i](idx);
          product = product.defined() ? product * v : v;
        }
        if (summed.empty()) return Store(out, out_idx, epilogue(product, out_idx));
        Buffer acc = MakeBuffer("acc", dtype, {1}, BufferNode::Scope::kLocal);
        Stmt body = Store(acc, {0}, Load(acc, {0}) + product);
        for (size_t s = summed.size(); s-- > 0;) {
          body = For(loops[s], 0, extent.at(summed[s]), ForKind::kSerial, body);
        }
        return Allocate(acc, Seq({Store(acc, {0}, MakeConst(dtype, 0)), body,
                                  Store(out, out_idx, epilogue(Load(acc, {0}), out_idx))}));
      },
      ForKind::kSerial, /*gpu=*/ctx.target.gpu);
}

}  // namespace

void RegisterEinsumOp() {
  RegisterScheduleOp("relax.einsum", OpPattern::kOpaque, -1, InferEinsum, ScheduleEinsum);
}

}  // namespace tether::compiler
