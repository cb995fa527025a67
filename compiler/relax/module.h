// IRModule: the unit the compiler works on, as tvm.IRModule. Relax functions
// and kernels (the legalized form's PrimFuncs) by global name, plus module
// attributes. Passes take a module and return a new one; a module is a value
// (copying it copies the maps, the functions inside are shared immutable nodes).
//
// Thread contract: thread-compatible.
#ifndef TETHER_COMPILER_RELAX_MODULE_H_
#define TETHER_COMPILER_RELAX_MODULE_H_

#include <map>
#include <string>

#include "compiler/relax/expr.h"
#include "compiler/tir/kernel_ir.h"

namespace tether::compiler {

struct IRModule {
  // Relax functions (FunctionNode) and extern functions (ExternFuncNode).
  std::map<std::string, Expr> functions;
  // Kernels, by the name call_tir refers to (KernelFuncNode::name).
  std::map<std::string, KernelFunc> kernels;
  Attrs attrs;

  // The relax function `name`, or an undefined Expr.
  Expr Lookup(const std::string& name) const;
  // A name not yet used by a function or kernel: `hint`, else hint_1, hint_2, ...
  std::string UniqueName(const std::string& hint) const;
};

}  // namespace tether::compiler

#endif  // TETHER_COMPILER_RELAX_MODULE_H_
