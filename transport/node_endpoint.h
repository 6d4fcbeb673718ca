// The endpoint of a server or worker, as both roles build it: the transport
// the settings name (transport/factory.h), wrapped in a ShmEndpoint when
// shared memory is on, whose colocated peers (same machine, from the address
// book) then exchange messages through shared memory. Roles include this
// header, not the shm/ internals.
#pragma once

#include <memory>
#include <vector>

#include "common/host_identity.h"
#include "common/settings.h"
#include "transport/shm/shm_endpoint.h"

namespace syncline {

// `*shm` is set to the wrapper (or null when shared memory is off).
// `authenticator` signs and checks its header-ring messages (null in a job
// without a token; see ShmEndpoint on why it wraps the authenticating layer).
inline std::unique_ptr<Endpoint> WrapForSharedMemory(const Settings& settings, std::unique_ptr<Endpoint> inner,
                                                     HeaderAuthenticator* authenticator, ShmEndpoint** shm) {
  *shm = nullptr;
  if (!settings.shm) return inner;
  ShmOptions options;
  options.outbox_bytes = settings.shm_bytes;
  auto wrapped = std::make_unique<ShmEndpoint>(std::move(inner), options, authenticator);
  *shm = wrapped.get();
  return wrapped;
}

// Marks colocated every peer in `peers` (the address book's) on this machine
// (same host identity) that registered as reading shared memory, then tells
// `shm` the list is complete: only these peers' references are honoured. One
// running without shared memory (shm off in its settings, or an endpoint
// that is not a ShmEndpoint) would drop the references as forged, and the
// sender would wait out its request timeout.
inline void MarkColocatedPeers(ShmEndpoint* shm, const std::vector<proto::NodeInfo>& peers) {
  if (shm == nullptr) return;
  const std::string me = HostIdentity();
  if (!me.empty())
    for (const auto& p : peers)
      if (p.host_id() == me && p.shm()) shm->MarkColocated(p.id(), p.pid());
  shm->PeersComplete();
}

}  // namespace syncline
