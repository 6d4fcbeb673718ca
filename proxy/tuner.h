// Tuner: the online search of the scheduling proxy for the partition size and
// the credit, from measured step times alone (no I/O here: StepTuner runs it
// on one worker and carries its decisions to all). It walks one axis of a
// grid at a time from the starting point: the smaller credit next to it, and
// on down while each is faster; if it was not faster, the larger one and on
// up likewise; then the partitions the same way at the best credit; then the
// credits next to the best point once more. It moves only to a point faster
// by at least `min_gain`, and settles on the best point seen when the walk
// ends or after `max_points` points. The defaults (Settings) start it where the emulated
// cluster's best points lie, so a short walk suffices: at most 7 points, 28
// steps (issue 30 asks for the best point's speed within 30).
// Each point is measured over `measure_steps` steps (their median) after
// `settle_steps` steps that let the switch take effect.
//
// Settled, it keeps watching: step times in windows of `watch_steps`; the
// first window's median is the settled point's baseline, and when the
// medians of `drift_windows` windows in a row are more than `drift` away
// from it (slower or faster: the job, the data or the network changed), it
// searches again from the point in use. A one-shot search goes stale.
//
// Deterministic: the same step times give the same decisions.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/settings.h"

namespace syncline {

struct TunerPoint {
  uint64_t partition_bytes = 0;
  uint64_t credit_partitions = 0;  // credit = credit_partitions x partition_bytes
  bool operator==(const TunerPoint&) const = default;
  std::string ToString() const;
};

struct TunerOptions {
  std::vector<uint64_t> partitions = {256 << 10, 512 << 10, 1 << 20, 2 << 20, kLargestTunedPartitionBytes};
  std::vector<uint64_t> credits = {1, 2, 4, 8, 16};
  int settle_steps = 1;
  int measure_steps = 3;
  double min_gain = 0.03;
  int max_points = 7;  // with the defaults: at most 28 steps
  int watch_steps = 10;
  double drift = 0.10;
  int drift_windows = 2;
};

class Tuner {
 public:
  // `start` is moved to the nearest grid point (the first switch, if any,
  // comes with the first decision).
  Tuner(TunerOptions options, TunerPoint start);

  // The step that just ended took `ms`. Returns the point to use from the
  // next step on when it changes; nothing otherwise.
  std::optional<TunerPoint> OnStep(double ms);

  bool settled() const { return settled_; }
  TunerPoint current() const { return PointAt(current_); }
  TunerPoint best() const { return PointAt(best_); }
  int points_measured() const { return static_cast<int>(scores_.size()); }
  // What the last OnStep decided and why, for the log (empty if nothing).
  const std::string& last_decision() const { return last_decision_; }
  // Searches begun again on a drift since the first.
  int retunes() const { return retunes_; }

 private:
  using Index = std::pair<size_t, size_t>;  // (partition, credit) in the grid
  TunerPoint PointAt(Index i) const { return {options_.partitions[i.first], options_.credits[i.second]}; }
  std::optional<Index> NextCandidate();
  // The unmeasured point next to `from` in `direction` (-1 or +1) along this
  // phase's axis (credits, or partitions in phase 1); none at the grid's edge.
  std::optional<Index> Neighbour(Index from, int direction) const;
  // The unmeasured neighbours of the best point along the next phase's axis.
  void PlanPhase();
  // `current_` just became the best: walk on past it, away from `from`.
  void WalkOn(Index from);
  // Settled: takes one step time into the watch; true when a search begins again.
  bool Watch(double ms);
  void BeginSearch();

  const TunerOptions options_;
  Index current_{0, 0}, best_{0, 0};
  bool have_best_ = false;
  std::map<Index, double> scores_;
  std::vector<double> samples_;
  int steps_at_point_ = 0;
  int phase_ = -1;                       // 0: credits, 1: partitions, 2: credits next to the best
  std::vector<Index> planned_;           // this phase's points still to measure
  bool settled_ = false;
  std::string last_decision_;
  // Settled: the step times of the window in progress, the baseline (0
  // until the first window ends) and how many windows in a row drifted.
  std::vector<double> watched_;
  double baseline_ms_ = 0;
  int drifted_windows_ = 0;
  int retunes_ = 0;
};

}  // namespace syncline
