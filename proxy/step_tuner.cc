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
    : worker_(worker), options_(std::move(options)), applied_(StartPoint(worker->settings())) {}

bool StepTuner::Enabled(const Settings& s) {
  return s.autotune && s.scheduling != "fifo" && s.SchedulingCreditBytes() != 0;
}

Status StepTuner::BeginStep() {
  if (settled_) return Status::Ok();
  const auto now = std::chrono::steady_clock::now();
  if (!decision_) {
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
  }
  double decision[3] = {0, 0, 0};  // partition bytes, credit partitions, settled
  if (worker_->rank() == 0) {
    if (last_step_) {
      tuner_->OnStep(std::chrono::duration<double, std::milli>(now - *last_step_).count());
      if (!tuner_->last_decision().empty()) SYNCLINE_LOG_INFO("tuner, step {}: {}", step_, tuner_->last_decision());
    }
    const TunerPoint next = tuner_->current();
    decision[0] = static_cast<double>(next.partition_bytes);
    decision[1] = static_cast<double>(next.credit_partitions);
    decision[2] = tuner_->settled() ? 1 : 0;
  }
  last_step_ = now;
  ++step_;
  SYNCLINE_RETURN_IF_ERROR(worker_->Broadcast(*decision_, decision, 0).WithContext("sharing the tuner's decision"));
  SYNCLINE_RETURN_IF_ERROR(Apply({static_cast<uint64_t>(decision[0]), static_cast<uint64_t>(decision[1])}));
  settled_ = decision[2] != 0;
  return Status::Ok();
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
  return Status::Ok();
}

}  // namespace syncline
