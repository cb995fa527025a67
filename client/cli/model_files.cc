// What every tether CLI has, with or without the compiler: --shape dims
// and the notice for slow work (commands.h).
#include <chrono>
#include <cstdio>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "client/cli/commands.h"

namespace tether::cli {

bool IsModelSource(const std::string& path) {
  return absl::EndsWith(path, ".rx") || absl::EndsWith(path, ".onnx");
}

std::optional<std::vector<int64_t>> ParseDims(absl::string_view text) {
  std::vector<int64_t> dims;
  if (text == "scalar") return dims;
  for (absl::string_view part : absl::StrSplit(text, absl::ByAnyChar("x,"))) {
    int64_t d;
    if (!absl::SimpleAtoi(part, &d) || d < 0) return std::nullopt;
    dims.push_back(d);
  }
  return dims;
}

struct SlowWorkNotice::State {
  absl::Mutex mu;
  bool done ABSL_GUARDED_BY(mu) = false;
};

SlowWorkNotice::SlowWorkNotice(std::string what, bool quiet) {
  if (quiet) return;
  state_ = std::make_shared<State>();
  thread_ = std::thread([state = state_, what = std::move(what)] {
    auto start = std::chrono::steady_clock::now();
    absl::MutexLock lock(&state->mu);
    // Conditions run with mu held.
    auto done = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return state->done; };
    if (state->mu.AwaitWithTimeout(absl::Condition(&done), absl::Seconds(1))) return;
    std::fprintf(stderr, "tether: %s ...\n", what.c_str());
    state->mu.Await(absl::Condition(&done));
    std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    std::fprintf(stderr, "tether: %s took %.1f s\n", what.c_str(), took.count());
  });
}

SlowWorkNotice::~SlowWorkNotice() {
  if (!state_) return;
  {
    absl::MutexLock lock(&state_->mu);
    state_->done = true;
  }
  thread_.join();
}

}  // namespace tether::cli
