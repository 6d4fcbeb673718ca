// UcxEndpoint on the progress thread: creating, accepting and closing UCP
// endpoints, and posting sends on them.
#include <arpa/inet.h>
#include <netdb.h>

#include "common/logging.h"
#include "transport/ucx/ucx_endpoint_impl.h"

namespace syncline::ucx {
namespace {

std::string Describe(const sockaddr_storage& address) {
  char host[NI_MAXHOST] = "?", port[NI_MAXSERV] = "?";
  getnameinfo(reinterpret_cast<const sockaddr*>(&address), sizeof(address), host, sizeof(host), port, sizeof(port),
              NI_NUMERICHOST | NI_NUMERICSERV);
  return std::string(host) + ":" + port;
}

}  // namespace

void UcxEndpoint::DoConnect(const std::shared_ptr<PeerState>& peer, const SocketAddress& address) {
  if (auto it = outgoing_.find(peer->id); it != outgoing_.end()) {
    Connection* old = it->second;
    outgoing_.erase(it);
    StartClose(old);  // connecting an id again replaces its connection
  }
  auto c = std::make_unique<Connection>();
  c->self = this;
  c->outgoing = true;
  c->peer = peer;
  c->remote = peer->address;
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_SOCK_ADDR | UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER;
  params.sockaddr = address.ucs();
  params.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
  params.err_mode = ErrorMode();
  params.err_handler = {&UcxEndpoint::OnEndpointError, c.get()};
  if (ucs_status_t st = ucp_ep_create(ucx_->worker(), &params, &c->ep); st != UCS_OK) {
    SYNCLINE_LOG_WARN("cannot connect to peer {} at {}: {}; messages to it are dropped", peer->id, peer->address,
                      StatusText(st));
    MutexLock lock(mu_);
    FailedOf(*peer) = true;
    space_cv_.NotifyAll();
    return;
  }
  Connection* added = c.get();
  outgoing_[peer->id] = added;
  connections_[added->ep] = std::move(c);
  WatchSetup(added);
}

// Releases the sends held on connections whose setup has finished.
void UcxEndpoint::CheckSetups() {
  for (size_t i = 0; i < setting_up_.size();) {
    Connection* c = setting_up_[i];
    ucs_status_t st = ucp_request_check_status(c->setup);
    if (st == UCS_INPROGRESS) {
      ++i;
      continue;
    }
    ucp_request_free(c->setup);
    c->setup = nullptr;
    setting_up_.erase(setting_up_.begin() + static_cast<long>(i));
    if (st != UCS_OK) ConnectionFailed(c, st);
    std::deque<std::unique_ptr<SendOp>> held;
    held.swap(c->held);
    for (auto& op : held) Transmit(c, std::move(op));
  }
}

void UcxEndpoint::OnConnectionRequest(ucp_conn_request_h request, void* arg) {
  // Endpoints are created after ucp_worker_progress returns, not inside it.
  static_cast<UcxEndpoint*>(arg)->conn_requests_.push_back(request);
}

void UcxEndpoint::Accept(ucp_conn_request_h request) {
  auto c = std::make_unique<Connection>();
  c->self = this;
  ucp_conn_request_attr_t attr{};
  attr.field_mask = UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ADDR;
  c->remote = ucp_conn_request_query(request, &attr) == UCS_OK ? Describe(attr.client_address) : "?";
  ucp_ep_params_t params{};
  params.field_mask =
      UCP_EP_PARAM_FIELD_CONN_REQUEST | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
  params.conn_request = request;
  params.err_mode = ErrorMode();
  params.err_handler = {&UcxEndpoint::OnEndpointError, c.get()};
  if (ucs_status_t st = ucp_ep_create(ucx_->worker(), &params, &c->ep); st != UCS_OK) {
    SYNCLINE_LOG_WARN("{}: cannot accept a connection from {}: {}", address_, c->remote, StatusText(st));
    return;
  }
  SYNCLINE_LOG_DEBUG("{}: accepted a connection from {}", address_, c->remote);
  Connection* added = c.get();
  connections_[added->ep] = std::move(c);
  WatchSetup(added);
}

// Notes when UCX has finished setting `c` up: a flush of the endpoint completes
// then. Outgoing connections hold their sends until it does; Close waits for
// every connection's setup, since UCX 1.13 without peer-failure handling may
// abort when a peer disappears while it still sets a connection up.
void UcxEndpoint::WatchSetup(Connection* c) {
  ucp_request_param_t flush{};
  ucs_status_ptr_t setup = ucp_ep_flush_nbx(c->ep, &flush);
  if (UCS_PTR_IS_ERR(setup)) {
    ConnectionFailed(c, UCS_PTR_STATUS(setup));
  } else if (setup != nullptr) {
    c->setup = setup;
    setting_up_.push_back(c);
  }
}

void UcxEndpoint::OnEndpointError(void* arg, ucp_ep_h /*ep*/, ucs_status_t status) {
  auto* c = static_cast<Connection*>(arg);
  c->self->ConnectionFailed(c, status);
}

void UcxEndpoint::ConnectionFailed(Connection* c, ucs_status_t status) {
  if (c->failed || c->closing) return;
  c->failed = true;
  broken_.push_back(c);  // closed once ucp_worker_progress returns
  if (!c->outgoing) {
    SYNCLINE_LOG_DEBUG("{}: connection from {} ended: {}", address_, c->remote, StatusText(status));
    return;
  }
  int lost = 0;
  {
    MutexLock lock(mu_);
    auto it = outgoing_.find(c->peer->id);
    if (it == outgoing_.end() || it->second != c) return;  // an old, replaced connection
    FailedOf(*c->peer) = true;
    lost = OutstandingOf(*c->peer);
  }
  space_cv_.NotifyAll();
  if (stopping_.load()) return;
  std::string hint = status == UCS_ERR_UNREACHABLE ? " (is it listening, and can UCX_TLS=" + ucx_->tls() +
                                                         " reach it? tcp is needed between hosts without RDMA)"
                                                   : "";
  // A peer that shut down cleanly looks the same as one that died; only lost
  // messages make it worth a warning (heartbeats report dead peers).
  if (lost > 0) {
    SYNCLINE_LOG_WARN("connection to peer {} at {} failed: {}{}; {} queued messages and later ones are dropped",
                      c->peer->id, c->remote, StatusText(status), hint, lost);
  } else {
    SYNCLINE_LOG_DEBUG("connection to peer {} at {} ended: {}{}; later messages to it are dropped", c->peer->id,
                       c->remote, StatusText(status), hint);
  }
}

// Closes `c`: gracefully (letting sends finish) unless it failed, or it is an
// incoming connection with peer-failure handling, which may close at once.
void UcxEndpoint::StartClose(Connection* c) {
  if (c->closing) return;
  c->closing = true;
  const bool force = c->failed || (!c->outgoing && ucx_->peer_failure_handling());
  ucp_request_param_t params{};
  params.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  params.flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0;
  ucs_status_ptr_t request = ucp_ep_close_nbx(c->ep, &params);
  if (request == nullptr || UCS_PTR_IS_ERR(request)) {
    Retire(c);
  } else {
    closing_.emplace_back(request, c);
  }
}

void UcxEndpoint::Retire(Connection* c) {
  if (c->setup != nullptr) {
    std::erase(setting_up_, c);
    ucp_request_free(c->setup);  // released by UCX once it completes
    c->setup = nullptr;
  }
  for (auto& op : c->held) Complete(op.release(), UCS_ERR_CANCELED);
  c->held.clear();
  if (c->outgoing) {
    auto it = outgoing_.find(c->peer->id);
    if (it != outgoing_.end() && it->second == c) outgoing_.erase(it);
  }
  connections_.erase(c->ep);  // frees c; its inbox lives on while messages in it do
}

void UcxEndpoint::PostSend(std::unique_ptr<SendOp> op) {
  auto it = outgoing_.find(op->peer->id);
  if (it == outgoing_.end()) return Complete(op.release(), UCS_ERR_CANCELED);
  Connection* c = it->second;
  if (c->setup != nullptr) {
    c->held.push_back(std::move(op));
  } else {
    Transmit(c, std::move(op));
  }
}

void UcxEndpoint::Transmit(Connection* c, std::unique_ptr<SendOp> op) {
  if (c->failed || c->closing) return Complete(op.release(), UCS_ERR_CANCELED);
  const std::string& prefix = op->frames.data_prefix;
  for (const Buffer& b : op->payloads) {
    if (b.size() > 0) op->iov.push_back({const_cast<uint8_t*>(b.data()), b.size()});
  }
  if (!prefix.empty()) op->iov.insert(op->iov.begin(), ucp_dt_iov_t{const_cast<char*>(prefix.data()), prefix.size()});
  ucp_request_param_t params{};
  params.op_attr_mask =
      UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FIELD_DATATYPE;
  params.cb.send = &UcxEndpoint::OnSent;
  params.user_data = op.get();
  // REPLY tells the receiver which connection a message came on, so it can
  // keep each connection's messages in order.
  params.flags = UCP_AM_SEND_FLAG_REPLY;
  const void* buffer = nullptr;
  size_t count = 0;
  params.datatype = ucp_dt_make_contig(1);
  if (op->iov.size() == 1) {  // the common case: one contiguous payload, zero-copy for UCX
    buffer = op->iov[0].buffer;
    count = op->iov[0].length;
  } else if (op->iov.size() > 1) {
    params.datatype = ucp_dt_make_iov();
    buffer = op->iov.data();
    count = op->iov.size();
  }
  const std::string& header = op->frames.am_header;
  ucs_status_ptr_t request =
      ucp_am_send_nbx(c->ep, kAmId, header.data(), header.size(), buffer, count, &params);
  if (request == nullptr) return Complete(op.release(), UCS_OK);
  if (UCS_PTR_IS_ERR(request)) return Complete(op.release(), UCS_PTR_STATUS(request));
  in_flight_.insert(op.release());
}

void UcxEndpoint::OnSent(void* request, ucs_status_t status, void* user_data) {
  auto* op = static_cast<SendOp*>(user_data);
  ucp_request_free(request);
  op->self->in_flight_.erase(op);
  op->self->Complete(op, status);
}

void UcxEndpoint::Complete(SendOp* op, ucs_status_t status) {
  if (status != UCS_OK && status != UCS_ERR_CANCELED)
    SYNCLINE_LOG_DEBUG("send to peer {} failed: {}", op->peer->id, StatusText(status));
  {
    MutexLock lock(mu_);
    --OutstandingOf(*op->peer);
  }
  space_cv_.NotifyAll();
  delete op;  // releases the payloads' owners
}

}  // namespace syncline::ucx
