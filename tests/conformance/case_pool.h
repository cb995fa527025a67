// CasePool: runs conformance cases in child processes, `jobs` at a time, so
// that a case that crashes (a failed CHECK, a segfault in generated code) or
// hangs costs only that case: the parent turns a death by signal into a
// "crash" result and kills a case past its time limit ("timeout").
//
// Each child is forked from the single-threaded parent, runs RunCase and
// writes its result back through a pipe; its stderr is captured and the last
// line quoted in a crash result. The parent never starts threads, which is
// what makes fork() without exec safe here.
//
// Thread contract: thread-hostile (it forks; call from the main thread of a
// process that has started no other threads).
#ifndef TETHER_TESTS_CONFORMANCE_CASE_POOL_H_
#define TETHER_TESTS_CONFORMANCE_CASE_POOL_H_

#include <functional>
#include <vector>

#include "tests/conformance/case_runner.h"

namespace tether::conformance {

struct CasePoolOptions {
  int jobs = 1;
  double timeout_seconds = 120;  // per case; <= 0: none
  // Run in this process instead (no isolation; for debuggers).
  bool in_process = false;
};

// What runs one case inside a child (RunCase bound to its options, or a
// test's stand-in).
using CaseFunction = std::function<CaseResult(const CaseSpec&)>;

// Runs `run` on every case of `cases` and calls `done(index, result)` as each
// finishes (in completion order, from the calling thread).
void RunCases(const std::vector<CaseSpec>& cases, const CaseFunction& run,
              const CasePoolOptions& pool_options,
              const std::function<void(size_t, const CaseResult&)>& done);

}  // namespace tether::conformance

#endif  // TETHER_TESTS_CONFORMANCE_CASE_POOL_H_
