#include "transport/factory.h"

#include <unistd.h>

#include <atomic>
#include <random>

#include "transport/zmq/zmq_endpoint.h"

namespace syncline {

Result<std::unique_ptr<Endpoint>> CreateEndpoint(const std::string& transport) {
  if (transport == "tcp" || transport == "ipc") return CreateZmqEndpoint();
  return InvalidArgument("unknown transport '" + transport + "' (expected tcp or ipc)");
}

Result<std::string> ListenAddress(const std::string& transport, const std::string& host, int port) {
  if (transport == "tcp") return "tcp://" + host + ":" + std::to_string(port);
  if (transport == "ipc") {
    static std::atomic<int> counter{0};
    std::random_device rd;
    return "ipc:///tmp/syncline-" + std::to_string(getpid()) + "-" + std::to_string(counter++) + "-" +
           std::to_string(rd() % 100000) + ".sock";
  }
  return InvalidArgument("unknown transport '" + transport + "' (expected tcp or ipc)");
}

}  // namespace syncline
