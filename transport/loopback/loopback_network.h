// LoopbackNetwork: an in-process network for tests. Endpoints made from one
// LoopbackNetwork reach each other at "loop://<name>" addresses; messages go
// through the same header encoding and validation as on a real socket, and a
// peer can be cut off (Isolate) to play a crashed process. No sockets, no
// globals: a test creates a network and hands it to every node it runs.
//
// Payloads travel as the sender's own Buffers (read-only on the receiving
// side); a Buffer without an owner is copied at Send, as every backend does.
// Each endpoint's inbox is bounded: a Send to a peer whose Receiver does not
// keep up waits for room until its deadline (docs/decisions.md).
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "transport/transport.h"

namespace syncline {

struct LoopbackOptions {
  // Messages an endpoint's inbox holds before Send waits (up to its deadline).
  size_t inbox_messages = 100000;
};

class LoopbackNetwork {
 public:
  LoopbackNetwork();
  ~LoopbackNetwork();
  std::unique_ptr<Endpoint> CreateEndpoint(const LoopbackOptions& options = {});

  // From now on, everything sent to or from `address` silently vanishes.
  void Isolate(const std::string& address);

  // Internal plumbing shared with LoopbackEndpoint.
  struct Inbox;
  struct Shared;

 private:
  std::shared_ptr<Shared> shared_;
};

}  // namespace syncline
