#include "proxy/step_tuner.h"

#include <algorithm>

#include "common/logging.h"
#include "transport/wire.h"

namespace syncline {
namespace {

TunerPoint StartPoint(const Settings& s) {
  const uint64_t credit = s.SchedulingCreditBytes();
  return {s.partition_bytes, std::max<uint64_t>(1, credit / s.partition_bytes)};
}

constexpr char kDecisionTensor[] = "syncline.tuner.decision";

}  // namespace

StepTuner::StepTuner(Worker* worker, TunerOptions options)
    : worker_(worker),
      options_(std::move(options)),
      partition_metric_(worker->metrics().AddGauge("syncline_tuner_partition_bytes",
                                                   "Partition size in use (the online tuner's choice)")),
      settled_metric_(worker->metrics().AddGauge("syncline_tuner_settled",
                                                 "1 while the online tuner keeps its choice and watches, 0 while it searches")),
      searches_metric_(worker->metrics().AddCounter("syncline_tuner_searches_total",
                                                    "Searches the online tuner began (the first, then one per drift)")),
      applied_(StartPoint(worker->settings())) {
  partition_metric_.Set(double(applied_.partition_bytes));
  searches_metric_.Add();
}

bool StepTuner::Enabled(const Settings& s) {
  // Not where servers keep running values (async, ssp): a repartition would
  // start new keys from zero, and workers agree on decisions by round sums.
  const bool round_sums = !s.async && s.sync_mode != "ssp";
  return round_sums && s.autotune && s.scheduling != "fifo" && s.SchedulingCreditBytes() != 0;
}

Status StepTuner::Prepare() {
  SYNCLINE_ASSIGN_OR_RETURN(TensorId id, worker_->Declare(kDecisionTensor, DType::kFloat64, 3));
  decision_ = id;
  uint64_t largest = 0;
  for (TensorId t : worker_->TensorIds()) {
    SYNCLINE_ASSIGN_OR_RETURN(uint64_t bytes, worker_->TensorBytes(t));
    largest = std::max(largest, bytes);
  }
  std::erase_if(options_.partitions, [&](uint64_t p) { return p * kMaxChunksPerTensor < largest; });
  if (options_.partitions.empty()) options_.partitions.push_back(applied_.partition_bytes);
  tuner_.emplace(options_, applied_);
  return Status::Ok();
}

Status StepTuner::BeginStep() {
  const auto now = std::chrono::steady_clock::now();
  if (!decision_) SYNCLINE_RETURN_IF_ERROR(Prepare());
  // Worker 0 times every step. A search that begins again while settled
  // waits for the next shared decision: until then the others do not know,
  // and the steps between are no measurement of it.
  if (worker_->rank() == 0 && last_step_ && !(settled_ && !tuner_->settled())) {
    const int retunes = tuner_->retunes();
    tuner_->OnStep(std::chrono::duration<double, std::milli>(now - *last_step_).count());
    if (!tuner_->last_decision().empty()) SYNCLINE_LOG_INFO("tuner, step {}: {}", step_, tuner_->last_decision());
    if (tuner_->retunes() != retunes) searches_metric_.Add();
  }
  last_step_ = now;
  ++step_;
  if (settled_ && step_ % std::max(1, options_.watch_steps) != 0) return Status::Ok();
  double decision[3] = {0, 0, 0};  // partition bytes, credit partitions, settled
  if (worker_->rank() == 0) {
    const TunerPoint next = tuner_->current();
    decision[0] = static_cast<double>(next.partition_bytes);
    decision[1] = static_cast<double>(next.credit_partitions);
    decision[2] = tuner_->settled() ? 1 : 0;
  }
  SYNCLINE_RETURN_IF_ERROR(worker_->Broadcast(*decision_, decision, 0).WithContext("sharing the tuner's decision"));
  // Before Apply, which may fail: every worker must agree on when the next decision travels.
  const bool settled = decision[2] != 0;
  if (worker_->rank() != 0 && settled_ && !settled) searches_metric_.Add();  // worker 0 counted it above
  settled_ = settled;
  settled_metric_.Set(settled ? 1 : 0);
  return Apply({static_cast<uint64_t>(decision[0]), static_cast<uint64_t>(decision[1])});
}

Status StepTuner::Apply(const TunerPoint& point) {
  if (point == applied_) return Status::Ok();
  if (point.partition_bytes < 64 || point.credit_partitions == 0)
    return Internal("the tuner's decision is malformed: " + point.ToString());
  worker_->chunk_scheduler()->SetCredit(point.credit_partitions * point.partition_bytes);
  if (point.partition_bytes != applied_.partition_bytes) {
    for (TensorId id : worker_->TensorIds()) {
      if (id == *decision_) continue;
      SYNCLINE_RETURN_IF_ERROR(worker_->Repartition(id, point.partition_bytes));
    }
  }
  if (worker_->rank() != 0) SYNCLINE_LOG_DEBUG("tuner, step {}: now {}", step_, point.ToString());
  applied_ = point;
  partition_metric_.Set(double(point.partition_bytes));
  return Status::Ok();
}

}  // namespace syncline
