#include "control/authenticated_endpoint.h"

#include "common/log_limiter.h"
#include "common/logging.h"
#include "transport/wire.h"

namespace syncline {

AuthenticatedEndpoint::AuthenticatedEndpoint(std::unique_ptr<Endpoint> inner, std::shared_ptr<KeyRing> keys,
                                             HoldLimits limits)
    : inner_(std::move(inner)), keys_(std::move(keys)), limits_(limits) {}

Result<std::string> AuthenticatedEndpoint::Listen(const std::string& address, Receiver receiver) {
  receiver_ = std::move(receiver);
  return inner_->Listen(address, [this](Message&& m) { OnReceive(std::move(m)); });
}

Status AuthenticatedEndpoint::Connect(PeerId peer, const std::string& address) {
  return inner_->Connect(peer, address);
}

Status AuthenticatedEndpoint::Send(PeerId peer, Message message, Deadline deadline) {
  SYNCLINE_RETURN_IF_ERROR(keys_->Sign(peer, &message.header));
  return inner_->Send(peer, std::move(message), deadline);
}

void AuthenticatedEndpoint::Close() {
  inner_->Close();
  MutexLock lock(mu_);
  closed_ = true;
  held_.clear();  // releases the payloads' senders (shared memory slots)
  held_bytes_ = 0;
  holding_ = false;
}

EndpointStats AuthenticatedEndpoint::stats() const {
  EndpointStats s = inner_->stats();
  MutexLock lock(mu_);
  s.messages_unauthenticated += unauthenticated_;
  s.messages_rejected += unauthenticated_;
  s.messages_received -= std::min(s.messages_received, unauthenticated_);
  return s;
}

size_t AuthenticatedEndpoint::messages_held() const {
  MutexLock lock(mu_);
  return held_.size();
}

void AuthenticatedEndpoint::OnReceive(Message&& m) {
  Admit(std::move(m));
  RetryHeld();
}

void AuthenticatedEndpoint::Admit(Message&& m) {
  std::string why;
  uint64_t checked_version = 0;
  switch (keys_->Verify(&m.header, &why, &checked_version)) {
    case KeyRing::Verdict::kAccepted: receiver_(std::move(m)); return;
    case KeyRing::Verdict::kRejected: return Drop(m, why);
    case KeyRing::Verdict::kUnknownSender: break;
  }
  // What holding it costs: its payload and its header (up to kMaxHeaderBytes each).
  const uint64_t bytes = PayloadBytes(m) + m.header.ByteSizeLong();
  MutexLock lock(mu_);
  if (closed_) return;
  if (held_.size() >= limits_.messages || held_bytes_ + bytes > limits_.bytes) {
    ++unauthenticated_;
    SYNCLINE_LOG_WARN_LIMITED("dropping {} from node {}: {}, and {} messages ({} bytes) from unknown senders wait already",
                              proto::Op_Name(m.header.op()), m.header.sender(), why, held_.size(), held_bytes_);
    return;
  }
  // A key added since the check (even one whose RetryHeld, on another
  // receiving thread, already ran) is a reason to check again: held_version_
  // is the oldest version a held message was checked at.
  held_version_ = held_.empty() ? checked_version : std::min(held_version_, checked_version);
  held_bytes_ += bytes;
  held_.push_back(std::move(m));
  holding_ = true;
}

void AuthenticatedEndpoint::RetryHeld() {
  // The usual case: one atomic load per received message. Else until nothing
  // held was checked before the newest key: a key added while the messages
  // below are checked again is not left to the next receipt.
  while (holding_) {
    std::deque<Message> retry;
    {
      MutexLock lock(mu_);
      if (held_.empty() || keys_->version() == held_version_) return;
      retry.swap(held_);
      held_bytes_ = 0;
      holding_ = false;
    }
    // In arrival order; one still without a key goes back to be held.
    for (Message& m : retry) Admit(std::move(m));
  }
}

void AuthenticatedEndpoint::Drop(const Message& m, const std::string& why) {
  {
    MutexLock lock(mu_);
    ++unauthenticated_;
  }
  SYNCLINE_LOG_WARN_LIMITED("dropping {} that claims to come from node {}: {}", proto::Op_Name(m.header.op()),
                            m.header.sender(), why);
}

std::unique_ptr<Endpoint> Authenticated(const std::string& job_token, std::unique_ptr<Endpoint> inner,
                                        KeyRing** keys) {
  *keys = nullptr;
  if (job_token.empty()) return inner;
  auto ring = std::make_shared<KeyRing>();
  *keys = ring.get();
  return std::make_unique<AuthenticatedEndpoint>(std::move(inner), std::move(ring));
}

}  // namespace syncline
