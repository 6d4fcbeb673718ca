// KvClient: a worker's data plane. It pushes one admitted chunk at a time to
// the server that owns its key, asking for the round's sum in return (one
// message each way) and for an early acknowledgement of the push itself; it
// matches replies to chunks and hands each sum to the chunk's Operation.
//
// Credit: every sent chunk holds its bytes of the ChunkScheduler's credit
// until the server acknowledges the push (PUSH_ACK), or the chunk ends
// otherwise (sum, error, failure): `release` is called exactly once per chunk.
//
// Sums that ask for it (FLAG_ACK_REPLY: a server scheduling its replies) are
// acknowledged to their server (REPLY_ACK), from a thread of ReplyAcks.
//
// Thread-safety: all methods may be called from any thread; the worker feeds
// data-plane messages from its endpoint's I/O thread through Handle().
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <unordered_map>

#include "common/mutex.h"
#include "common/settings.h"
#include "common/timeline.h"
#include "control/client.h"
#include "metrics/common_metrics.h"
#include "transport/transport.h"
#include "worker/chunk.h"
#include "worker/reply_acks.h"

namespace syncline {

class KvClient {
 public:
  using Release = std::function<void(uint64_t bytes)>;

  // `control` names peers in errors and gives this node's id; `metrics`
  // gets the traffic counters (and must outlive the client).
  KvClient(Endpoint* endpoint, const SchedulerClient* control, int request_timeout_ms, Release release,
           MetricsRegistry& metrics);

  // Pushes the chunk and registers it for its reply; a send failure fails the
  // chunk's operation (and releases its credit).
  void Send(ChunkTask&& chunk);
  // Takes a data-plane message (PUSH_ACK, PULL_REPLY, ERROR); false if `m` is not one.
  bool Handle(Message& m);
  // Fails every chunk in flight with `status`.
  void FailAll(const Status& status);
  // Records each chunk's stages (queued, push until the server's ack, sum
  // until the reply) as spans; set before the first Send, or never.
  void SetTimeline(Timeline* timeline) { timeline_ = timeline; }

 private:
  struct InFlight {
    std::shared_ptr<Operation> op;
    size_t chunk = 0;
    int32_t server = -1;
    uint64_t bytes = 0;
    bool holds_credit = true;
    int64_t posted_us = 0, sent_us = 0, acked_us = 0;  // while tracing
    std::function<void(const Buffer&)> on_sum;         // ChunkTask's
    std::function<void(const Status&)> on_fail;        // ChunkTask's
  };
  void Trace(const InFlight& chunk, int64_t replied_us) const;
  // Gives the entry's credit back once.
  uint64_t TakeCreditLocked(InFlight& entry) REQUIRES(mu_);

  Endpoint* const endpoint_;
  const SchedulerClient* const control_;
  const int request_timeout_ms_;
  const Release release_;
  Timeline* timeline_ = nullptr;
  TrafficCounters traffic_;
  Counter& unknown_replies_;
  std::atomic<uint64_t> next_request_{1};
  Mutex mu_;
  std::unordered_map<uint64_t, InFlight> in_flight_ GUARDED_BY(mu_);  // by request id
  ReplyAcks acks_;  // last: its thread sends through endpoint_ until it stops
};

}  // namespace syncline
