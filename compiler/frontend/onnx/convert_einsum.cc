// The ONNX Einsum converter. The equation ("bij,bjk->bik", "...ii->...i",
// implicit "ij,jk") is parsed into integer labels, an ellipsis expanded into
// labels of its own aligned from the right (numpy's broadcasting), and the
// implicit output (labels seen once, sorted, ellipsis first) made explicit.
//
// A two-operand einsum that is a batched matrix product -- the operands'
// labels are shared batch labels then one free and one contracted label in
// either order, the output the batch labels and the two free ones --
// becomes relax.matmul (with permute_dims for a transposed operand), which
// has the fast GEMM schedules: attention's "bhqd,bhkd->bhqk" and
// "bhqk,bhkd->bhqd". Anything else is relax.einsum (compiler/op/einsum.cc),
// a direct summation.
#include <algorithm>
#include <cctype>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "compiler/frontend/onnx/convert_nn_util.h"
#include "compiler/frontend/onnx/converter.h"
#include "runtime/core/error.h"

namespace tether::compiler::onnx_frontend {
namespace {

using nn_convert::InputRank;

// Labels of the ellipsis dims: past every letter's.
constexpr int64_t kEllipsisBase = 1000;

struct Equation {
  std::vector<std::vector<int64_t>> operands;
  std::vector<int64_t> output;
};

// One term ("b...ij") for a value of rank `rank` (-1: the output, whose
// ellipsis has `ellipsis_rank` dims).
absl::StatusOr<std::vector<int64_t>> ParseTerm(ConvertContext& ctx, const std::string& term,
                                               int rank, int* ellipsis_rank) {
  std::vector<int64_t> labels;
  int letters = 0;
  size_t dots = term.find("...");
  for (char ch : term) {
    if (std::isalpha(static_cast<unsigned char>(ch))) ++letters;
  }
  if (dots != std::string::npos && term.find("...", dots + 3) != std::string::npos) {
    return ctx.Invalid(absl::StrCat("term '", term, "' has more than one ellipsis"));
  }
  int ell = 0;
  if (dots != std::string::npos) {
    ell = rank >= 0 ? rank - letters : *ellipsis_rank;
    if (ell < 0) return ctx.Invalid(absl::StrCat("term '", term, "' has more labels than dims"));
    if (rank >= 0) *ellipsis_rank = std::max(*ellipsis_rank, ell);
  } else if (rank >= 0 && letters != rank) {
    return ctx.Invalid(
        absl::StrCat("term '", term, "' has ", letters, " labels for ", rank, " dims"));
  }
  for (size_t i = 0; i < term.size(); ++i) {
    const char ch = term[i];
    if (i == dots) {
      // Right-aligned: the last ellipsis dim of every operand shares a label.
      for (int k = 0; k < ell; ++k) labels.push_back(kEllipsisBase + (*ellipsis_rank - ell) + k);
      i += 2;
    } else if (std::isalpha(static_cast<unsigned char>(ch))) {
      labels.push_back(static_cast<unsigned char>(ch));
    } else if (ch != ' ') {
      return ctx.Invalid(
          absl::StrCat("unexpected character '", std::string(1, ch), "' in the equation"));
    }
  }
  return labels;
}

absl::StatusOr<Equation> ParseEquation(ConvertContext& ctx, const std::string& eq) {
  Equation e;
  std::vector<std::string> sides = absl::StrSplit(eq, "->");
  if (sides.size() > 2) return ctx.Invalid(absl::StrCat("equation '", eq, "' has two arrows"));
  std::vector<std::string> terms = absl::StrSplit(sides[0], ',');
  if (static_cast<int>(terms.size()) != ctx.num_inputs()) {
    return ctx.Invalid(absl::StrCat("equation '", eq, "' has ", terms.size(),
                                    " operands, the node ", ctx.num_inputs(), " inputs"));
  }
  int ellipsis_rank = 0;
  // Two passes: the widest ellipsis first, so shorter ones align right.
  for (int pass = 0; pass < 2; ++pass) {
    e.operands.clear();
    for (size_t i = 0; i < terms.size(); ++i) {
      TETHER_ASSIGN_OR_RETURN(int rank, InputRank(ctx, static_cast<int>(i)));
      TETHER_ASSIGN_OR_RETURN(std::vector<int64_t> l,
                              ParseTerm(ctx, terms[i], rank, &ellipsis_rank));
      e.operands.push_back(std::move(l));
    }
  }
  if (sides.size() == 2) {
    TETHER_ASSIGN_OR_RETURN(e.output, ParseTerm(ctx, sides[1], -1, &ellipsis_rank));
    return e;
  }
  // Implicit output: the ellipsis dims, then the letters seen once, sorted.
  std::map<int64_t, int> count;
  for (const auto& op : e.operands) {
    for (int64_t l : op) ++count[l];
  }
  for (int k = 0; k < ellipsis_rank; ++k) e.output.push_back(kEllipsisBase + k);
  for (const auto& [l, n] : count) {
    if (l < kEllipsisBase && n == 1) e.output.push_back(l);
  }
  return e;
}

// For "batch + {free, summed}" operands: the permutation putting the free
// label at `free_pos` (0: rows, 1: cols) of the last two dims.
std::optional<std::vector<int64_t>> MatmulOrder(const std::vector<int64_t>& labels, size_t batch,
                                                int64_t free, int64_t summed, int free_pos) {
  if (labels.size() != batch + 2) return std::nullopt;
  const int64_t a = labels[batch], b = labels[batch + 1];
  const int64_t want0 = free_pos == 0 ? free : summed, want1 = free_pos == 0 ? summed : free;
  std::vector<int64_t> perm;
  for (size_t i = 0; i < batch; ++i) perm.push_back(static_cast<int64_t>(i));
  if (a == want0 && b == want1) return perm;  // no permutation needed
  if (a == want1 && b == want0) {
    perm.push_back(static_cast<int64_t>(batch) + 1);
    perm.push_back(static_cast<int64_t>(batch));
    return perm;
  }
  return std::nullopt;
}

// relax.matmul when `e` is a batched matrix product (see the file comment).
absl::StatusOr<std::optional<Expr>> AsMatmul(ConvertContext& ctx, const Equation& e) {
  if (e.operands.size() != 2 || e.output.size() < 2) return std::optional<Expr>();
  const size_t batch = e.output.size() - 2;
  const std::vector<int64_t>& a = e.operands[0];
  const std::vector<int64_t>& b = e.operands[1];
  if (a.size() != batch + 2 || b.size() != batch + 2) return std::optional<Expr>();
  for (size_t i = 0; i < batch; ++i) {
    if (a[i] != e.output[i] || b[i] != e.output[i]) return std::optional<Expr>();
  }
  const int64_t i = e.output[batch], k = e.output[batch + 1];
  // The contracted label: A's label that is not i.
  int64_t j = -1;
  for (size_t d = batch; d < batch + 2; ++d) {
    if (a[d] != i) j = a[d];
  }
  if (j < 0 || j == k || i == k) return std::optional<Expr>();
  std::optional<std::vector<int64_t>> pa = MatmulOrder(a, batch, i, j, 0);
  std::optional<std::vector<int64_t>> pb = MatmulOrder(b, batch, k, j, 1);
  if (!pa.has_value() || !pb.has_value()) return std::optional<Expr>();
  Expr ops[2];
  const std::vector<int64_t>* perms[2] = {&*pa, &*pb};
  for (int n = 0; n < 2; ++n) {
    TETHER_ASSIGN_OR_RETURN(ops[n], ctx.Input(n));
    if (perms[n]->size() == batch + 2) {
      TETHER_ASSIGN_OR_RETURN(ops[n],
                              ctx.EmitOp("relax.permute_dims", {ops[n]}, {{"axes", *perms[n]}}));
    }
  }
  TETHER_ASSIGN_OR_RETURN(Expr y, ctx.EmitOp("relax.matmul", {ops[0], ops[1]}));
  return std::optional<Expr>(y);
}

ConvertResult ConvertEinsum(ConvertContext& ctx) {
  if (!ctx.HasAttr("equation")) return ctx.Invalid("missing attribute 'equation'");
  std::string eq = ctx.AttrString("equation", "");
  eq.erase(std::remove(eq.begin(), eq.end(), ' '), eq.end());
  TETHER_ASSIGN_OR_RETURN(Equation e, ParseEquation(ctx, eq));
  TETHER_ASSIGN_OR_RETURN(std::optional<Expr> mm, AsMatmul(ctx, e));
  if (mm.has_value()) return One(*mm);
  std::vector<int64_t> labels;
  std::vector<Expr> args;
  for (size_t i = 0; i < e.operands.size(); ++i) {
    TETHER_ASSIGN_OR_RETURN(Expr x, ctx.Input(static_cast<int>(i)));
    args.push_back(x);
    labels.insert(labels.end(), e.operands[i].begin(), e.operands[i].end());
    labels.push_back(-1);
  }
  labels.insert(labels.end(), e.output.begin(), e.output.end());
  return One(ctx.EmitOp("relax.einsum", std::move(args), {{"labels", labels}}));
}

}  // namespace

// Called from RegisterNNConverters (convert_nn.cc).
void RegisterEinsumConverter() { RegisterConverter("Einsum", 12, ConvertEinsum); }

}  // namespace tether::compiler::onnx_frontend
