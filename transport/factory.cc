#include "transport/factory.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <random>

#include "syncline/config.h"
#include "transport/multi_endpoint.h"
#include "transport/wire.h"
#include "transport/zmq/zmq_endpoint.h"
#if SYNCLINE_HAVE_UCX
#include "transport/ucx/ucx_endpoint.h"
#endif

namespace syncline {
namespace {

// The backend for an address scheme.
Result<std::unique_ptr<Endpoint>> CreateBackend(const std::string& scheme, const TransportOptions& options) {
  if (scheme == "tcp" || scheme == "ipc") {
    ZmqOptions zmq;
    zmq.curve = options.encrypt;
    zmq.curve_secret_key = options.curve_secret_key;
    if (options.max_frame_bytes > 0) zmq.max_message_bytes = options.max_frame_bytes;
    zmq.tcp_send_buffer_bytes = options.tcp_send_buffer_bytes;
    return CreateZmqEndpoint(zmq);
  }
  if (scheme == "ucx" && options.encrypt)
    return InvalidArgument("the UCX transport is not encrypted: a peer at a ucx:// address cannot be reached with "
                           "SYNCLINE_ENCRYPT=1");
  if (scheme == "ucx") {
#if SYNCLINE_HAVE_UCX
    UcxOptions ucx;
    if (options.max_frame_bytes > 0) ucx.max_message_bytes = options.max_frame_bytes;
    return CreateUcxEndpoint(ucx);
#else
    return Unavailable("this build of Syncline has no UCX transport (it was built without libucx-dev); "
                       "use SYNCLINE_TRANSPORT=tcp, or rebuild with UCX");
#endif
  }
  return InvalidArgument("unknown transport '" + scheme + "' (expected tcp, ipc or ucx)");
}

// ZeroMQ serves tcp:// and ipc:// alike.
std::string BackendKey(const std::string& scheme) { return scheme == "ipc" ? "tcp" : scheme; }

}  // namespace

Result<std::unique_ptr<Endpoint>> CreateEndpoint(const std::string& transport, const TransportOptions& options) {
  // Start the listening backend now, so a transport that cannot work here
  // (UCX without a usable device) fails at once with its reason.
  SYNCLINE_ASSIGN_OR_RETURN(std::unique_ptr<Endpoint> listening, CreateBackend(transport, options));
  auto make = [options](const std::string& scheme) { return CreateBackend(scheme, options); };
  return std::unique_ptr<Endpoint>(new MultiEndpoint(make, &BackendKey, std::move(listening), transport));
}

TransportOptions NodeTransportOptions(const Settings& settings) {
  TransportOptions options{settings.encrypt, ""};
  // The header frame, or one chunk's payload frame (+ UCX's framing of it).
  options.max_frame_bytes =
      static_cast<int64_t>(std::max<uint64_t>(kMaxHeaderBytes, settings.LargestChunkBytes()) + 4096);
  options.tcp_send_buffer_bytes = static_cast<int>(settings.tcp_send_buffer_bytes);
  return options;
}

Result<std::string> ListenAddress(const std::string& transport, const std::string& host, int port) {
  if (transport == "tcp") return "tcp://" + host + ":" + std::to_string(port);
  if (transport == "ucx") return "ucx://" + host + ":" + std::to_string(port);
  if (transport == "ipc") {
    static std::atomic<int> counter{0};
    std::random_device rd;
    return "ipc:///tmp/syncline-" + std::to_string(getpid()) + "-" + std::to_string(counter++) + "-" +
           std::to_string(rd() % 100000) + ".sock";
  }
  return InvalidArgument("unknown transport '" + transport + "' (expected tcp, ipc or ucx)");
}

}  // namespace syncline
