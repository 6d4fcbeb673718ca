#include "transport/shm/shm_endpoint.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "common/logging.h"
#include "transport/wire.h"

namespace syncline {
namespace {

// Send's pause while a full outbox or ring drains.
constexpr auto kFullPause = std::chrono::microseconds(50);

void Pause() { std::this_thread::sleep_for(kFullPause); }

// Copies the payload frames of `message` into `box` and points `ref` at
// them; false if the outbox has no room now.
bool PlacePayloads(Outbox& box, uint64_t bytes, Message& message, proto::ShmRef* ref) {
  auto placement = box.Place(message.payloads, bytes);
  if (!placement) return false;
  ref->set_pid(getpid());
  ref->set_fd(box.fd());
  ref->set_segment_bytes(box.segment_bytes());
  ref->set_slot(placement->slot);
  ref->set_offset(placement->offset);
  for (const Buffer& b : message.payloads) ref->add_frame_lengths(b.size());
  message.payloads.clear();  // releases the caller's memory now: the bytes are in the segment
  return true;
}

}  // namespace

ShmEndpoint::ShmEndpoint(std::unique_ptr<Endpoint> inner, ShmOptions options, HeaderAuthenticator* authenticator)
    : inner_(std::move(inner)), options_(options), authenticator_(authenticator) {}

ShmEndpoint::~ShmEndpoint() { Close(); }

void ShmEndpoint::MarkColocated(PeerId peer, int32_t pid) {
  MutexLock lock(mu_);
  colocated_[peer] = pid;
}

Result<std::string> ShmEndpoint::Listen(const std::string& address, Receiver receiver) {
  receiver_ = std::move(receiver);
  return inner_->Listen(address, [this](Message&& m) { OnSocketMessage(std::move(m)); });
}

void ShmEndpoint::Close() {
  inner_->Close();  // no socket message, and so no new poller, after this
  if (closed_.exchange(true)) return;
  std::vector<std::thread> pollers;
  {
    MutexLock lock(mu_);
    pollers.swap(pollers_);
    held_.clear();
    held_bytes_ = 0;
    for (auto& [key, segment] : mapped_) segment->ring().Detach();  // senders go back to the socket
  }
  socket_received_cv_.NotifyAll();
  for (std::thread& t : pollers) t.join();
}

Status ShmEndpoint::Flush(Deadline deadline) {
  std::vector<std::pair<PeerId, Outbox*>> boxes;
  {
    MutexLock lock(mu_);
    // Outboxes live until this endpoint is destroyed (never erased).
    for (auto& [peer, box] : outboxes_) boxes.emplace_back(peer, box.get());
  }
  std::string undrained;
  for (auto [peer, box] : boxes) {
    // A poller that stops reading detaches: its records go nowhere anyway.
    while (box->ring_attached() && !box->ring_drained() && !deadline.Expired()) Pause();
    if (box->ring_attached() && !box->ring_drained()) undrained += (undrained.empty() ? "" : ", ") + std::to_string(peer);
  }
  Status inner = inner_->Flush(deadline);
  if (!undrained.empty())
    return DeadlineExceeded("peer(s) " + undrained + " did not handle the messages in their shared-memory rings in time");
  return inner;
}

ShmEndpoint::Route ShmEndpoint::RouteFor(PeerId peer) {
  MutexLock lock(mu_);
  auto& lane = lanes_[peer];
  if (!lane) lane = std::make_unique<SocketLane>();
  if (!colocated_.count(peer) || no_outbox_.count(peer)) return {nullptr, lane.get()};
  auto& box = outboxes_[peer];
  if (!box) {
    auto made = Outbox::Create(options_.outbox_bytes);
    if (!made.ok()) {
      SYNCLINE_LOG_WARN("no shared memory for peer {} ({}); using the socket", peer, made.status().message());
      no_outbox_.insert(peer);  // still colocated: its own references are honoured
      return {nullptr, lane.get()};
    }
    box = std::move(made).value();
  }
  return {box.get(), lane.get()};
}

void ShmEndpoint::CountShm(uint64_t ShmStats::*counter) {
  MutexLock lock(mu_);
  ++(shm_stats_.*counter);
}

Status ShmEndpoint::Send(PeerId peer, Message message, Deadline deadline) {
  const Route route = RouteFor(peer);
  Outbox* box = route.box;
  if (box == nullptr) return SendThroughSocket(peer, *route.lane, std::move(message), deadline);
  const bool ring = box->ring_attached();
  const uint64_t bytes = PayloadBytes(message);
  const bool has_payload = !message.payloads.empty();
  const bool wants_segment = has_payload && (ring || bytes >= options_.min_bytes || box->TakeFirstOffer());
  const bool placed = wants_segment && PlacePayloads(*box, bytes, message, message.header.mutable_shm());
  if (wants_segment) {
    if (!placed) message.header.clear_shm();
    CountShm(placed ? &ShmStats::messages_sent : &ShmStats::fallbacks);
  }
  if (ring && (placed || !has_payload) && FitsTheRing(message))
    return PostThroughRing(peer, route, std::move(message), deadline);
  if (ring) {
    // The outbox has no room for the payload (or the header is too big for
    // the ring): the socket takes it, once the peer has handled everything
    // already in the ring, so that it overtakes nothing.
    while (!box->ring_drained() && box->ring_attached()) {
      if (deadline.Expired()) {
        if (placed) box->Unplace(message.header.shm().slot());
        return DeadlineExceeded("peer " + std::to_string(peer) +
                                " did not handle the messages in its shared-memory ring in time");
      }
      Pause();
    }
  }
  const uint32_t slot = message.header.shm().slot();
  Status sent = SendThroughSocket(peer, *route.lane, std::move(message), deadline);
  if (!sent.ok() && placed) box->Unplace(slot);  // the receiver will never release it
  return sent;
}

Status ShmEndpoint::SendThroughSocket(PeerId peer, SocketLane& lane, Message message, Deadline deadline) {
  // The inner transport counts the frames it carries; payload bytes in the
  // segment are counted here, once.
  uint64_t segment_bytes = 0;
  if (message.header.has_shm())
    for (uint64_t l : message.header.shm().frame_lengths()) segment_bytes += l;
  Status sent;
  {
    MutexLock lock(lane.mu);  // the count must follow the wire's order (PostThroughRing reads it)
    sent = inner_->Send(peer, std::move(message), deadline);
    if (sent.ok()) ++lane.sent;
  }
  if (sent.ok() && segment_bytes > 0) own_.MoreBytes(segment_bytes, 0);
  return sent;
}

bool ShmEndpoint::FitsTheRing(const Message& message) {
  // The ShmRef and the proof of sender (below) add a few bytes to a header without them.
  return message.header.ByteSizeLong() + 128 <= HeaderRing::kMaxRecordBytes;
}

Status ShmEndpoint::PostThroughRing(PeerId peer, Route route, Message message, Deadline deadline) {
  Outbox& box = *route.box;
  proto::ShmRef* ref = message.header.mutable_shm();
  const bool has_payload = ref->frame_lengths_size() > 0;
  if (!has_payload) {
    ref->set_pid(getpid());
    ref->set_fd(box.fd());
    ref->set_segment_bytes(box.segment_bytes());
  }
  {
    // Every socket message of this thread to `peer` is counted by now (and
    // any other thread's that went on the wire before them).
    MutexLock lock(route.lane->mu);
    ref->set_socket_messages_before(route.lane->sent);
  }
  uint64_t bytes = 0;
  for (uint64_t l : ref->frame_lengths()) bytes += l;
  if (authenticator_ != nullptr) {
    // Last: the proof covers the whole header, the reference included.
    if (Status signed_ = authenticator_->Sign(peer, &message.header); !signed_.ok()) {
      if (has_payload) box.Unplace(ref->slot());
      return signed_;
    }
  }
  const std::string record = EncodeHeader(message.header);
  while (!box.PostHeader(record)) {
    if (deadline.Expired()) {
      if (has_payload) box.Unplace(ref->slot());
      return DeadlineExceeded("the shared-memory header ring to peer " + std::to_string(peer) + " stayed full");
    }
    Pause();
  }
  CountShm(&ShmStats::ring_messages_sent);
  own_.Sent(bytes);
  return Status::Ok();
}

EndpointStats ShmEndpoint::stats() const {
  EndpointStats s = inner_->stats();
  const EndpointStats own = own_.Get();
  s.messages_sent += own.messages_sent;
  s.messages_received += own.messages_received;
  s.messages_rejected += own.messages_rejected;
  s.messages_unauthenticated += own.messages_unauthenticated;
  // A header-ring record that failed its check was counted as received when it was read.
  s.messages_received -= std::min(s.messages_received, own.messages_unauthenticated);
  s.payload_bytes_sent += own.payload_bytes_sent;
  s.payload_bytes_received += own.payload_bytes_received;
  return s;
}

ShmEndpoint::ShmStats ShmEndpoint::shm_stats() const {
  MutexLock lock(mu_);
  return shm_stats_;
}

}  // namespace syncline
