// ShmEndpoint's receiving side (shm_endpoint.h): messages from the inner
// transport, held until the address book is read where they must be, the
// segments they name mapped, and one poller per mapped segment's header ring.
#include <algorithm>
#include <chrono>

#include "common/log_limiter.h"
#include "common/logging.h"
#include "transport/shm/shm_endpoint.h"  // the class: its sending side is in shm_endpoint.cc
#include "transport/wire.h"

namespace syncline {
namespace {

// How long a ring message waits for the socket messages sent before it.
constexpr auto kSocketOrderWait = std::chrono::seconds(10);
// A poller's sleep between looks at the closed flag.
constexpr int kPollerWaitMs = 50;

}  // namespace

void ShmEndpoint::PeersComplete() {
  // Batch by batch, in arrival order: a sender's messages that come while a
  // batch is delivered are still held (held_senders_), behind it.
  for (;;) {
    std::deque<Message> batch;
    {
      MutexLock lock(mu_);
      if (held_.empty()) {
        peers_complete_ = true;
        held_senders_.clear();
        return;
      }
      batch.swap(held_);
      held_bytes_ = 0;
    }
    for (Message& m : batch) {
      const PeerId sender = m.header.sender();
      DeliverFromSocket(std::move(m));
      CountSocketMessage(sender);
    }
  }
}

void ShmEndpoint::OnSocketMessage(Message&& m) {
  if (HoldUntilPeersComplete(m)) return;
  const PeerId sender = m.header.sender();
  DeliverFromSocket(std::move(m));
  CountSocketMessage(sender);
}

bool ShmEndpoint::HoldUntilPeersComplete(Message& m) {
  const PeerId sender = m.header.sender();
  {
    MutexLock lock(mu_);
    if (peers_complete_) return false;
    const bool unmarked_reference = m.header.has_shm() && !colocated_.count(sender);
    if (!unmarked_reference && !held_senders_.count(sender)) return false;
    const uint64_t bytes = PayloadBytes(m) + m.header.ByteSizeLong();
    if (held_.size() < kMaxHeldMessages && held_bytes_ + bytes <= kMaxHeldBytes) {
      held_senders_.insert(sender);
      held_bytes_ += bytes;
      held_.push_back(std::move(m));
      return true;
    }
  }
  Reject("a message from node " + std::to_string(sender) + " came before this node read its address book, behind a "
         "shared-memory reference, and " + std::to_string(kMaxHeldMessages) + " messages or " +
         std::to_string(kMaxHeldBytes >> 20) + " MiB wait already");
  CountSocketMessage(sender);  // a ring message that names it must not wait for it
  return true;
}

void ShmEndpoint::CountSocketMessage(PeerId sender) {
  {
    MutexLock lock(mu_);
    ++socket_received_[sender];
  }
  socket_received_cv_.NotifyAll();
}

void ShmEndpoint::DeliverFromSocket(Message&& m) {
  if (!m.header.has_shm()) return receiver_(std::move(m));
  Result<std::shared_ptr<PeerSegment>> segment = SegmentFor(m);
  Status attached = segment.ok() ? AttachPayloads(m, *segment) : segment.status();
  if (!attached.ok()) return Reject(attached.message());
  CountShm(&ShmStats::messages_received);
  own_.MoreBytes(0, PayloadBytes(m));  // the inner transport saw no payload frames
  receiver_(std::move(m));
}

Result<std::shared_ptr<PeerSegment>> ShmEndpoint::SegmentFor(const Message& m) {
  const proto::ShmRef& ref = m.header.shm();
  const PeerId sender = m.header.sender();
  MutexLock lock(mu_);
  // Only a peer the address book names as sharing this machine, and only its
  // own process's segments: nothing is opened for anyone else.
  auto peer = colocated_.find(sender);
  if (peer == colocated_.end())
    return InvalidArgument("node " + std::to_string(sender) +
                           " sent a shared-memory reference, but the address book does not name it as a peer on "
                           "this machine that uses shared memory");
  if (peer->second != ref.pid())
    return InvalidArgument("shared-memory message from node " + std::to_string(sender) + " names pid " +
                           std::to_string(ref.pid()) + ", not its own " + std::to_string(peer->second));
  auto& slot = mapped_[{ref.pid(), ref.fd()}];
  if (!slot) {
    auto opened = PeerSegment::Open(ref.pid(), ref.fd(), ref.segment_bytes());
    if (!opened.ok()) {
      mapped_.erase({ref.pid(), ref.fd()});
      return opened.status();
    }
    slot = std::move(opened).value();
    if (!closed_.load()) {
      // From now on the sender may pass this node whole messages through the segment's ring.
      pollers_.emplace_back([this, segment = slot, sender, pid = ref.pid()] { Poll(segment, sender, pid); });
      slot->ring().Attach();
    }
  }
  return slot;
}

Status ShmEndpoint::AttachPayloads(Message& m, const std::shared_ptr<PeerSegment>& segment) {
  const proto::ShmRef ref = m.header.shm();
  m.header.clear_shm();
  if (ref.frame_lengths_size() == 0) return Status::Ok();  // a ring message without payload
  uint64_t total = 0;
  for (uint64_t l : ref.frame_lengths()) total += l;
  Result<const uint8_t*> base = segment->At(ref.offset(), total);
  if (!base.ok()) {
    segment->Release(ref.slot());  // never leave the sender's ring stuck
    return base.status();
  }
  // One owner for all frames: the region is released when the last frame's Buffer drops.
  const uint32_t slot = ref.slot();
  std::shared_ptr<const void> owner(*base, [segment, slot](const void*) { segment->Release(slot); });
  const uint8_t* at = *base;
  for (uint64_t l : ref.frame_lengths()) {
    m.payloads.emplace_back(at, l, owner);
    at += l;
  }
  return Status::Ok();
}

void ShmEndpoint::Poll(std::shared_ptr<PeerSegment> segment, PeerId sender, int32_t pid) {
  HeaderRing& ring = segment->ring();
  const std::string where = "shared memory of node " + std::to_string(sender);
  std::string record;
  while (!closed_.load()) {
    const HeaderRing::Take took = ring.Next(&record);
    if (took == HeaderRing::Take::kEmpty) {
      ring.Wait(kPollerWaitMs);
      continue;
    }
    if (took == HeaderRing::Take::kCorrupt) {
      Reject("the header ring in the " + where + " is corrupt; no longer reading it");
      return;
    }
    HandleRingRecord(record, segment, sender, pid, where);
    ring.MarkDelivered();
  }
}

void ShmEndpoint::HandleRingRecord(const std::string& record, const std::shared_ptr<PeerSegment>& segment,
                                   PeerId sender, int32_t pid, const std::string& where) {
  // A record is acted on (its slot released included) only once it is proven
  // to be the segment owner's: a malformed, forged or misplaced one is
  // dropped as it is, and the owner never wrote it.
  const auto release_region = [&](const proto::Header& header) {
    if (header.shm().frame_lengths_size() > 0) segment->Release(header.shm().slot());
  };
  auto admitted = AdmitReceived(DecodeMessage(record.data(), record.size(), {}), own_, where);
  if (!admitted) return;
  Message m = std::move(*admitted);
  if (authenticator_ != nullptr) {
    if (Status proven = authenticator_->Check(&m.header); !proven.ok()) {
      own_.Unauthenticated();
      SYNCLINE_LOG_WARN_LIMITED("dropping {} in the {}: {}", proto::Op_Name(m.header.op()), where, proven.message());
      return;
    }
  }
  if (m.header.sender() != sender || !m.header.has_shm() || m.header.shm().pid() != pid)
    return Reject("a message in the " + where + " claims to come from node " + std::to_string(m.header.sender()) +
                  ", pid " + std::to_string(m.header.shm().pid()));
  AwaitSocketMessages(sender, m.header.shm().socket_messages_before());
  if (closed_.load()) return release_region(m.header);
  if (Status attached = AttachPayloads(m, segment); !attached.ok()) return Reject(attached.message());
  {
    MutexLock lock(mu_);
    ++shm_stats_.ring_messages_received;
    if (!m.payloads.empty()) ++shm_stats_.messages_received;
  }
  own_.MoreBytes(0, PayloadBytes(m));  // admitted with its payload still in the segment
  receiver_(std::move(m));
}

void ShmEndpoint::AwaitSocketMessages(PeerId sender, uint64_t count) {
  MutexLock lock(mu_);
  uint64_t& passed = order_passed_[sender];
  if (count <= passed) return;
  const bool arrived = socket_received_cv_.WaitUntil(mu_, Deadline::After(kSocketOrderWait), [&]() REQUIRES(mu_) {
    return closed_.load() || socket_received_[sender] >= count;
  });
  // Wait for a given count once: if some of those messages were lost on the
  // socket, later ring messages (which name the same count) must not stall too.
  passed = std::max(passed, count);
  if (!arrived)
    SYNCLINE_LOG_WARN("node {} sent {} messages through the socket before one through shared memory, {} arrived "
                      "within {} s; delivering the later one anyway",
                      sender, count, socket_received_[sender], kSocketOrderWait.count());
}

void ShmEndpoint::Reject(const std::string& why) {
  own_.Rejected();
  SYNCLINE_LOG_WARN_LIMITED("dropping a shared-memory message: {}", why);
}

}  // namespace syncline
