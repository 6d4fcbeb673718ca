// SerialLanes: a fixed set of worker threads ("lanes"), each draining its own
// FIFO queue. A server hands the summation of each pushed chunk to
// SerialLanes so network threads go back to the sockets at once, while all
// work for one key still runs in arrival order on one thread: that keeps a
// key's buffer free of data races without a lock per key, and makes the
// order of additions (hence the bits of the sum) follow arrival order.
//
// Usage:
//   SerialLanes lanes(/*num_lanes=*/2, /*max_pending_per_lane=*/1024);
//   SYNCLINE_RETURN_IF_ERROR(lanes.Submit(key, [=] { engine->SumInto(...); }));
//   ...
//   SYNCLINE_RETURN_IF_ERROR(lanes.Drain(Deadline::AfterMs(5000)));
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "common/deadline.h"
#include "common/mutex.h"
#include "common/status.h"

namespace syncline {

// Thread-safe: Submit and Drain may be called from any threads at once;
// Shutdown and the destructor too, but nothing may call into the object once
// the destructor has started.
//
// Ordering: tasks given the same lane (LaneOf(key) equal, in particular the
// same key) run one at a time, in the order their Submit calls took effect;
// for submissions from one thread that is program order. Tasks on different
// lanes run concurrently and in no particular order relative to each other.
//
// Tasks may Submit further tasks. A task must not call Drain (it would wait
// for itself until the deadline) nor Shutdown/the destructor (self-join).
// A task that throws is counted as finished; the first such error is kept and
// returned by every later Drain, because the data it was computing is lost.
class SerialLanes {
 public:
  // `num_lanes`: worker threads; 0 = std::thread::hardware_concurrency().
  // `max_pending_per_lane`: queued, not yet started tasks a lane holds before
  // Submit waits for room (backpressure on the submitter); 0 = unbounded.
  explicit SerialLanes(int num_lanes, size_t max_pending_per_lane = 0);
  // Shutdown(): runs every queued task, then joins.
  ~SerialLanes();
  SerialLanes(const SerialLanes&) = delete;
  SerialLanes& operator=(const SerialLanes&) = delete;

  int num_lanes() const { return static_cast<int>(lanes_.size()); }

  // The lane that runs tasks submitted with `lane_key`: a fixed function of
  // the key (a 64-bit mix of it, modulo num_lanes()), so keys that share a
  // stride, such as the keys one server owns, still spread over all lanes.
  size_t LaneOf(uint64_t lane_key) const;

  // Queues `task` on LaneOf(lane_key). Waits for room only when the lane is
  // bounded and full: DeadlineExceeded if there is still none at `deadline`
  // (the task is then not queued). FailedPrecondition once Shutdown has
  // begun; InvalidArgument for an empty task.
  Status Submit(uint64_t lane_key, std::function<void()> task,
                Deadline deadline = Deadline::AfterMs(kDefaultSubmitWaitMs));

  // Waits until every task submitted before this call has finished.
  // DeadlineExceeded (naming a lane still busy) if they have not by
  // `deadline`; Internal with its message if any task has ever thrown.
  // Lanes keep running and accepting tasks afterwards.
  Status Drain(Deadline deadline);

  // Stops accepting tasks, lets each lane finish its queue, joins the
  // threads. Idempotent. Waits without a deadline for the tasks themselves
  // (they are bounded CPU work); call Drain(deadline) first to bound it.
  void Shutdown();

  static constexpr long long kDefaultSubmitWaitMs = 30'000;

 private:
  struct Lane;
  void RunLane(size_t index);  // body of lane `index`'s thread
  void RecordError(size_t lane_index, const char* what);

  const size_t max_pending_;
  std::vector<std::unique_ptr<Lane>> lanes_;
  Mutex shutdown_mu_;  // serializes Shutdown callers
  bool joined_ GUARDED_BY(shutdown_mu_) = false;
  Mutex error_mu_;
  Status first_error_ GUARDED_BY(error_mu_);
};

}  // namespace syncline
