// KeyRing: what one node of a job with a token knows about proving and
// checking who sent a message. For every peer it holds the key they share,
// the sequence number of the next message sent there, and a window of the
// sequence numbers already accepted from there (a replayed message is
// refused). Sign() stamps an outgoing header; Verify() checks an incoming one.
//
// A node learns the scheduler's key before it registers (from its own random
// nonce) and every other peer's key from its address book (control/client.h).
// The scheduler's ring also holds the job key: a message from a node that has
// no id yet (sender -1) is checked with the key derived from the nonce it
// carries, and its replays are caught per nonce.
//
// Thread-safety: all methods may be called from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "control/job_keys.h"
#include "transport/header_authenticator.h"
#include "transport/transport.h"

namespace syncline {

class KeyRing : public HeaderAuthenticator {
 public:
  // Sequence numbers this far behind the newest accepted one from a peer are
  // still accepted once (transports that deliver a little out of order).
  static constexpr uint64_t kReplayWindow = 4096;
  // Nodes without an id whose state the scheduler keeps (far above any job's
  // registrations; each needs a valid MAC, so only token holders add one).
  static constexpr size_t kMaxProvisional = 1 << 16;

  // `job_key`: set on the scheduler only.
  explicit KeyRing(std::optional<SecretKey> job_key = std::nullopt);

  // (Re)starts the exchange with `peer` under `key`: sequence numbers and
  // the replay window start afresh.
  void SetPeerKey(PeerId peer, const SecretKey& key);
  // A node: the nonce its messages carry while it has no id (sender -1).
  void SetOwnNonce(std::string nonce);
  // A node: every peer's key is in; a sender without one is now refused
  // rather than held for later (see AuthenticatedEndpoint).
  void MarkComplete();
  bool complete() const;
  // Changes whenever a key is added.
  uint64_t version() const;

  // Stamps `header` (to `peer`) with a fresh sequence number and its MAC.
  // FailedPrecondition if there is no key for `peer`.
  Status Sign(PeerId peer, proto::Header* header) override;

  enum class Verdict { kAccepted, kUnknownSender, kRejected };
  // Checks `header`'s proof; on kRejected (and kUnknownSender) `why` says why.
  // On kUnknownSender, `*checked_version` (if given) is the version() at
  // which the ring had no key for the sender: a later version may have one.
  Verdict Verify(proto::Header* header, std::string* why, uint64_t* checked_version = nullptr);
  // Verify for a layer that cannot hold a message for later: an unknown
  // sender is refused too (InvalidArgument with the reason).
  Status Check(proto::Header* header) override;

 private:
  struct Exchange {
    SecretKey key{};
    uint64_t next_send = 1;
    uint64_t newest = 0;             // newest sequence number accepted
    std::vector<uint64_t> seen;      // bitmap over the replay window, by seq % kReplayWindow
  };
  static Exchange Fresh(const SecretKey& key);
  // Marks `seq` accepted from `x`; false if it is a replay or too old.
  static bool Accept(Exchange& x, uint64_t seq);

  const std::optional<SecretKey> job_key_;
  mutable Mutex mu_;
  std::map<PeerId, Exchange> peers_ GUARDED_BY(mu_);
  std::map<std::string, Exchange> provisional_ GUARDED_BY(mu_);  // by nonce (scheduler)
  std::string own_nonce_ GUARDED_BY(mu_);
  bool complete_ GUARDED_BY(mu_) = false;
  uint64_t version_ GUARDED_BY(mu_) = 0;
};

}  // namespace syncline
