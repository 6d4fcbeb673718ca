#include "transport/shm/shm_endpoint.h"

#include <unistd.h>

#include <cstring>

#include "common/logging.h"
#include "transport/wire.h"

namespace syncline {

ShmEndpoint::ShmEndpoint(std::unique_ptr<Endpoint> inner, ShmOptions options)
    : inner_(std::move(inner)), options_(options) {}

ShmEndpoint::~ShmEndpoint() { inner_->Close(); }

void ShmEndpoint::MarkColocated(PeerId peer, int32_t pid) {
  std::lock_guard<std::mutex> lock(mu_);
  colocated_[peer] = pid;
}

Result<std::string> ShmEndpoint::Listen(const std::string& address, Receiver receiver) {
  receiver_ = std::move(receiver);
  return inner_->Listen(address, [this](Message&& m) { OnMessage(std::move(m)); });
}

Outbox* ShmEndpoint::OutboxFor(PeerId peer) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!colocated_.count(peer)) return nullptr;
  auto& box = outboxes_[peer];
  if (!box) {
    auto made = Outbox::Create(options_.outbox_bytes);
    if (!made.ok()) {
      SYNCLINE_LOG_WARN("no shared memory for peer {} ({}); using the socket", peer, made.status().message());
      colocated_.erase(peer);
      return nullptr;
    }
    box = std::move(made).value();
  }
  return box.get();
}

Status ShmEndpoint::Send(PeerId peer, Message message, Deadline deadline) {
  const uint64_t bytes = PayloadBytes(message);
  if (bytes < options_.min_bytes) return inner_->Send(peer, std::move(message), deadline);
  Outbox* box = OutboxFor(peer);
  if (box == nullptr) return inner_->Send(peer, std::move(message), deadline);
  auto placement = box->Place(bytes);
  if (!placement) {
    std::lock_guard<std::mutex> lock(mu_);
    ++shm_stats_.fallbacks;
    return inner_->Send(peer, std::move(message), deadline);
  }
  proto::ShmRef* ref = message.header.mutable_shm();
  ref->set_pid(getpid());
  ref->set_fd(box->fd());
  ref->set_segment_bytes(box->segment_bytes());
  ref->set_slot(placement->slot);
  ref->set_offset(placement->offset);
  uint8_t* out = placement->data;
  for (const Buffer& b : message.payloads) {
    std::memcpy(out, b.data(), b.size());
    out += b.size();
    ref->add_frame_lengths(b.size());
  }
  message.payloads.clear();  // releases the caller's memory now: the bytes are in the segment
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++shm_stats_.messages_sent;
  }
  return inner_->Send(peer, std::move(message), deadline);
}

void ShmEndpoint::OnMessage(Message&& m) {
  if (!m.header.has_shm()) return receiver_(std::move(m));
  const proto::ShmRef ref = m.header.shm();
  std::shared_ptr<PeerSegment> segment;
  Status problem;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // A sender may use shared memory before this side has read the address
    // book and marked it; the segment's own checks (it opens, has the magic
    // and the size) are what make it acceptable. Once marked, the pid must match.
    auto peer = colocated_.find(m.header.sender());
    if (peer != colocated_.end() && peer->second != ref.pid()) {
      problem = InvalidArgument("shared-memory message from node " + std::to_string(m.header.sender()) +
                                " names pid " + std::to_string(ref.pid()) + ", not its own " +
                                std::to_string(peer->second));
    } else {
      auto& slot = mapped_[{ref.pid(), ref.fd()}];
      if (!slot) {
        auto opened = PeerSegment::Open(ref.pid(), ref.fd(), ref.segment_bytes());
        if (opened.ok()) slot = std::move(opened).value();
        else problem = opened.status();
      }
      segment = slot;
      if (!segment) mapped_.erase({ref.pid(), ref.fd()});
    }
  }
  uint64_t total = 0;
  for (uint64_t l : ref.frame_lengths()) total += l;
  Result<const uint8_t*> base = problem.ok() && segment ? segment->At(ref.offset(), total) : Result<const uint8_t*>(problem);
  if (!base.ok()) {
    if (segment) segment->Release(ref.slot());  // never leave the sender's ring stuck
    std::lock_guard<std::mutex> lock(mu_);
    ++rejected_;
    SYNCLINE_LOG_WARN("dropping a shared-memory message: {}", base.status().message());
    return;
  }
  // One owner for all frames: the region is released when the last frame's Buffer drops.
  const uint32_t slot = ref.slot();
  std::shared_ptr<const void> owner(*base, [segment, slot](const void*) { segment->Release(slot); });
  const uint8_t* at = *base;
  for (uint64_t l : ref.frame_lengths()) {
    m.payloads.emplace_back(at, l, owner);
    at += l;
  }
  owner.reset();
  m.header.clear_shm();
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++shm_stats_.messages_received;
  }
  receiver_(std::move(m));
}

EndpointStats ShmEndpoint::stats() const {
  EndpointStats s = inner_->stats();
  std::lock_guard<std::mutex> lock(mu_);
  s.messages_rejected += rejected_;
  return s;
}

ShmEndpoint::ShmStats ShmEndpoint::shm_stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return shm_stats_;
}

}  // namespace syncline
