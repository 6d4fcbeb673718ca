// ShmEndpoint: a forwarding wrapper that moves the payloads of messages
// between colocated processes through shared memory, whatever transport
// carries the headers. To a peer marked colocated, a message's payload frames
// are copied into this process's outbox segment for that peer and the header
// (sent as usual) says where they are; the receiving ShmEndpoint maps the
// segment once and hands the Receiver Buffers that point into it, releasing
// each region when the last Buffer drops. When an outbox is full, or for
// peers not marked colocated, messages go through the inner transport as is.
//
// Thread-safety: as Endpoint; MarkColocated may be called at any time.
#pragma once

#include <map>
#include <memory>
#include <mutex>

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
  void Close() override { inner_->Close(); }
  EndpointStats stats() const override;

  struct ShmStats {
    uint64_t messages_sent = 0;      // payloads placed in shared memory
    uint64_t messages_received = 0;
    uint64_t fallbacks = 0;          // outbox full or unavailable: sent through the socket
  };
  ShmStats shm_stats() const;

 private:
  void OnMessage(Message&& m);
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
};

}  // namespace syncline
