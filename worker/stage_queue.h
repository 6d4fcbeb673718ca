// StageQueue: one stage of a worker's chunk pipeline (worker/device_stages.h):
// a queue served by a thread of its own, most urgent item first. An item has
// `priority` (larger goes first) and `sequence` (ties: the earlier first),
// as ChunkTask does, so a chunk of an urgent tensor posted late overtakes the
// queued chunks of a bulk one at every stage, as it does at admission
// (proxy/credit_scheduler.h).
//
// The queue is unbounded: what it holds is bounded by the chunks of the
// push_pulls in flight, which the caller bounds. Stop hands every queued
// item, and every later one, to `drop` with the reason; the thread ends after
// the item it serves.
//
// Thread-safety: Post, Stop and Drain may be called from any thread; `serve` and
// `drop` run outside the lock (serve on the stage's thread, drop on the
// caller's).
#pragma once

#include <algorithm>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/deadline.h"
#include "common/mutex.h"
#include "common/status.h"

namespace syncline {

template <typename Item>
class StageQueue {
 public:
  using Serve = std::function<void(Item&&)>;
  using Drop = std::function<void(Item&&, const Status&)>;

  StageQueue(Serve serve, Drop drop) : serve_(std::move(serve)), drop_(std::move(drop)) {
    thread_ = std::thread([this] { Loop(); });
  }
  // Stops (dropping what is queued) and joins the thread.
  ~StageQueue() {
    Stop(Aborted("the worker's pipeline stage was destroyed"));
    thread_.join();
  }
  StageQueue(const StageQueue&) = delete;
  StageQueue& operator=(const StageQueue&) = delete;

  void Post(Item item) {
    if (std::optional<Status> refused = TryPost(item)) drop_(std::move(item), *refused);
  }
  // Post without the drop: once stopped, the reason, and `item` stays the
  // caller's (for a caller holding a lock that `drop` must not run under).
  std::optional<Status> TryPost(Item& item) {
    {
      MutexLock lock(mu_);
      if (stopped_) return stopped_;
      queue_.push_back(std::move(item));
      std::push_heap(queue_.begin(), queue_.end(), After);
    }
    cv_.NotifyAll();
    return std::nullopt;
  }

  void Stop(const Status& status) {
    std::vector<Item> dropped;
    {
      MutexLock lock(mu_);
      if (!stopped_) stopped_ = status;
      dropped.swap(queue_);
    }
    cv_.NotifyAll();
    for (Item& item : dropped) drop_(std::move(item), status);
  }

  // Waits until nothing is queued or being served (the caller posts no
  // more meanwhile): DeadlineExceeded if that takes past `deadline`.
  Status Drain(Deadline deadline) {
    MutexLock lock(mu_);
    if (cv_.WaitUntil(mu_, deadline, [this]() REQUIRES(mu_) { return queue_.empty() && !serving_; }))
      return Status::Ok();
    return DeadlineExceeded("a pipeline stage still had " + std::to_string(queue_.size() + (serving_ ? 1 : 0)) +
                            " chunks to serve");
  }

  size_t queued() const {
    MutexLock lock(mu_);
    return queue_.size();
  }

 private:
  // Heap order: true if `a` is served after `b`.
  static bool After(const Item& a, const Item& b) {
    if (a.priority != b.priority) return a.priority < b.priority;
    return a.sequence > b.sequence;
  }

  void Loop() {
    for (;;) {
      Item next;
      {
        MutexLock lock(mu_);
        cv_.Wait(mu_, [this]() REQUIRES(mu_) { return stopped_.has_value() || !queue_.empty(); });
        if (stopped_) return;
        std::pop_heap(queue_.begin(), queue_.end(), After);
        next = std::move(queue_.back());
        queue_.pop_back();
        serving_ = true;
      }
      serve_(std::move(next));
      MutexLock lock(mu_);
      serving_ = false;
      if (queue_.empty()) cv_.NotifyAll();  // Drain
    }
  }

  const Serve serve_;
  const Drop drop_;
  mutable Mutex mu_;
  CondVar cv_;
  std::vector<Item> queue_ GUARDED_BY(mu_);  // a heap by After
  std::optional<Status> stopped_ GUARDED_BY(mu_);
  bool serving_ GUARDED_BY(mu_) = false;  // the thread is in serve_
  std::thread thread_;  // last: starts once the rest exists
};

}  // namespace syncline
