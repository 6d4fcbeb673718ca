// Tuner: the online search of the scheduling proxy for the partition size and
// the credit, from measured step times alone (no I/O here: StepTuner runs it
// on one worker and carries its decisions to all). It walks a grid by
// coordinate descent: from the start point it measures the neighbours along
// one axis (credit, then partition, alternating), moves to a neighbour that
// is faster by at least `min_gain`, and settles when neither axis improves
// around the best point, or after `max_points` points, on the best seen.
// Each point is measured over `measure_steps` steps (their median) after
// `settle_steps` steps that let the switch take effect.
//
// Deterministic: the same step times give the same decisions.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace syncline {

struct TunerPoint {
  uint64_t partition_bytes = 0;
  uint64_t credit_partitions = 0;  // credit = credit_partitions x partition_bytes
  bool operator==(const TunerPoint&) const = default;
  std::string ToString() const;
};

struct TunerOptions {
  std::vector<uint64_t> partitions = {256 << 10, 512 << 10, 1 << 20, 2 << 20, 4 << 20};
  std::vector<uint64_t> credits = {1, 2, 4, 8, 16};
  int settle_steps = 1;
  int measure_steps = 3;
  double min_gain = 0.03;
  int max_points = 12;
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

 private:
  using Index = std::pair<size_t, size_t>;  // (partition, credit) in the grid
  TunerPoint PointAt(Index i) const { return {options_.partitions[i.first], options_.credits[i.second]}; }
  std::optional<Index> NextCandidate();

  const TunerOptions options_;
  Index current_{0, 0}, best_{0, 0};
  bool have_best_ = false;
  std::map<Index, double> scores_;
  std::vector<double> samples_;
  int steps_at_point_ = 0;
  int axis_ = 1;                         // 1: credit, 0: partition
  std::optional<Index> converged_[2];    // the best point an axis was exhausted at
  bool settled_ = false;
  std::string last_decision_;
};

}  // namespace syncline
