// LoopbackNetwork: an in-process network for tests. Endpoints made from one
// LoopbackNetwork reach each other at "loop://<name>" addresses; messages go
// through the same header encoding and validation as on a real socket, and a
// peer can be cut off (Isolate) to play a crashed process. No sockets, no
// globals: a test creates a network and hands it to every node it runs.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "transport/transport.h"

namespace syncline {

class LoopbackNetwork {
 public:
  LoopbackNetwork();
  ~LoopbackNetwork();
  std::unique_ptr<Endpoint> CreateEndpoint();

  // From now on, everything sent to or from `address` silently vanishes.
  void Isolate(const std::string& address);

  // Internal plumbing shared with LoopbackEndpoint.
  struct Inbox;
  struct Shared;

 private:
  std::shared_ptr<Shared> shared_;
};

}  // namespace syncline
