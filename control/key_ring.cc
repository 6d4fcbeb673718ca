#include "control/key_ring.h"

namespace syncline {
namespace {

constexpr size_t kWindowWords = KeyRing::kReplayWindow / 64;

// The bytes a MAC covers: the header as serialized with its mac cleared.
std::string MacedBytes(const proto::Header& header) {
  std::string bytes;
  header.SerializeToString(&bytes);
  return bytes;
}

}  // namespace

KeyRing::KeyRing(std::optional<SecretKey> job_key) : job_key_(job_key) {}

KeyRing::Exchange KeyRing::Fresh(const SecretKey& key) {
  Exchange x;
  x.key = key;
  x.seen.assign(kWindowWords, 0);
  return x;
}

bool KeyRing::Accept(Exchange& x, uint64_t seq) {
  if (seq == 0) return false;
  auto bit = [&](uint64_t s) -> std::pair<uint64_t&, uint64_t> {
    const uint64_t slot = s % kReplayWindow;
    return {x.seen[slot / 64], uint64_t{1} << (slot % 64)};
  };
  if (seq > x.newest) {
    // Slide the window: the slots between the old newest and seq now stand
    // for sequence numbers not seen yet.
    const uint64_t gap = seq - x.newest;
    if (gap >= kReplayWindow) {
      std::fill(x.seen.begin(), x.seen.end(), 0);
    } else {
      for (uint64_t s = x.newest + 1; s <= seq; ++s) {
        auto [word, mask] = bit(s);
        word &= ~mask;
      }
    }
    x.newest = seq;
    auto [word, mask] = bit(seq);
    word |= mask;
    return true;
  }
  if (x.newest - seq >= kReplayWindow) return false;
  auto [word, mask] = bit(seq);
  if (word & mask) return false;
  word |= mask;
  return true;
}

void KeyRing::SetPeerKey(PeerId peer, const SecretKey& key) {
  MutexLock lock(mu_);
  peers_[peer] = Fresh(key);
  ++version_;
}

void KeyRing::SetOwnNonce(std::string nonce) {
  MutexLock lock(mu_);
  own_nonce_ = std::move(nonce);
}

void KeyRing::MarkComplete() {
  MutexLock lock(mu_);
  complete_ = true;
  ++version_;
}

bool KeyRing::complete() const {
  MutexLock lock(mu_);
  return complete_;
}

uint64_t KeyRing::version() const {
  MutexLock lock(mu_);
  return version_;
}

Status KeyRing::Sign(PeerId peer, proto::Header* header) {
  SecretKey key;
  proto::Auth* auth = header->mutable_auth();
  {
    MutexLock lock(mu_);
    auto it = peers_.find(peer);
    if (it == peers_.end())
      return FailedPrecondition("no key shared with node " + std::to_string(peer) + " (not in this job's address book)");
    key = it->second.key;
    auth->set_seq(it->second.next_send++);
    if (header->sender() < 0) auth->set_nonce(own_nonce_);
  }
  auth->clear_mac();
  auth->set_mac(Mac(key, MacedBytes(*header)));
  return Status::Ok();
}

KeyRing::Verdict KeyRing::Verify(proto::Header* header, std::string* why, uint64_t* checked_version) {
  if (!header->has_auth() || header->auth().seq() == 0) {
    *why = "it carries no proof of its sender";
    return Verdict::kRejected;
  }
  const int32_t sender = header->sender();
  const std::string& nonce = header->auth().nonce();  // only the mac changes below
  const uint64_t seq = header->auth().seq();
  SecretKey key;
  if (sender < 0) {
    if (!job_key_ || nonce.size() != kRegistrationNonceBytes) {
      *why = "a sender without an id must name its registration nonce, and only the scheduler hears one";
      return Verdict::kRejected;
    }
    key = NodeKey(*job_key_, nonce);
  } else {
    MutexLock lock(mu_);
    auto it = peers_.find(sender);
    if (it == peers_.end()) {
      *why = "no key is shared with node " + std::to_string(sender);
      if (checked_version != nullptr) *checked_version = version_;
      return complete_ ? Verdict::kRejected : Verdict::kUnknownSender;
    }
    key = it->second.key;
  }
  // Only now is the header changed (its mac taken out): a held header must
  // keep it for its second check.
  const std::string mac = std::move(*header->mutable_auth()->mutable_mac());
  header->mutable_auth()->clear_mac();
  if (!MacMatches(key, MacedBytes(*header), mac)) {
    *why = sender < 0 ? "its MAC does not match the job token (a node with another token, or forged)"
                      : "its MAC does not match the key of node " + std::to_string(sender) + " (forged or altered)";
    return Verdict::kRejected;
  }
  MutexLock lock(mu_);
  Exchange* x = nullptr;
  if (sender < 0) {
    auto it = provisional_.find(nonce);
    if (it == provisional_.end()) {
      if (provisional_.size() >= kMaxProvisional) {
        *why = "too many nodes without an id";
        return Verdict::kRejected;
      }
      it = provisional_.emplace(nonce, Fresh(key)).first;
    }
    x = &it->second;
  } else {
    auto it = peers_.find(sender);
    if (it == peers_.end() || it->second.key != key) {
      *why = "node " + std::to_string(sender) + "'s key changed while its message was checked";
      return Verdict::kRejected;
    }
    x = &it->second;
  }
  if (!Accept(*x, seq)) {
    *why = "sequence number " + std::to_string(seq) + " was seen already or is too old (a replay)";
    return Verdict::kRejected;
  }
  return Verdict::kAccepted;
}

Status KeyRing::Check(proto::Header* header) {
  std::string why;
  if (Verify(header, &why) == Verdict::kAccepted) return Status::Ok();
  return InvalidArgument(why);
}

}  // namespace syncline
