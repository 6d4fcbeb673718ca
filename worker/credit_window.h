// CreditWindow: how many bytes of pushes a worker lets be in flight at once
// (pushed, their reply not yet in): SYNCLINE_SCHEDULING_CREDIT. Pushes beyond
// the credit wait, in the order they were issued, and go as replies free
// credit. A push larger than the whole credit goes alone once nothing else
// is in flight, so no push waits forever. A credit of 0 means no limit.
//
// Bounding what is in flight bounds how far one worker's pushes can run
// ahead in the servers' queues and the network's buffers, so the end of a
// step does not wait for a long backlog to drain.
//
// Not thread-safe: the Worker calls it under its own mutex, and sends the
// pushes it hands back after unlocking.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "transport/transport.h"

namespace syncline {

class CreditWindow {
 public:
  struct Push {
    int32_t server;
    Message message;
    uint64_t bytes;
  };

  explicit CreditWindow(uint64_t credit_bytes) : credit_(credit_bytes) {}

  // Takes a push; appends it to `go` if it may be sent now, else keeps it.
  void Admit(Push push, std::vector<Push>* go);
  // A push of `bytes` that Admit or Release handed out is answered (or
  // failed to send): frees its credit and appends to `go` the waiting pushes
  // that now fit, oldest first.
  void Release(uint64_t bytes, std::vector<Push>* go);
  // Removes every waiting push (the job failed). The caller drops them after
  // unlocking: their payloads are views whose release reports to operations.
  std::deque<Push> TakeWaiting();

  uint64_t in_flight_bytes() const { return in_flight_; }
  size_t waiting() const { return waiting_.size(); }

 private:
  bool Fits(uint64_t bytes) const { return credit_ == 0 || in_flight_ == 0 || in_flight_ + bytes <= credit_; }

  const uint64_t credit_;
  uint64_t in_flight_ = 0;
  std::deque<Push> waiting_;
};

}  // namespace syncline
