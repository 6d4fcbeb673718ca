// ReplyAcks: a worker's acknowledgements of the sums it received, which give
// their server's reply window to this worker room again (REPLY_ACK;
// server/reply_scheduler.h).
//
// Sums arrive on the endpoint's receiving thread, which must not wait on a
// send: Note() only adds the bytes to their server's tally, and a thread of
// its own sends each server one REPLY_ACK with all it tallied since the last,
// so acknowledgements batch themselves when replies come faster than they go.
//
// Thread-safety: Note from any thread. The destructor stops the thread (what
// was noted and not yet sent is dropped: the worker is leaving); `send` is not
// called after it returns.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <thread>

#include "common/mutex.h"
#include "common/status.h"

namespace syncline {

class ReplyAcks {
 public:
  // Sends one REPLY_ACK of `bytes` to `server` (a node id).
  using SendAck = std::function<Status(int32_t server, uint64_t bytes)>;

  explicit ReplyAcks(SendAck send);
  ~ReplyAcks();
  ReplyAcks(const ReplyAcks&) = delete;
  ReplyAcks& operator=(const ReplyAcks&) = delete;

  // `bytes` of a sum from `server` that asked for acknowledgement arrived.
  void Note(int32_t server, uint64_t bytes);

 private:
  void Run();

  const SendAck send_;
  Mutex mu_;
  CondVar cv_;
  std::map<int32_t, uint64_t> tally_ GUARDED_BY(mu_);  // by server: bytes not yet acknowledged
  std::map<int32_t, uint64_t> unsent_ GUARDED_BY(mu_);  // by server: bytes whose send failed, for the next
  bool stopping_ GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: starts once the rest is built
};

}  // namespace syncline
