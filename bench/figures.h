// The summary table of kernel_bench and cuda_bench: each benchmark records
// its rate under a key ("matmul/float16/4096"), the anchor's and ours, and
// after all runs PrintFigures prints them side by side with the ratio
// ours / anchor. Anchors are registered before what they anchor, so ours
// can report the ratio as a counter too.
//
// Thread contract: benchmarks run one at a time; not thread-safe.
#ifndef TETHER_BENCH_FIGURES_H_
#define TETHER_BENCH_FIGURES_H_

#include <cstdio>
#include <map>
#include <string>

namespace tether::bench {

struct Figure {
  double anchor = 0, ours = 0;
  std::string unit;
  std::string anchor_name;  // which library gave `anchor`, when several compete
};

inline std::map<std::string, Figure>& Figures() {
  static auto* figures = new std::map<std::string, Figure>;
  return *figures;
}

// Folds this round's figures into `best`: per key the highest anchor (with
// its library's name) and the highest of ours, each side's best round on
// its own (rates: higher is better). On a machine that others share, a
// burst of their work slows whichever side runs during it; the best of
// several rounds compares the two at their quietest.
inline void KeepBestOfRound(std::map<std::string, Figure>& best) {
  for (const auto& [key, f] : Figures()) {
    Figure& b = best[key];
    b.unit = f.unit;
    if (f.anchor > b.anchor) {
      b.anchor = f.anchor;
      b.anchor_name = f.anchor_name;
    }
    if (f.ours > b.ours) b.ours = f.ours;
  }
}

// One row per key that has a figure; the ratio is 0 without an anchor.
inline void PrintFigures(const std::map<std::string, Figure>& figures = Figures()) {
  std::printf("\n%-30s %8s %12s %16s %12s %8s\n", "kernel", "unit", "anchor", "anchor is", "tether",
              "ratio");
  for (const auto& [key, f] : figures) {
    if (f.anchor <= 0 && f.ours <= 0) continue;
    std::printf("%-30s %8s %12.2f %16s %12.2f %8.2f\n", key.c_str(), f.unit.c_str(), f.anchor,
                f.anchor_name.empty() ? "-" : f.anchor_name.c_str(), f.ours,
                f.anchor > 0 ? f.ours / f.anchor : 0.0);
  }
}

}  // namespace tether::bench

#endif  // TETHER_BENCH_FIGURES_H_
