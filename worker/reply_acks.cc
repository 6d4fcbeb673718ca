#include "worker/reply_acks.h"

#include "common/log_limiter.h"
#include "common/logging.h"

namespace syncline {

ReplyAcks::ReplyAcks(SendAck send) : send_(std::move(send)), thread_([this] { Run(); }) {}

ReplyAcks::~ReplyAcks() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  cv_.NotifyAll();
  thread_.join();
}

void ReplyAcks::Note(int32_t server, uint64_t bytes) {
  bool first;
  {
    MutexLock lock(mu_);
    first = tally_.empty();
    tally_[server] += bytes;
  }
  if (first) cv_.NotifyOne();
}

void ReplyAcks::Run() {
  for (;;) {
    std::map<int32_t, uint64_t> due;
    {
      MutexLock lock(mu_);
      // Waits without a deadline: the destructor's notification ends it.
      cv_.Wait(mu_, [this]() REQUIRES(mu_) { return stopping_ || !tally_.empty(); });
      // Stopping: the worker is leaving, and its servers' windows with it.
      if (stopping_) return;
      due.swap(tally_);
      for (const auto& [server, bytes] : unsent_) due[server] += bytes;
      unsent_.clear();
    }
    for (const auto& [server, bytes] : due) {
      Status st = send_(server, bytes);
      if (st.ok()) continue;
      // Usually the job is ending (the transport or the peer is gone). If
      // not, the bytes go with the next acknowledgement (not at once: a
      // transport that refuses every send would make this loop spin).
      SYNCLINE_LOG_WARN_LIMITED("acknowledging {} reply bytes to node {} failed: {}", bytes, server, st.message());
      MutexLock lock(mu_);
      unsent_[server] += bytes;
    }
  }
}

}  // namespace syncline
