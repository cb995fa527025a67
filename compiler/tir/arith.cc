// The canonical-form simplifier: integer expressions are turned into a
// polynomial (monomials of atoms with constant coefficients), which is then
// printed back as a PrimExpr in a fixed order. Atoms are identified by a
// structural key in which variables carry their node address, so two
// different variables named "n" never cancel.
#include "compiler/tir/arith.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <numeric>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace tether::compiler {
namespace {

bool IsIntLike(DataType t) { return (t.is_int() || t.is_uint()) && !t.is_bool(); }

// Counts folds that overflowed int64 (the result wraps, with no undefined
// behaviour). Simplify and ProveEqual discard a simplification that saw one
// and keep the expression as written: a constant past int64 belongs to a
// shape no tensor can have, and the checks that size tensors refuse it with
// a message; the simplifier must not crash or invent a value first.
thread_local int fold_overflows = 0;

int64_t FoldAdd(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) ++fold_overflows;
  return r;
}

int64_t FoldMul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) ++fold_overflows;
  return r;
}

int64_t FoldNeg(int64_t a) { return FoldMul(a, -1); }

// A structural key of an atom; variables are keyed by name and node, so the
// order is readable (by name) and distinct variables stay distinct.
void AppendKey(const PrimExpr& e, std::string* out) {
  if (!e.defined()) {
    out->append("?");
    return;
  }
  switch (e.kind()) {
    case PrimKind::kIntImm:
      absl::StrAppend(out, e.as<IntImmNode>()->value, ":", e.dtype().ToString());
      return;
    case PrimKind::kFloatImm:
      absl::StrAppend(out, e.as<FloatImmNode>()->value, ":", e.dtype().ToString());
      return;
    case PrimKind::kVar: {
      char addr[32];
      std::snprintf(addr, sizeof(addr), "%p", static_cast<const void*>(e.get()));
      absl::StrAppend(out, e.as<PrimVarNode>()->name, "#", addr);
      return;
    }
    case PrimKind::kNot:
      out->append("not(");
      AppendKey(e.as<NotNode>()->a, out);
      out->append(")");
      return;
    case PrimKind::kSelect: {
      const auto* s = e.as<SelectNode>();
      out->append("select(");
      AppendKey(s->cond, out);
      out->append(",");
      AppendKey(s->true_value, out);
      out->append(",");
      AppendKey(s->false_value, out);
      out->append(")");
      return;
    }
    case PrimKind::kCast:
      absl::StrAppend(out, "cast:", e.dtype().ToString(), "(");
      AppendKey(e.as<CastNode>()->value, out);
      out->append(")");
      return;
    case PrimKind::kLoad: {
      const auto* l = e.as<LoadNode>();
      char addr[32];
      std::snprintf(addr, sizeof(addr), "%p", static_cast<const void*>(l->buffer.get()));
      absl::StrAppend(out, l->buffer->name, "#", addr, "[");
      for (const PrimExpr& i : l->indices) {
        AppendKey(i, out);
        out->append(",");
      }
      out->append("]");
      return;
    }
    case PrimKind::kCall: {
      const auto* c = e.as<PrimCallNode>();
      absl::StrAppend(out, c->op, ":", e.dtype().ToString(), "(");
      for (const PrimExpr& a : c->args) {
        AppendKey(a, out);
        out->append(",");
      }
      out->append(")");
      return;
    }
    default: {
      const auto* b = e.as<BinaryNode>();
      absl::StrAppend(out, PrimKindName(e.kind()), "(");
      AppendKey(b->a, out);
      out->append(",");
      AppendKey(b->b, out);
      out->append(")");
      return;
    }
  }
}

std::string Key(const PrimExpr& e) {
  std::string k;
  AppendKey(e, &k);
  return k;
}

}  // namespace

PrimExpr MapChildren(const PrimExpr& e, const std::function<PrimExpr(const PrimExpr&)>& f) {
  if (!e.defined()) return e;
  switch (e.kind()) {
    case PrimKind::kIntImm:
    case PrimKind::kFloatImm:
    case PrimKind::kVar:
      return e;
    case PrimKind::kNot: {
      PrimExpr a = f(e.as<NotNode>()->a);
      return a.same_as(e.as<NotNode>()->a) ? e : Not(a);
    }
    case PrimKind::kSelect: {
      const auto* s = e.as<SelectNode>();
      PrimExpr c = f(s->cond), t = f(s->true_value), fv = f(s->false_value);
      if (c.same_as(s->cond) && t.same_as(s->true_value) && fv.same_as(s->false_value)) return e;
      return Select(c, t, fv);
    }
    case PrimKind::kCast: {
      PrimExpr v = f(e.as<CastNode>()->value);
      return v.same_as(e.as<CastNode>()->value) ? e : Cast(e.dtype(), v);
    }
    case PrimKind::kLoad: {
      const auto* l = e.as<LoadNode>();
      std::vector<PrimExpr> idx;
      bool changed = false;
      for (const PrimExpr& i : l->indices) {
        idx.push_back(f(i));
        changed |= !idx.back().same_as(i);
      }
      return changed ? Load(l->buffer, std::move(idx)) : e;
    }
    case PrimKind::kCall: {
      const auto* c = e.as<PrimCallNode>();
      std::vector<PrimExpr> args;
      bool changed = false;
      for (const PrimExpr& a : c->args) {
        args.push_back(f(a));
        changed |= !args.back().same_as(a);
      }
      return changed ? Call(e.dtype(), c->op, std::move(args)) : e;
    }
    default: {
      const auto* b = e.as<BinaryNode>();
      PrimExpr a = f(b->a), bb = f(b->b);
      if (a.same_as(b->a) && bb.same_as(b->b)) return e;
      return MakeBinary(e.kind(), a, bb);
    }
  }
}

namespace {

// A sum of monomials plus a constant, over one integer dtype.
class Poly {
 public:
  struct Mono {
    std::vector<PrimExpr> atoms;  // sorted by key
    int64_t coef = 0;
  };
  using Terms = std::map<std::vector<std::string>, Mono>;

  explicit Poly(DataType dtype, int64_t constant = 0) : dtype_(dtype), constant_(constant) {}

  static Poly Atom(DataType dtype, const PrimExpr& atom) {
    Poly p(dtype);
    p.terms_[{Key(atom)}] = Mono{{atom}, 1};
    return p;
  }

  bool is_const() const { return terms_.empty(); }
  int64_t constant() const { return constant_; }
  const Terms& terms() const { return terms_; }
  DataType dtype() const { return dtype_; }

  void AddScaled(const Poly& o, int64_t scale) {
    constant_ = FoldAdd(constant_, FoldMul(o.constant_, scale));
    for (const auto& [key, m] : o.terms_) AddTerm(key, m.atoms, FoldMul(m.coef, scale));
  }

  Poly Times(const Poly& o) const {
    Poly r(dtype_, FoldMul(constant_, o.constant_));
    for (const auto& [k, m] : terms_) r.AddTerm(k, m.atoms, FoldMul(m.coef, o.constant_));
    for (const auto& [k, m] : o.terms_) r.AddTerm(k, m.atoms, FoldMul(m.coef, constant_));
    for (const auto& [ka, ma] : terms_) {
      for (const auto& [kb, mb] : o.terms_) {
        std::vector<std::pair<std::string, PrimExpr>> merged;
        for (size_t i = 0; i < ka.size(); ++i) merged.emplace_back(ka[i], ma.atoms[i]);
        for (size_t i = 0; i < kb.size(); ++i) merged.emplace_back(kb[i], mb.atoms[i]);
        std::stable_sort(merged.begin(), merged.end(),
                         [](const auto& x, const auto& y) { return x.first < y.first; });
        std::vector<std::string> key;
        std::vector<PrimExpr> atoms;
        for (auto& [k, a] : merged) {
          key.push_back(k);
          atoms.push_back(a);
        }
        r.AddTerm(key, atoms, FoldMul(ma.coef, mb.coef));
      }
    }
    return r;
  }

  // Whether every coefficient and the constant are multiples of c.
  bool DivisibleBy(int64_t c) const {
    if (constant_ % c != 0) return false;
    for (const auto& [k, m] : terms_) {
      if (m.coef % c != 0) return false;
    }
    return true;
  }

  // The poly with every coefficient and the constant divided by c (exact).
  Poly DividedBy(int64_t c) const {
    Poly r(dtype_, constant_ / c);
    for (const auto& [k, m] : terms_) r.terms_[k] = Mono{m.atoms, m.coef / c};
    return r;
  }

  // Splits into (multiple of c) / c and a remainder, for floordiv: terms
  // whose coefficient is a multiple of c go to the quotient, others to the
  // remainder; the constant is split by floor division.
  void SplitForFloorDiv(int64_t c, Poly* quotient, Poly* remainder) const {
    *quotient = Poly(dtype_, FloorDivInt(constant_, c));
    *remainder = Poly(dtype_, FloorModInt(constant_, c));
    for (const auto& [k, m] : terms_) {
      if (m.coef % c == 0) {
        quotient->terms_[k] = Mono{m.atoms, m.coef / c};
      } else {
        remainder->terms_[k] = m;
      }
    }
  }

  // The poly modulo c: coefficients and constant reduced into [0, c) (or (c, 0]).
  Poly ModuloTerms(int64_t c) const {
    Poly r(dtype_, FloorModInt(constant_, c));
    for (const auto& [k, m] : terms_) {
      int64_t coef = FloorModInt(m.coef, c);
      if (coef != 0) r.terms_[k] = Mono{m.atoms, coef};
    }
    return r;
  }

  // Folds k * c * floordiv(x, c) + k * floormod(y, c) into k * x where x
  // and y agree modulo c (floormod's operand has its coefficients reduced
  // mod c, floordiv's not): the identity c * floordiv(x, c) + floormod(x, c)
  // == x. An index split into (row, column) of a flattened extent and
  // flattened again (a 1x1 convolution read as a matrix) becomes linear in
  // the loop variable again, so its lanes read contiguous memory.
  // `to_poly` is ToPoly (declared after the class).
  void CombineDivMod(const std::function<Poly(const PrimExpr&)>& to_poly) {
    while (CombineOneDivMod(to_poly)) {
    }
  }

  // The single atom when this is exactly 1 * atom.
  const PrimExpr* AsSingleAtom() const {
    if (constant_ != 0 || terms_.size() != 1) return nullptr;
    const Mono& m = terms_.begin()->second;
    if (m.coef != 1 || m.atoms.size() != 1) return nullptr;
    return &m.atoms[0];
  }

  PrimExpr ToExpr() const {
    auto mono_expr = [&](const Mono& m, int64_t coef) {
      PrimExpr t = m.atoms[0];
      for (size_t i = 1; i < m.atoms.size(); ++i) t = Mul(t, m.atoms[i]);
      if (coef != 1) t = Mul(t, IntImm(dtype_, coef));
      return t;
    };
    PrimExpr sum;
    for (const auto& [k, m] : terms_) {
      if (m.coef <= 0) continue;
      PrimExpr t = mono_expr(m, m.coef);
      sum = sum.defined() ? Add(sum, t) : t;
    }
    for (const auto& [k, m] : terms_) {
      if (m.coef > 0) continue;
      sum = sum.defined() ? Sub(sum, mono_expr(m, FoldNeg(m.coef))) : mono_expr(m, m.coef);
    }
    if (!sum.defined()) return IntImm(dtype_, constant_);
    if (constant_ > 0) return Add(sum, IntImm(dtype_, constant_));
    if (constant_ < 0) return Sub(sum, IntImm(dtype_, FoldNeg(constant_)));
    return sum;
  }

 private:
  void AddTerm(const std::vector<std::string>& key, const std::vector<PrimExpr>& atoms,
               int64_t coef) {
    if (coef == 0) return;
    auto it = terms_.find(key);
    if (it == terms_.end()) {
      terms_.emplace(key, Mono{atoms, coef});
      return;
    }
    it->second.coef = FoldAdd(it->second.coef, coef);
    if (it->second.coef == 0) terms_.erase(it);
  }

  // One step of CombineDivMod; whether it found a pair.
  bool CombineOneDivMod(const std::function<Poly(const PrimExpr&)>& to_poly) {
    for (auto mod = terms_.begin(); mod != terms_.end(); ++mod) {
      const Mono& mm = mod->second;
      if (mm.atoms.size() != 1 || mm.atoms[0].kind() != PrimKind::kFloorMod) continue;
      const auto* m = mm.atoms[0].as<BinaryNode>();
      const int64_t* c = m->b.as_int();
      if (c == nullptr || *c <= 0) continue;
      const Poly y = to_poly(m->a);
      for (auto div = terms_.begin(); div != terms_.end(); ++div) {
        const Mono& dm = div->second;
        if (dm.atoms.size() != 1 || dm.atoms[0].kind() != PrimKind::kFloorDiv) continue;
        const auto* d = dm.atoms[0].as<BinaryNode>();
        const int64_t* dc = d->b.as_int();
        if (dc == nullptr || *dc != *c || dm.coef != FoldMul(mm.coef, *c)) continue;
        Poly x = to_poly(d->a);
        Poly diff = x;
        diff.AddScaled(y, -1);
        if (!diff.DivisibleBy(*c)) continue;
        const int64_t k = mm.coef;
        terms_.erase(div);
        terms_.erase(mod);
        AddScaled(x, k);
        return true;
      }
    }
    return false;
  }

  DataType dtype_;
  int64_t constant_;
  Terms terms_;
};

PrimExpr SimplifyImpl(const PrimExpr& e);

// min/max/select arms in a fixed order so min(a, b) and min(b, a) agree.
PrimExpr OrderedBinary(PrimKind kind, PrimExpr a, PrimExpr b) {
  if (Key(b) < Key(a)) std::swap(a, b);
  return MakeBinary(kind, std::move(a), std::move(b));
}

Poly ToPoly(const PrimExpr& e) {
  DataType dt = e.dtype();
  switch (e.kind()) {
    case PrimKind::kIntImm:
      return Poly(dt, e.as<IntImmNode>()->value);
    case PrimKind::kVar:
      return Poly::Atom(dt, e);
    case PrimKind::kAdd:
    case PrimKind::kSub: {
      const auto* b = e.as<BinaryNode>();
      Poly r = ToPoly(b->a);
      r.AddScaled(ToPoly(b->b), e.kind() == PrimKind::kAdd ? 1 : -1);
      r.CombineDivMod(ToPoly);
      return r;
    }
    case PrimKind::kMul: {
      const auto* b = e.as<BinaryNode>();
      return ToPoly(b->a).Times(ToPoly(b->b));
    }
    case PrimKind::kFloorDiv:
    case PrimKind::kFloorMod:
    case PrimKind::kDiv: {
      const auto* b = e.as<BinaryNode>();
      Poly pa = ToPoly(b->a);
      Poly pb = ToPoly(b->b);
      // Not by -1: INT64_MIN / -1 overflows (and x / -1 is rare).
      if (pb.is_const() && pb.constant() != 0 && pb.constant() != -1) {
        int64_t c = pb.constant();
        if (e.kind() == PrimKind::kDiv) {
          // Truncating division is exact only for exact multiples.
          if (pa.DivisibleBy(c)) return pa.DividedBy(c);
        } else if (e.kind() == PrimKind::kFloorDiv) {
          Poly q(dt), r(dt);
          pa.SplitForFloorDiv(c, &q, &r);
          if (!r.is_const()) {
            PrimExpr atom;
            const PrimExpr* inner = r.AsSingleAtom();
            const BinaryNode* nested =
                inner && inner->kind() == PrimKind::kFloorDiv ? inner->as<BinaryNode>() : nullptr;
            const int64_t* inner_c = nested ? nested->b.as_int() : nullptr;
            if (inner_c && *inner_c > 0 && c > 0) {
              // floordiv(floordiv(x, a), c) == floordiv(x, a * c) for positive a, c.
              atom = FloorDiv(nested->a, IntImm(dt, FoldMul(*inner_c, c)));
            } else {
              atom = FloorDiv(r.ToExpr(), IntImm(dt, c));
            }
            q.AddScaled(Poly::Atom(dt, atom), 1);
          }
          return q;
        } else {
          Poly r = pa.ModuloTerms(c);
          if (r.is_const()) return r;
          return Poly::Atom(dt, FloorMod(r.ToExpr(), IntImm(dt, c)));
        }
      }
      return Poly::Atom(dt, MakeBinary(e.kind(), pa.ToExpr(), pb.ToExpr()));
    }
    case PrimKind::kMin:
    case PrimKind::kMax: {
      const auto* b = e.as<BinaryNode>();
      Poly pa = ToPoly(b->a);
      Poly pb = ToPoly(b->b);
      Poly diff = pa;
      diff.AddScaled(pb, -1);
      if (diff.is_const()) {
        bool a_smaller = diff.constant() <= 0;
        return (e.kind() == PrimKind::kMin) == a_smaller ? pa : pb;
      }
      return Poly::Atom(dt, OrderedBinary(e.kind(), pa.ToExpr(), pb.ToExpr()));
    }
    case PrimKind::kSelect: {
      const auto* s = e.as<SelectNode>();
      PrimExpr cond = SimplifyImpl(s->cond);
      if (const int64_t* v = cond.as_int()) return ToPoly(*v ? s->true_value : s->false_value);
      Poly pt = ToPoly(s->true_value);
      Poly pf = ToPoly(s->false_value);
      Poly diff = pt;
      diff.AddScaled(pf, -1);
      if (diff.is_const() && diff.constant() == 0) return pt;
      return Poly::Atom(dt, Select(cond, pt.ToExpr(), pf.ToExpr()));
    }
    default: {
      // Casts, loads, calls: an atom over simplified children.
      PrimExpr s = MapChildren(e, SimplifyImpl);
      if (const int64_t* v = s.as_int(); v && IsIntLike(s.dtype())) return Poly(dt, *v);
      return Poly::Atom(dt, s);
    }
  }
}

bool IsComparison(PrimKind k) { return k >= PrimKind::kEQ && k <= PrimKind::kGE; }

PrimExpr SimplifyImpl(const PrimExpr& e) {
  if (!e.defined()) return e;
  if (IsIntLike(e.dtype())) return ToPoly(e).ToExpr();
  if (IsComparison(e.kind())) {
    const auto* b = e.as<BinaryNode>();
    if (IsIntLike(b->a.dtype()) && IsIntLike(b->b.dtype())) {
      Poly diff = ToPoly(b->a);
      diff.AddScaled(ToPoly(b->b), -1);
      if (diff.is_const()) {
        int64_t d = diff.constant();
        switch (e.kind()) {
          case PrimKind::kEQ:
            return BoolImm(d == 0);
          case PrimKind::kNE:
            return BoolImm(d != 0);
          case PrimKind::kLT:
            return BoolImm(d < 0);
          case PrimKind::kLE:
            return BoolImm(d <= 0);
          case PrimKind::kGT:
            return BoolImm(d > 0);
          case PrimKind::kGE:
            return BoolImm(d >= 0);
          default:
            break;
        }
      }
    }
  }
  // Floats and booleans: constant folding through the constructors.
  return MapChildren(e, SimplifyImpl);
}

class Substituter {
 public:
  explicit Substituter(const VarMap& map) : map_(&map) {}

  PrimExpr Visit(const PrimExpr& e) {
    if (!e.defined()) return e;
    if (const auto* v = e.as<PrimVarNode>()) {
      auto it = map_->find(v);
      return it == map_->end() ? e : it->second;
    }
    return MapChildren(e, [this](const PrimExpr& c) { return Visit(c); });
  }

  Stmt Visit(const Stmt& s) {
    if (!s.defined()) return s;
    switch (s.kind()) {
      case StmtKind::kFor: {
        const auto* f = s.as<ForNode>();
        PrimExpr min = Visit(f->min), extent = Visit(f->extent);
        Var var = f->var;
        Stmt body = VisitScoped(f->var, &var, f->body);
        if (min.same_as(f->min) && extent.same_as(f->extent) && var.same_as(f->var) &&
            body.get() == f->body.get()) {
          return s;
        }
        return For(var, min, extent, f->for_kind, body);
      }
      case StmtKind::kLet: {
        const auto* l = s.as<LetStmtNode>();
        PrimExpr value = Visit(l->value);
        Var var = l->var;
        Stmt body = VisitScoped(l->var, &var, l->body);
        if (value.same_as(l->value) && var.same_as(l->var) && body.get() == l->body.get()) return s;
        return LetStmt(var, value, body);
      }
      case StmtKind::kStore: {
        const auto* st = s.as<StoreNode>();
        std::vector<PrimExpr> idx;
        bool changed = false;
        for (const PrimExpr& i : st->indices) {
          idx.push_back(Visit(i));
          changed |= !idx.back().same_as(i);
        }
        PrimExpr value = Visit(st->value);
        if (!changed && value.same_as(st->value)) return s;
        return Store(st->buffer, std::move(idx), value);
      }
      case StmtKind::kAllocate: {
        const auto* a = s.as<AllocateNode>();
        Stmt body = Visit(a->body);
        return body.get() == a->body.get() ? s : Allocate(a->buffer, body);
      }
      case StmtKind::kSeq: {
        const auto* q = s.as<SeqStmtNode>();
        std::vector<Stmt> seq;
        bool changed = false;
        for (const Stmt& c : q->seq) {
          seq.push_back(Visit(c));
          changed |= seq.back().get() != c.get();
        }
        return changed ? Seq(std::move(seq)) : s;
      }
      case StmtKind::kIf: {
        const auto* i = s.as<IfThenElseNode>();
        PrimExpr cond = Visit(i->cond);
        Stmt t = Visit(i->then_case), f = Visit(i->else_case);
        if (cond.same_as(i->cond) && t.get() == i->then_case.get() &&
            f.get() == i->else_case.get()) {
          return s;
        }
        return IfThenElse(cond, t, f);
      }
      case StmtKind::kAssert: {
        const auto* a = s.as<AssertStmtNode>();
        PrimExpr cond = Visit(a->cond);
        Stmt body = Visit(a->body);
        if (cond.same_as(a->cond) && body.get() == a->body.get()) return s;
        return AssertStmt(cond, a->message, body);
      }
      case StmtKind::kEvaluate: {
        const auto* ev = s.as<EvaluateNode>();
        PrimExpr v = Visit(ev->value);
        return v.same_as(ev->value) ? s : Evaluate(v);
      }
      case StmtKind::kMatrixTile: {
        const auto* m = s.as<MatrixTileNode>();
        bool changed = false;
        TileRef frag = VisitTile(m->frag, &changed);
        std::vector<TileRef> args;
        for (const TileRef& a : m->args) args.push_back(VisitTile(a, &changed));
        PrimExpr value = m->value.defined() ? Visit(m->value) : m->value;
        changed |= !value.same_as(m->value);
        if (!changed) return s;
        switch (m->op) {
          case MatrixOp::kFill:
            return MatrixFill(frag, value);
          case MatrixOp::kLoad:
            return MatrixLoad(frag, args[0]);
          case MatrixOp::kMma:
            return MatrixMma(frag, args[0], args[1]);
          case MatrixOp::kStore:
            return MatrixStore(args[0], frag);
          case MatrixOp::kWarpgroupMma:
            return WarpgroupMma(frag, args[0], args[1], value);
          case MatrixOp::kWarpgroupStore:
            // The column stays a constant (kernel_ir.h).
            return WarpgroupStore(args[0], frag, *m->value.as_int());
        }
        return s;
      }
      case StmtKind::kAsyncCopy: {
        const auto* c = s.as<AsyncCopyNode>();
        if (c->op != AsyncOp::kCopy) return s;
        bool changed = false;
        TileRef dst = VisitTile(c->dst, &changed), src = VisitTile(c->src, &changed);
        PrimExpr valid = c->valid.defined() ? Visit(c->valid) : c->valid;
        changed |= !valid.same_as(c->valid);
        return changed ? AsyncCopy(dst, src, c->lanes, valid) : s;
      }
    }
    return s;
  }

 private:
  // `t` with its indices visited; sets *changed when one changed.
  TileRef VisitTile(const TileRef& t, bool* changed) {
    TileRef out{t.buffer, {}};
    for (const PrimExpr& i : t.at) {
      out.at.push_back(Visit(i));
      *changed |= !out.at.back().same_as(i);
    }
    return out;
  }

  // Visits `body` in the scope of `binder`: renamed when mapped to a Var,
  // shadowed when mapped to anything else.
  Stmt VisitScoped(const Var& binder, Var* new_binder, const Stmt& body) {
    auto it = map_->find(binder.get());
    if (it == map_->end()) return Visit(body);
    if (it->second.as<PrimVarNode>()) {
      // Keep the mapped var's identity: a Var handle over its node.
      static_cast<PrimExpr&>(*new_binder) = it->second;
      return Visit(body);
    }
    VarMap inner = *map_;
    inner.erase(binder.get());
    Substituter scoped(inner);
    return scoped.Visit(body);
  }

  const VarMap* map_;
};

void Collect(const PrimExpr& e, absl::flat_hash_set<const PrimExprNode*>* seen,
             std::vector<Var>* out) {
  if (!e.defined()) return;
  if (e.as<PrimVarNode>()) {
    if (seen->insert(e.get()).second) {
      Var v;
      static_cast<PrimExpr&>(v) = e;
      out->push_back(std::move(v));
    }
    return;
  }
  MapChildren(e, [&](const PrimExpr& c) {
    Collect(c, seen, out);
    return c;
  });
}

}  // namespace

PrimExpr Simplify(const PrimExpr& e) {
  const int before = fold_overflows;
  PrimExpr s = SimplifyImpl(e);
  if (fold_overflows == before) return s;
  fold_overflows = before;
  return e;  // a fold overflowed: kept as written
}

bool ProveEqual(const PrimExpr& a, const PrimExpr& b) {
  if (!a.defined() || !b.defined()) return a.defined() == b.defined();
  if (a.same_as(b)) return true;
  if (IsIntLike(a.dtype()) && IsIntLike(b.dtype())) {
    const int before = fold_overflows;
    Poly diff = ToPoly(a);
    diff.AddScaled(ToPoly(b), -1);
    const bool overflowed = fold_overflows != before;
    fold_overflows = before;
    return !overflowed && diff.is_const() && diff.constant() == 0;
  }
  PrimExpr d = Simplify(Sub(a, b));
  if (const auto* f = d.as<FloatImmNode>()) return f->value == 0;
  if (const int64_t* v = d.as_int()) return *v == 0;
  return false;
}

std::optional<int64_t> AsConstInt(const PrimExpr& e) {
  if (!e.defined()) return std::nullopt;
  PrimExpr s = Simplify(e);
  if (const int64_t* v = s.as_int()) return *v;
  return std::nullopt;
}

int64_t KnownFactor(const PrimExpr& e) {
  if (!e.defined()) return 1;
  if (std::optional<int64_t> c = AsConstInt(e)) {
    return *c == INT64_MIN ? 1 : (*c < 0 ? -*c : *c);
  }
  const BinaryNode* b = e.as<BinaryNode>();
  switch (e.kind()) {
    case PrimKind::kAdd:
    case PrimKind::kSub:
    case PrimKind::kMin:  // one of the two
    case PrimKind::kMax:
      return std::gcd(KnownFactor(b->a), KnownFactor(b->b));
    case PrimKind::kMul: {
      const int64_t fa = KnownFactor(b->a), fb = KnownFactor(b->b);
      return fa > (int64_t{1} << 30) || fb > (int64_t{1} << 30) ? 1 : fa * fb;
    }
    case PrimKind::kCast:
      return e.as<CastNode>()->value.dtype().is_int() ? KnownFactor(e.as<CastNode>()->value) : 1;
    default:
      return 1;
  }
}

PrimExpr Substitute(const PrimExpr& e, const VarMap& map) {
  if (map.empty()) return e;
  return Substituter(map).Visit(e);
}

Stmt Substitute(const Stmt& s, const VarMap& map) {
  if (map.empty()) return s;
  return Substituter(map).Visit(s);
}

void CollectVars(const PrimExpr& e, std::vector<Var>* out) {
  absl::flat_hash_set<const PrimExprNode*> seen;
  for (const Var& v : *out) seen.insert(v.get());
  Collect(e, &seen, out);
}

bool AllOf(const PrimExpr& e, const std::function<bool(const PrimExpr&)>& f) {
  if (!e.defined()) return true;
  if (!f(e)) return false;
  if (const BinaryNode* n = e.as<BinaryNode>()) return AllOf(n->a, f) && AllOf(n->b, f);
  if (const NotNode* n = e.as<NotNode>()) return AllOf(n->a, f);
  if (const SelectNode* n = e.as<SelectNode>()) {
    return AllOf(n->cond, f) && AllOf(n->true_value, f) && AllOf(n->false_value, f);
  }
  if (const CastNode* n = e.as<CastNode>()) return AllOf(n->value, f);
  if (const LoadNode* n = e.as<LoadNode>()) {
    for (const PrimExpr& i : n->indices) {
      if (!AllOf(i, f)) return false;
    }
    return true;
  }
  if (const PrimCallNode* n = e.as<PrimCallNode>()) {
    for (const PrimExpr& a : n->args) {
      if (!AllOf(a, f)) return false;
    }
  }
  return true;
}

std::optional<int64_t> ElementStride(const Buffer& buffer, const std::vector<PrimExpr>& indices,
                                     const Var& var) {
  if (indices.size() != buffer->shape.size()) return std::nullopt;
  PrimExpr flat(int64_t{0});
  for (size_t d = 0; d < indices.size(); ++d) flat = flat * buffer->shape[d] + indices[d];
  VarMap next = {{var.get(), var + PrimExpr(int64_t{1})}};
  return AsConstInt(Substitute(flat, next) - flat);
}

}  // namespace tether::compiler
