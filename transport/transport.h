// The transport interface: an Endpoint moves messages (a protobuf header plus
// raw payload frames) between the nodes of a job, and nothing else —
// membership, barriers and heartbeats belong to the control plane.
//
// Each node owns one Endpoint. It listens at one address and receives every
// message on its own I/O thread, which calls the Receiver. It sends to peers
// it has connected by id. Backends: zmq/ (tcp, ipc), ucx/ (RDMA, tcp, shared
// memory) and loopback/ (in-process, for tests); FaultyEndpoint wraps any of
// them to drop or corrupt traffic.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/buffer.h"
#include "common/deadline.h"
#include "common/status.h"
#include "syncline.pb.h"

namespace syncline {

using PeerId = int32_t;

struct Message {
  proto::Header header;
  std::vector<Buffer> payloads;  // sent as separate frames, never copied into the header
};

// Counters kept by every backend.
struct EndpointStats {
  uint64_t messages_sent = 0;
  uint64_t messages_received = 0;
  uint64_t messages_rejected = 0;  // malformed on receipt, dropped with a logged reason
  // Well-formed but not proven to come from the node it names (a job with a
  // token: control/authenticated_endpoint.h); also counted as rejected.
  uint64_t messages_unauthenticated = 0;
  uint64_t messages_malformed() const { return messages_rejected - messages_unauthenticated; }
  uint64_t payload_bytes_sent = 0;
  uint64_t payload_bytes_received = 0;
};

class Endpoint {
 public:
  // Called on the endpoint's I/O thread for every received message that
  // passed validation (see wire.h). Must not block for long.
  using Receiver = std::function<void(Message&&)>;

  virtual ~Endpoint() = default;

  // Binds `address` ("tcp://127.0.0.1:0" picks a free port) and starts the
  // I/O thread. Returns the concrete address peers should connect to. A port
  // in use is an Unavailable error that names it.
  virtual Result<std::string> Listen(const std::string& address, Receiver receiver) = 0;
  // Makes `peer` reachable at `address`; connecting an id again replaces it.
  virtual Status Connect(PeerId peer, const std::string& address) = 0;
  // Queues `message` for `peer`. Payload buffers are referenced, not copied;
  // they are released once the bytes are on their way. Fails if the peer is
  // unknown or the message cannot be queued before `deadline`.
  virtual Status Send(PeerId peer, Message message, Deadline deadline) = 0;
  // Returns OK once every message Send queued before this call has left this
  // node: a Close right after loses none of them (what "left" means for each
  // backend: docs/decisions.md, "Endpoint::Flush"). DeadlineExceeded, naming
  // the peers whose messages are still queued, if not by `deadline`; never
  // blocks past it. Messages sent while Flush runs may or may not be covered.
  // Not to be called from the Receiver (it may wait on the receiving thread).
  virtual Status Flush(Deadline deadline) = 0;
  // Stops the I/O thread: no Receiver call begins after Close returns.
  // Messages still queued may be dropped: Flush first to keep them.
  virtual void Close() = 0;
  virtual EndpointStats stats() const = 0;
};

}  // namespace syncline
