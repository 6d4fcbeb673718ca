// ShmEndpoint: a forwarding wrapper that moves messages between colocated
// processes through shared memory, whatever transport carries the rest. To a
// peer marked colocated, a message's payload frames are copied into this
// process's outbox segment for that peer and the header says where they are;
// the receiving ShmEndpoint maps the segment once and hands the Receiver
// Buffers that point into it, releasing each region when the last Buffer
// drops.
//
// At first the headers go through the inner transport's socket. Once the
// receiver has mapped the segment it polls the segment's header ring
// (header_ring.h) on a thread of its own, and from then on the sender posts
// every message for that peer there: no socket, no I/O threads, one futex
// wake-up per message at most. Each ring message says how many messages went
// through the socket before it, and the receiver delivers it only after
// those, so the switch does not reorder a peer's messages (unless those
// socket messages are lost or take longer than 10 s, which is logged). When
// the outbox has no room for a payload, the message goes through the socket,
// after the peer has handled everything already in the ring: nothing is
// lost and nothing overtakes. A full ring makes Send wait until its deadline.
// The socket count is kept per peer under a lock held across the inner Send,
// so that it counts exactly the messages already on the wire: a ring message
// never overtakes an earlier message of its own thread (several threads may
// send to one peer at once; their messages interleave in some order).
//
// Trust: in a job with a token the ShmEndpoint sits outside the
// authenticating endpoint (control/authenticated_endpoint.h), so a socket
// message reaches it only once its sender is proven, and the proof covers its
// shared-memory reference. Whole messages through a header ring bypass that
// endpoint: they are signed and checked here, with the job's
// HeaderAuthenticator, before anything in them is acted on. A reference is
// honoured only from a sender marked colocated (the address book names it as
// sharing this machine and reading shared memory), for that sender's own
// process: no segment is mapped, no reader started and no slot released for
// anyone else. Until PeersComplete, a reference from a sender not marked yet
// (a peer that read its address book first) is held, with that sender's later
// messages behind it; after, it is refused.
//
// Thread-safety: as Endpoint; MarkColocated and PeersComplete may be called
// at any time. The Receiver is called from the inner transport's thread, from
// one poller thread per colocated sender, possibly at once, and once from
// PeersComplete's caller for the messages held until then.
#pragma once

#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "transport/header_authenticator.h"
#include "transport/shm/segment.h"
#include "transport/transport.h"
#include "transport/wire.h"

namespace syncline {

struct ShmOptions {
  // Payload bytes of one outbox (one per colocated peer this node sends to).
  // Memory is committed as it is first used.
  size_t outbox_bytes = size_t{256} << 20;
  // Until the receiver polls the ring, messages with fewer payload bytes go
  // through the socket whole, except the first one with a payload, which goes
  // through the segment so that the receiver maps it and attaches the ring.
  size_t min_bytes = 4096;
};

class ShmEndpoint : public Endpoint {
 public:
  // Messages, and bytes (headers and payloads), held until PeersComplete at most.
  static constexpr size_t kMaxHeldMessages = 4096;
  static constexpr uint64_t kMaxHeldBytes = uint64_t{256} << 20;

  // `authenticator`: signs and checks the header-ring messages (null in a
  // job without a token); it must outlive this endpoint.
  ShmEndpoint(std::unique_ptr<Endpoint> inner, ShmOptions options = {}, HeaderAuthenticator* authenticator = nullptr);
  ~ShmEndpoint() override;

  // `peer` (process `pid`) shares this machine: send it payloads through
  // shared memory, and accept its references to its own segments.
  void MarkColocated(PeerId peer, int32_t pid);
  // Every colocated peer is marked: messages held for an unmarked sender are
  // delivered (or refused, if it was not marked), and from now on a
  // reference from a sender not marked is refused at once.
  void PeersComplete() EXCLUDES(mu_);

  Result<std::string> Listen(const std::string& address, Receiver receiver) override;
  Status Connect(PeerId peer, const std::string& address) override { return inner_->Connect(peer, address); }
  Status Send(PeerId peer, Message message, Deadline deadline) override;
  // Waits until every colocated peer's poller has handled what this node
  // posted to its header ring (or the peer detached it), then flushes the
  // inner transport, which carries everything else.
  Status Flush(Deadline deadline) override;
  void Close() override;
  EndpointStats stats() const override;

  struct ShmStats {
    uint64_t messages_sent = 0;      // payloads placed in shared memory
    uint64_t messages_received = 0;
    uint64_t fallbacks = 0;          // outbox full or unavailable: sent through the socket
    uint64_t ring_messages_sent = 0;      // whole messages, header too, through a header ring
    uint64_t ring_messages_received = 0;
  };
  ShmStats shm_stats() const;

 private:
  // The messages sent to one peer through the inner transport, counted in
  // the order they went on the wire: `mu` is held across the inner Send and
  // the count (a ring message names the count it must wait for).
  struct SocketLane {
    Mutex mu;
    uint64_t sent GUARDED_BY(mu) = 0;
  };
  // What Send needs to know about a peer: its outbox (null: not colocated,
  // or no shared memory) and its socket lane (never null).
  struct Route {
    Outbox* box;
    SocketLane* lane;
  };
  Route RouteFor(PeerId peer) EXCLUDES(mu_);
  Status SendThroughSocket(PeerId peer, SocketLane& lane, Message message, Deadline deadline);
  // Posts `message` (its payload, if any, already placed in `box`) to the peer's ring.
  Status PostThroughRing(PeerId peer, Route route, Message message, Deadline deadline);
  static bool FitsTheRing(const Message& message);
  void OnSocketMessage(Message&& m);
  // Takes `m` into held_ if it must wait for PeersComplete; false if not.
  bool HoldUntilPeersComplete(Message& m) EXCLUDES(mu_);
  void DeliverFromSocket(Message&& m);
  void CountSocketMessage(PeerId sender) EXCLUDES(mu_);
  // The mapped segment a socket message's ShmRef names (opening it, and
  // starting its poller, the first time), after checking the sender's pid.
  Result<std::shared_ptr<PeerSegment>> SegmentFor(const Message& m) EXCLUDES(mu_);
  // Replaces m's ShmRef by payload Buffers that point into `segment`.
  Status AttachPayloads(Message& m, const std::shared_ptr<PeerSegment>& segment);
  // The poller thread of one sender's header ring.
  void Poll(std::shared_ptr<PeerSegment> segment, PeerId sender, int32_t pid);
  void HandleRingRecord(const std::string& record, const std::shared_ptr<PeerSegment>& segment, PeerId sender,
                        int32_t pid, const std::string& where);
  void AwaitSocketMessages(PeerId sender, uint64_t count) EXCLUDES(mu_);
  void Reject(const std::string& why);
  void CountShm(uint64_t ShmStats::*counter) EXCLUDES(mu_);

  std::unique_ptr<Endpoint> inner_;
  const ShmOptions options_;
  HeaderAuthenticator* const authenticator_;
  Receiver receiver_;
  mutable Mutex mu_;
  std::map<PeerId, int32_t> colocated_ GUARDED_BY(mu_);  // peer -> pid
  std::map<PeerId, std::unique_ptr<Outbox>> outboxes_ GUARDED_BY(mu_);
  std::map<PeerId, std::unique_ptr<SocketLane>> lanes_ GUARDED_BY(mu_);  // never erased: Send holds pointers
  std::map<std::pair<int32_t, int32_t>, std::shared_ptr<PeerSegment>> mapped_ GUARDED_BY(mu_);
  ShmStats shm_stats_ GUARDED_BY(mu_);
  std::map<PeerId, uint64_t> socket_received_ GUARDED_BY(mu_);  // delivered from the inner transport
  CondVar socket_received_cv_;
  std::map<PeerId, uint64_t> order_passed_ GUARDED_BY(mu_);  // socket counts already waited for
  std::vector<std::thread> pollers_ GUARDED_BY(mu_);
  bool peers_complete_ GUARDED_BY(mu_) = false;
  std::deque<Message> held_ GUARDED_BY(mu_);               // in arrival order
  std::set<PeerId> held_senders_ GUARDED_BY(mu_);  // senders with a message held, until PeersComplete
  uint64_t held_bytes_ GUARDED_BY(mu_) = 0;
  std::set<PeerId> no_outbox_ GUARDED_BY(mu_);  // colocated, but this side could not make an outbox: socket only
  std::atomic<bool> closed_{false};
  // What the inner transport does not count: messages through the header
  // rings, payload bytes in segments whose header went through the socket,
  // and shared-memory messages this endpoint rejected.
  EndpointCounters own_;
};

}  // namespace syncline
