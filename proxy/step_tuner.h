// StepTuner: runs the Tuner (proxy/tuner.h) during training. The framework
// glue calls BeginStep at the start of every step on every worker. Worker 0
// measures the time between steps and decides; while tuning, every
// BeginStep is a collective: the decision (partition, credit, settled)
// travels as a broadcast that every worker receives at the same step, so all
// switch together: the credit of their scheduler, and the partition of every
// declared tensor (Worker::Repartition: new keys, sums exact). Once settled,
// BeginStep costs nothing. Partitions that would cut the largest tensor
// declared by the first step into more chunks than a tensor may have are left
// out of the search.
//
// Settled, worker 0 keeps timing steps (the Tuner watches for drift) and the
// decision travels every `watch_steps` steps only: a re-tune begins for all
// workers at the next such step. Decisions are logged at info level on
// worker 0; every worker exports the partition in use, whether the tuner is
// settled, and how many searches it began (docs/metrics.md).
//
// Thread-safety: BeginStep is called by one thread at a time, in step order
// (the training loop, or syncline.tensorflow's step-end ops, which it chains).
#pragma once

#include <chrono>
#include <optional>

#include "metrics/registry.h"
#include "proxy/tuner.h"
#include "worker/worker.h"

namespace syncline {

class StepTuner {
 public:
  // Starts from the worker's settings (partition, credit).
  explicit StepTuner(Worker* worker, TunerOptions options = {});
  // Whether the settings let a tuner run (autotune on, priority order, a credit).
  static bool Enabled(const Settings& settings);

  Status BeginStep();
  bool settled() const { return settled_; }
  // The point in use on this worker.
  TunerPoint current() const { return applied_; }

 private:
  Status Apply(const TunerPoint& point);
  // At the first step: the decision tensor, and the partitions the search may try.
  Status Prepare();

  Worker* const worker_;
  TunerOptions options_;
  Gauge& partition_metric_;
  Gauge& settled_metric_;
  Counter& searches_metric_;
  std::optional<Tuner> tuner_;  // decides on worker 0 only; made at the first step
  TunerPoint applied_;
  std::optional<TensorId> decision_;
  std::optional<std::chrono::steady_clock::time_point> last_step_;
  int64_t step_ = 0;
  bool settled_ = false;  // as last shared by worker 0
};

}  // namespace syncline
