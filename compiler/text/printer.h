// Printing IR as the Relax text format (TVMScript-like, see
// docs/design/text-format.md). The output is deterministic: functions in
// name order, keyword attributes sorted, floats printed with the fewest
// digits that read back to the same value, every binding annotated with its
// struct info. What ParseModule accepts, PrintModule prints back the same.
//
// Thread contract: pure functions; thread-safe.
#ifndef TETHER_COMPILER_TEXT_PRINTER_H_
#define TETHER_COMPILER_TEXT_PRINTER_H_

#include <string>

#include "compiler/relax/module.h"

namespace tether::compiler {

// The whole module as an @I.ir_module class: Relax functions as
// @R.function members, kernels as @T.prim_func members (their text comes
// from the kernel IR's ToString, and the parser reads them back).
// Constants with more than kMaxInlineConstantElements elements print as
// metadata["relax.Constant"][k] references, numbered in print order.
std::string PrintModule(const IRModule& module);

// One expression as it would appear on the right of a binding; a Function
// prints as a whole @R.function named "func".
std::string PrintExpr(const Expr& e);

inline constexpr int64_t kMaxInlineConstantElements = 64;

}  // namespace tether::compiler

#endif  // TETHER_COMPILER_TEXT_PRINTER_H_
