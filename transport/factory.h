// Picks the Endpoint backend and listen address for a transport setting
// ("tcp" or "ipc": ZeroMQ; "ucx": UCX, when this build has it), so nodes need
// not know the backends.
#pragma once

#include <memory>
#include <string>

#include "transport/transport.h"

namespace syncline {

// An endpoint that listens with `transport`'s backend (started at once, so a
// transport that cannot work here fails now) and can connect to addresses of
// every backend this build has (see MultiEndpoint).
Result<std::unique_ptr<Endpoint>> CreateEndpoint(const std::string& transport);
// Where a node using `transport` should listen: "tcp://host:port" or
// "ucx://host:port" (port 0 = any), or a fresh ipc:// path unique to this process.
Result<std::string> ListenAddress(const std::string& transport, const std::string& host, int port);

}  // namespace syncline
