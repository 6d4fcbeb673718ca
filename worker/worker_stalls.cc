// The worker's side of stall detection (worker/stall_watch.h): what the
// watch sees of this worker, and what it tells the scheduler.
#include "common/log_limiter.h"
#include "common/logging.h"
#include "transport/wire.h"
#include "worker/worker.h"

namespace syncline {
namespace {

// How many push_pulls a tensor started, under every partition size it used.
template <typename Tensor>
uint64_t PushPullsStarted(const Tensor& t) {
  uint64_t n = 0;
  for (const auto& [partition, placement] : t.by_partition) n += placement.rounds;
  return n;
}

}  // namespace

StallWatch::Sample Worker::StallSample() const {
  StallWatch::Sample s;
  s.last_ended = Clock::time_point(Clock::duration(last_ended_->load(std::memory_order_relaxed)));
  MutexLock lock(mu_);
  for (const auto& weak : ops_) {
    auto op = weak.lock();
    if (!op || op->Done()) continue;
    if (!s.oldest_started || op->started() < *s.oldest_started) {
      s.oldest_started = op->started();
      s.oldest_tensor = op->tensor_name();
    }
  }
  for (const Tensor& t : tensors_) s.push_pulls_started += PushPullsStarted(t);
  return s;
}

void Worker::ReportStall(const StallWatch::Report& report) {
  Message m = MakeMessage(proto::WORKER_STALLED, client_.my_id());
  proto::WorkerStalled* note = m.header.mutable_worker_stalled();
  note->set_stalled(report.stalled);
  if (report.stalled) {
    note->set_waiting_for(report.waiting_for);
    note->set_waited_ms(report.waited.count());
    MutexLock lock(mu_);
    for (const Tensor& t : tensors_) {
      if (t.name.empty()) continue;
      proto::TensorCalls* c = note->add_calls();
      c->set_tensor(t.name);
      c->set_push_pulls(PushPullsStarted(t));
    }
    SYNCLINE_LOG_WARN("worker {}: no push_pull has ended for {} s; the oldest in flight is of tensor '{}'", rank(),
                      report.waited.count() / 1000, report.waiting_for);
  }
  Status st = runtime_.endpoint().Send(kSchedulerPeer, std::move(m), Deadline::AfterMs(settings_.heartbeat_timeout_ms));
  if (!st.ok()) SYNCLINE_LOG_WARN_LIMITED("could not tell the scheduler about a stall: {}", st.message());
}

}  // namespace syncline
