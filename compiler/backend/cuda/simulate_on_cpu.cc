// SimulateOnCpu (simulate_on_cpu.h): a device kernel's launches as one CPU
// kernel, each launch's threads run one after the other.
#include "compiler/backend/cuda/simulate_on_cpu.h"

#include <algorithm>
#include <vector>

namespace tether::compiler {

KernelFunc SimulateOnCpu(const DeviceKernel& kernel, int64_t nthreads) {
  std::vector<Stmt> parts;
  for (const DeviceLaunch& l : kernel.launches) {
    const size_t n = l.kernel->params.size();
    const Var& tid = l.kernel->params[n - 2].var;
    const Var& total = l.kernel->params[n - 1].var;
    if (l.blocks) {
      // Thread 0 of each block stands for the block; its kThread loops run
      // the block's threads in turn.
      const int64_t blocks = std::max<int64_t>(1, nthreads / l.block);
      Var b("tether_sim_block");
      parts.push_back(For(
          b, IntImm(DataType::Int(64), 0), IntImm(DataType::Int(64), blocks), ForKind::kSerial,
          LetStmt(tid, Mul(b, IntImm(DataType::Int(64), l.block)),
                  LetStmt(total, IntImm(DataType::Int(64), blocks * l.block), l.kernel->body))));
      continue;
    }
    const int64_t threads = l.serial ? 1 : nthreads;
    parts.push_back(For(tid, IntImm(DataType::Int(64), 0), IntImm(DataType::Int(64), threads),
                        ForKind::kSerial,
                        LetStmt(total, IntImm(DataType::Int(64), threads), l.kernel->body)));
  }
  Stmt body = Seq(parts);
  for (size_t b = kernel.scratch.size(); b-- > 0;) body = Allocate(kernel.scratch[b], body);
  return MakeKernelFunc(kernel.source->name, kernel.source->params, body,
                        kernel.source->num_outputs);
}

}  // namespace tether::compiler
