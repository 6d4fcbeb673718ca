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
//
// Thread-safety: as Endpoint; MarkColocated may be called at any time. The
// Receiver is called from the inner transport's thread and from one poller
// thread per colocated sender, possibly at once.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "transport/shm/segment.h"
#include "transport/transport.h"

namespace syncline {

struct ShmOptions {
  // Payload bytes of one outbox (one per colocated peer this node sends to).
  // Memory is committed as it is first used.
  size_t outbox_bytes = size_t{256} << 20;
  // Messages with fewer payload bytes go through the socket.
  size_t min_bytes = 4096;
};

class ShmEndpoint : public Endpoint {
 public:
  ShmEndpoint(std::unique_ptr<Endpoint> inner, ShmOptions options = {});
  ~ShmEndpoint() override;

  // `peer` (process `pid`) shares this machine: send it payloads through
  // shared memory. (Shared-memory messages are accepted from any sender
  // whose segment opens; a marked sender must name its own pid.)
  void MarkColocated(PeerId peer, int32_t pid);

  Result<std::string> Listen(const std::string& address, Receiver receiver) override;
  Status Connect(PeerId peer, const std::string& address) override { return inner_->Connect(peer, address); }
  Status Send(PeerId peer, Message message, Deadline deadline) override;
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
  Status SendThroughSocket(PeerId peer, Message message, Deadline deadline);
  // Posts `message` (its payload, if any, already placed in `box`) to the peer's ring.
  Status PostThroughRing(PeerId peer, Outbox& box, Message message, Deadline deadline);
  static bool FitsTheRing(const Message& message);
  void OnSocketMessage(Message&& m);
  void DeliverFromSocket(Message&& m);
  // The mapped segment a socket message's ShmRef names (opening it, and
  // starting its poller, the first time), after checking the sender's pid.
  Result<std::shared_ptr<PeerSegment>> SegmentFor(const Message& m);
  // Replaces m's ShmRef by payload Buffers that point into `segment`.
  Status AttachPayloads(Message& m, const std::shared_ptr<PeerSegment>& segment);
  // The poller thread of one sender's header ring.
  void Poll(std::shared_ptr<PeerSegment> segment, PeerId sender, int32_t pid);
  void HandleRingRecord(const std::string& record, const std::shared_ptr<PeerSegment>& segment, PeerId sender,
                        int32_t pid, const std::string& where);
  void AwaitSocketMessages(PeerId sender, uint64_t count);
  void Reject(const std::string& why);
  Outbox* OutboxFor(PeerId peer);

  std::unique_ptr<Endpoint> inner_;
  const ShmOptions options_;
  Receiver receiver_;
  mutable std::mutex mu_;
  std::map<PeerId, int32_t> colocated_;                              // GUARDED_BY(mu_): peer -> pid
  std::map<PeerId, std::unique_ptr<Outbox>> outboxes_;               // GUARDED_BY(mu_)
  std::map<std::pair<int32_t, int32_t>, std::shared_ptr<PeerSegment>> mapped_;  // GUARDED_BY(mu_)
  ShmStats shm_stats_;                                               // GUARDED_BY(mu_)
  uint64_t rejected_ = 0;                                            // GUARDED_BY(mu_)
  std::map<PeerId, uint64_t> socket_sent_;      // GUARDED_BY(mu_): messages through the inner transport
  std::map<PeerId, uint64_t> socket_received_;  // GUARDED_BY(mu_): delivered from the inner transport
  std::condition_variable socket_received_cv_;
  std::map<PeerId, uint64_t> order_passed_;     // GUARDED_BY(mu_): socket counts already waited for
  std::vector<std::thread> pollers_;            // GUARDED_BY(mu_)
  std::atomic<bool> closed_{false};
  mutable std::mutex ring_stats_mu_;
  EndpointStats ring_stats_;  // GUARDED_BY(ring_stats_mu_): traffic through the header rings
};

}  // namespace syncline
