// Picks the Endpoint backend and listen address for a transport setting
// ("tcp" or "ipc": ZeroMQ; "ucx": UCX, when this build has it), so nodes need
// not know the backends.
#pragma once

#include <memory>
#include <string>

#include "common/settings.h"
#include "transport/transport.h"

namespace syncline {

// Encryption of a node's traffic (Settings::encrypt), what it accepts before
// knowing who sent it, and how much its TCP connections keep in flight.
struct TransportOptions {
  bool encrypt = false;
  // 32 raw bytes: the CURVE secret key to listen with (the scheduler's,
  // derived from the job token); empty: a random one.
  std::string curve_secret_key;
  // A received frame (header or payload) larger than this is refused by the
  // backend before it is buffered (ZeroMQ drops the connection; UCX refuses
  // the message before allocating). 0: the backends' own limit (16 GiB).
  int64_t max_frame_bytes = 0;
  // The kernel's send buffer of each tcp:// connection to another machine
  // (Settings::tcp_send_buffer_bytes); 0: the kernel sizes it.
  int tcp_send_buffer_bytes = 0;
};

// An endpoint that listens with `transport`'s backend (started at once, so a
// transport that cannot work here fails now) and can connect to addresses of
// every backend this build has (see MultiEndpoint). With `options.encrypt`
// only the ZeroMQ backends (tcp, ipc) are available, encrypted with CURVE.
Result<std::unique_ptr<Endpoint>> CreateEndpoint(const std::string& transport, const TransportOptions& options = {});
// A server's or worker's: its encryption, frames no larger than a header or
// the largest chunk of its job (Settings::LargestChunkBytes), so that nothing
// larger is buffered before its sender is proven, and its TCP send buffers.
TransportOptions NodeTransportOptions(const Settings& settings);
// The address to Connect to for an encrypted ZeroMQ endpoint at `address`
// whose CURVE public key (32 raw bytes) is `public_key`.
std::string WithCurveKey(const std::string& address, const std::string& public_key);
// Where a node using `transport` should listen: "tcp://host:port" or
// "ucx://host:port" (port 0 = any), or a fresh ipc:// path unique to this process.
Result<std::string> ListenAddress(const std::string& transport, const std::string& host, int port);

}  // namespace syncline
