// ReplyScheduler: the order in which a server's sums leave for each worker.
//
// A sum (PULL_REPLY) to a worker leaves at once while the reply bytes sent to
// that worker and not yet acknowledged by it (REPLY_ACK) stay within the
// window; beyond it, sums wait here, most urgent first (the priority their
// push carried; ties in the order they completed), so the sum of an urgent
// chunk that completes late overtakes bulk sums that completed before it,
// instead of queueing behind them in the server's socket and the network.
// One sum always leaves when none is in flight to its worker, whatever its
// size. Other replies (PUSH_ACK, ERROR) are small and never wait. Each sum
// that counts against a window leaves with FLAG_ACK_REPLY, which asks the
// worker to acknowledge it.
//
// It decides and does not send: Submit and Acknowledge return the replies
// that may leave now, and the caller sends them, in that order, on a thread
// that may wait for the transport (not the endpoint's receiving thread).
//
// Thread-safety: all methods may be called from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <unordered_map>
#include <vector>

#include "common/mutex.h"
#include "server/key_store.h"

namespace syncline {

class ReplyScheduler {
 public:
  // `window_bytes` per worker; 0: no window, every reply leaves at once.
  explicit ReplyScheduler(uint64_t window_bytes);

  // Takes the replies a request caused; returns those that may leave now
  // (any of them, and none that waited before: those leave on Acknowledge).
  std::vector<Reply> Submit(std::vector<Reply> replies);

  struct Acknowledged {
    std::vector<Reply> ready;  // sums to `worker` that may leave now
    // Acknowledged bytes beyond those in flight to the worker (ignored): a
    // worker that acknowledges what it never got.
    uint64_t excess_bytes = 0;
  };
  // `bytes` of sums sent to `worker` have arrived there.
  Acknowledged Acknowledge(int32_t worker, uint64_t bytes);

  // What waits and what is in flight now, over all workers (metrics).
  struct Load {
    size_t queued_replies = 0;
    uint64_t queued_bytes = 0;
    uint64_t bytes_in_flight = 0;
  };
  Load load() const;
  uint64_t window_bytes() const { return window_bytes_; }

 private:
  // Most urgent first: larger priority, then earlier arrival.
  struct Order {
    int64_t priority;
    uint64_t arrival;
    bool operator<(const Order& o) const { return priority != o.priority ? priority > o.priority : arrival < o.arrival; }
  };
  struct Worker {
    uint64_t in_flight = 0;
    std::map<Order, Reply> waiting;
  };
  // Moves waiting sums of `w` that fit the window into `out`, marking them.
  void ReleaseLocked(Worker& w, std::vector<Reply>& out) REQUIRES(mu_);
  // Counts `reply` against the window and asks for its acknowledgement.
  void MarkSentLocked(Worker& w, Reply& reply) REQUIRES(mu_);

  const uint64_t window_bytes_;
  mutable Mutex mu_;
  uint64_t arrivals_ GUARDED_BY(mu_) = 0;
  size_t queued_replies_ GUARDED_BY(mu_) = 0;
  uint64_t queued_bytes_ GUARDED_BY(mu_) = 0;
  uint64_t in_flight_ GUARDED_BY(mu_) = 0;
  std::unordered_map<int32_t, Worker> workers_ GUARDED_BY(mu_);  // by node id
};

}  // namespace syncline
