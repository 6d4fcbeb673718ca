// HeaderAuthenticator: what a transport layer asks of the one that proves
// senders (control/key_ring.h) for messages it carries past the
// authenticating endpoint itself — today the whole messages a ShmEndpoint
// passes through a shared-memory header ring. The transport never sees keys:
// it asks for a header to be stamped, or checked, and acts on a message only
// once the check passed.
//
// Thread-safety: implementations are called from any thread.
#pragma once

#include "common/status.h"
#include "transport/transport.h"

namespace syncline {

class HeaderAuthenticator {
 public:
  virtual ~HeaderAuthenticator() = default;
  // Stamps `header`, addressed to `peer`, with the proof of its sender; the
  // proof covers every field set so far, so call it last.
  virtual Status Sign(PeerId peer, proto::Header* header) = 0;
  // OK if `header` proves it comes from the node it names and is not a
  // replay; else an error saying why it is refused. Clears the proof.
  virtual Status Check(proto::Header* header) = 0;
};

}  // namespace syncline
