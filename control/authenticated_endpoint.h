// AuthenticatedEndpoint: the Endpoint of every node of a job with a token. A
// forwarding wrapper around any backend (tcp, ipc, ucx, shared memory) that
// signs each outgoing message with the key its receiver shares with this node
// and hands the Receiver only messages whose proof checks out (KeyRing): a
// forged, altered or replayed message is dropped, counted in stats() and
// logged at a limited rate, never acted on.
//
// Between registering and reading its address book a node knows only the
// scheduler's key, while a peer that read its book first may already send to
// it. Such messages from unknown senders are held (bounded) and checked again
// once the keys arrive; after that (KeyRing::MarkComplete) an unknown sender
// is refused at once.
//
// Thread-safety: as the wrapped endpoint; the Receiver is called from the
// wrapped endpoint's receiving thread(s), never with a lock held.
#pragma once

#include <atomic>
#include <deque>
#include <memory>

#include "common/mutex.h"
#include "control/key_ring.h"
#include "transport/transport.h"

namespace syncline {

class AuthenticatedEndpoint : public Endpoint {
 public:
  // Messages and bytes (headers and payloads) from unknown senders held at most.
  static constexpr size_t kMaxHeldMessages = 4096;
  static constexpr uint64_t kMaxHeldBytes = uint64_t{256} << 20;
  struct HoldLimits {
    size_t messages = kMaxHeldMessages;
    uint64_t bytes = kMaxHeldBytes;
  };

  AuthenticatedEndpoint(std::unique_ptr<Endpoint> inner, std::shared_ptr<KeyRing> keys, HoldLimits limits);
  AuthenticatedEndpoint(std::unique_ptr<Endpoint> inner, std::shared_ptr<KeyRing> keys)
      : AuthenticatedEndpoint(std::move(inner), std::move(keys), HoldLimits{}) {}

  Result<std::string> Listen(const std::string& address, Receiver receiver) override;
  Status Connect(PeerId peer, const std::string& address) override;
  Status Send(PeerId peer, Message message, Deadline deadline) override;
  Status Flush(Deadline deadline) override { return inner_->Flush(deadline); }
  void Close() override;
  EndpointStats stats() const override;

  KeyRing& keys() { return *keys_; }
  // Messages from unknown senders waiting for their keys now.
  size_t messages_held() const;

 private:
  void OnReceive(Message&& m);
  // Checks `m`: delivers it, holds it, or drops it with a logged reason.
  void Admit(Message&& m);
  // Checks the held messages again once keys were added.
  void RetryHeld();
  void Drop(const Message& m, const std::string& why);

  std::unique_ptr<Endpoint> inner_;
  std::shared_ptr<KeyRing> keys_;
  const HoldLimits limits_;
  Receiver receiver_;
  mutable Mutex mu_;
  std::deque<Message> held_ GUARDED_BY(mu_);
  std::atomic<bool> holding_{false};  // held_ is not empty: lets every other receipt skip RetryHeld's locks
  uint64_t held_bytes_ GUARDED_BY(mu_) = 0;
  uint64_t held_version_ GUARDED_BY(mu_) = 0;  // the oldest key ring version a held message was checked at
  uint64_t unauthenticated_ GUARDED_BY(mu_) = 0;
  bool closed_ GUARDED_BY(mu_) = false;
};

// The endpoint a node of a job uses: `inner` itself when the settings give no
// token (SYNCLINE_ALLOW_NO_TOKEN), else `inner` wrapped in an
// AuthenticatedEndpoint; `*keys` is its key ring (null without a token).
std::unique_ptr<Endpoint> Authenticated(const std::string& job_token, std::unique_ptr<Endpoint> inner,
                                        KeyRing** keys);

}  // namespace syncline
