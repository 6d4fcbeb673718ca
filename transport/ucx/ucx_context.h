// The UCX pieces a UcxEndpoint stands on: one UCP context and one worker
// (opened with clear errors when UCX has no usable transport), and the
// ucx://host:port addresses it listens and connects on.
#pragma once

#include <sys/socket.h>
#include <ucp/api/ucp.h>

#include <memory>
#include <string>

#include "common/status.h"

namespace syncline::ucx {

// How the endpoint uses the transports UCX_TLS names (see ucx_context.cc).
struct TransportChoice {
  std::string tls;                     // what UCX is told to use
  bool added_tcp = false;              // tcp was added for connection setup
  bool peer_failure_handling = true;   // endpoints report dead peers (not possible over shared memory)
};
// `tls` is UCX_TLS as UCX read it ("" = all transports).
TransportChoice ChooseTransports(const std::string& tls);

// One UCP context (Active Messages + wakeup) and one single-threaded worker.
// Not thread-safe: after Open, only one thread at a time may use worker().
class Context {
 public:
  // Reads UCX's configuration (UCX_* environment) and opens the context and
  // worker. Fails with Unavailable, naming UCX_TLS and what to do, when UCX
  // has no transport that can carry messages (no RDMA device for rc/ud/dc).
  static Result<std::unique_ptr<Context>> Open();
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  ucp_worker_h worker() const { return worker_; }
  // Becomes readable when the worker has events (after ucp_worker_arm).
  int event_fd() const { return event_fd_; }
  // Largest AM header UCX accepts on this worker.
  size_t max_am_header() const { return max_am_header_; }
  // The transports UCX was asked for (UCX_TLS), for messages.
  const std::string& tls() const { return tls_; }
  // Whether endpoints may ask UCX for peer-failure handling (see TransportChoice).
  bool peer_failure_handling() const { return peer_failure_handling_; }

 private:
  Context() = default;
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  int event_fd_ = -1;
  size_t max_am_header_ = 0;
  std::string tls_;
  bool peer_failure_handling_ = true;
};

// A socket address as UCX takes it.
struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;
  ucs_sock_addr_t ucs() const { return {reinterpret_cast<const sockaddr*>(&storage), length}; }
};

// A parsed "ucx://host:port" (IPv6 hosts in brackets); port 0 = any.
struct UcxAddress {
  std::string host;
  int port = 0;
  SocketAddress resolved;
};
Result<UcxAddress> ParseAddress(const std::string& address);
std::string FormatAddress(const std::string& host, int port);
int PortOf(const sockaddr_storage& address);

// "Connection reset by remote peer (UCS_ERR_CONNECTION_RESET)".
std::string StatusText(ucs_status_t status);

}  // namespace syncline::ucx
