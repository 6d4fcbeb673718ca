#include "transport/ucx/ucx_endpoint.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <future>

#include "common/logging.h"
#include "transport/ucx/ucx_endpoint_impl.h"
#include "transport/wire.h"

namespace syncline {
namespace ucx {
namespace {
// Progress calls that find nothing before the thread sleeps on the event fd.
constexpr int kSpinsBeforeSleep = 8;
// Most ucp_worker_progress calls in a row before queued commands run again.
constexpr int kProgressBatch = 64;
// Longest sleep: a safety net should a transport miss a wakeup.
constexpr int kMaxSleepMs = 100;
// How long Listen waits for the progress thread to create the listener.
constexpr auto kListenWait = std::chrono::seconds(10);
}  // namespace

UcxEndpoint::UcxEndpoint(const UcxOptions& options, std::unique_ptr<Context> context)
    : options_(options),
      ucx_(std::move(context)),
      max_am_header_(ucx_->max_am_header()),
      pool_(options.receive_pool_idle_bytes) {}

UcxEndpoint::~UcxEndpoint() { Close(); }

Status UcxEndpoint::Start() {
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) return Internal(std::string("eventfd failed: ") + strerror(errno));
  ucp_am_handler_param_t handler{};
  handler.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                       UCP_AM_HANDLER_PARAM_FIELD_ARG | UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
  handler.id = kAmId;
  handler.cb = &UcxEndpoint::OnActiveMessage;
  handler.arg = this;
  handler.flags = UCP_AM_FLAG_WHOLE_MSG;
  if (ucs_status_t st = ucp_worker_set_am_recv_handler(ucx_->worker(), &handler); st != UCS_OK)
    return Unavailable("UCX cannot receive active messages: " + StatusText(st));
  thread_ = std::thread([this] { Run(); });
  return Status::Ok();
}

ucp_err_handling_mode_t UcxEndpoint::ErrorMode() const {
  return ucx_->peer_failure_handling() ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE;
}

Result<std::string> UcxEndpoint::Listen(const std::string& address, Receiver receiver) {
  SYNCLINE_ASSIGN_OR_RETURN(UcxAddress where, ParseAddress(address));
  {
    MutexLock lock(mu_);
    if (closed_) return Aborted("endpoint closed");
    if (listening_) return FailedPrecondition("endpoint already listens at " + address_);
    listening_ = true;
  }
  receiver_ = std::move(receiver);
  auto result = std::make_shared<std::promise<Result<std::string>>>();
  auto create = [this, where, address, result] {
    ucp_listener_params_t params{};
    params.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
    params.sockaddr = where.resolved.ucs();
    params.conn_handler = {&UcxEndpoint::OnConnectionRequest, this};
    ucs_status_t st = ucp_listener_create(ucx_->worker(), &params, &listener_);
    if (st != UCS_OK) {
      listener_ = nullptr;
      result->set_value(st == UCS_ERR_BUSY ? Unavailable("address " + address + " is already in use")
                                           : Unavailable("cannot listen on " + address + ": " + StatusText(st)));
      return;
    }
    ucp_listener_attr_t attr{};
    attr.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
    int port = where.port;
    if (ucp_listener_query(listener_, &attr) == UCS_OK) port = PortOf(attr.sockaddr);
    address_ = FormatAddress(where.host, port);
    result->set_value(address_);
  };
  auto done = result->get_future();
  if (OnProgressThread()) {
    create();
  } else {
    Command c;
    c.call = create;
    {
      MutexLock lock(mu_);
      if (closed_) return Aborted("endpoint closed");
      commands_.push_back(std::move(c));
    }
    Wake();
    if (done.wait_for(kListenWait) != std::future_status::ready)
      return Internal("the UCX progress thread did not create the listener on " + address);
  }
  Result<std::string> out = done.get();
  if (!out.ok()) {
    MutexLock lock(mu_);
    listening_ = false;
  }
  return out;
}

Status UcxEndpoint::Connect(PeerId peer, const std::string& address) {
  SYNCLINE_ASSIGN_OR_RETURN(UcxAddress where, ParseAddress(address));
  auto state = std::make_shared<PeerState>();
  state->id = peer;
  state->address = address;
  bool was_empty;
  {
    MutexLock lock(mu_);
    if (closed_) return Aborted("endpoint closed");
    peers_[peer] = state;
    was_empty = commands_.empty();
    Command c;
    c.connect = state;
    c.address = where.resolved;
    commands_.push_back(std::move(c));
  }
  if (was_empty && !OnProgressThread()) Wake();
  return Status::Ok();
}

Status UcxEndpoint::Send(PeerId peer, Message message, Deadline deadline) {
  auto op = std::make_unique<SendOp>();
  op->self = this;
  std::vector<size_t> sizes;
  sizes.reserve(message.payloads.size());
  uint64_t bytes = 0;
  for (Buffer& b : message.payloads) {
    // Memory without an owner is the caller's to reuse once Send returns: copy it.
    if (!b.owner() && b.size() > 0) b = Buffer::Copy(b.data(), b.size());
    sizes.push_back(b.size());
    bytes += b.size();
  }
  op->frames = EncodeFrames(EncodeHeader(message.header), sizes, max_am_header_);
  op->payloads = std::move(message.payloads);

  bool was_empty;
  {
    MutexLock lock(mu_);
    if (closed_) return Aborted("endpoint closed");
    auto it = peers_.find(peer);
    if (it == peers_.end()) return NotFound("no connection to peer " + std::to_string(peer));
    std::shared_ptr<PeerState> state = it->second;
    auto has_room = [&]() REQUIRES(mu_) {
      return closed_ || FailedOf(*state) || OutstandingOf(*state) < options_.send_queue_messages;
    };
    if (!has_room()) {
      // The progress thread cannot wait for itself to drain the queue.
      if (OnProgressThread() || !space_cv_.WaitUntil(mu_, deadline, has_room))
        return DeadlineExceeded("send queue to peer " + std::to_string(peer) + " (" + state->address + ") is full");
      if (closed_) return Aborted("endpoint closed");
    }
    if (FailedOf(*state)) return Status::Ok();  // dropped: the break was logged when it happened
    ++OutstandingOf(*state);
    op->peer = std::move(state);
    was_empty = commands_.empty();
    Command c;
    c.send = std::move(op);
    commands_.push_back(std::move(c));
  }
  if (was_empty && !OnProgressThread()) Wake();
  counters_.Sent(bytes);
  return Status::Ok();
}

void UcxEndpoint::Close() {
  bool first = false;
  {
    MutexLock lock(mu_);
    first = !closed_;
    closed_ = true;
  }
  if (first) {
    space_cv_.NotifyAll();
    stopping_ = true;
    Wake();
  }
  if (OnProgressThread()) return;  // the thread winds down after the Receiver returns
  MutexLock closing(close_mu_);
  if (thread_.joinable()) thread_.join();
  if (!ucx_) return;
  ucx_.reset();  // destroys the worker and context: no UCX callback runs after this
  connections_.clear();
  outgoing_.clear();
  for (SendOp* op : in_flight_) delete op;
  in_flight_.clear();
  for (RecvOp* op : receiving_) delete op;
  receiving_.clear();
  {
    // Under mu_: a Send that queued just before Close may still be about to Wake.
    MutexLock lock(mu_);
    commands_.clear();
    if (wake_fd_ >= 0) close(wake_fd_);
    wake_fd_ = -1;
  }
}

EndpointStats UcxEndpoint::stats() const { return counters_.Get(); }

void UcxEndpoint::Wake() {
  // Callers wake after queueing, outside mu_, so Close may have torn down in
  // between: the descriptor is read under mu_, as Close closes it, or a late
  // wake would write to a closed (or by then reused) descriptor.
  MutexLock lock(mu_);
  if (wake_fd_ < 0) return;
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
}

void UcxEndpoint::Run() {
  progress_id_ = std::this_thread::get_id();
  int idle = 0;
  while (!stopping_.load()) {
    RunCommands();
    const bool busy = Progress();
    FinishDeferred();
    if (busy) {
      idle = 0;
    } else if (++idle >= kSpinsBeforeSleep) {
      idle = 0;
      WaitForEvents(kMaxSleepMs);
    }
  }
  Shutdown();
}

void UcxEndpoint::RunCommands() {
  std::deque<Command> batch;
  {
    MutexLock lock(mu_);
    batch.swap(commands_);
  }
  for (Command& c : batch) {
    if (c.send) {
      PostSend(std::move(c.send));
    } else if (c.connect) {
      DoConnect(c.connect, c.address);
    } else if (c.call) {
      c.call();
    }
  }
}

// Lets UCX make progress; true if anything happened. Bounded, so that queued
// sends are posted between batches of arriving messages.
bool UcxEndpoint::Progress() {
  bool busy = false;
  for (int i = 0; i < kProgressBatch && ucp_worker_progress(ucx_->worker()) != 0; ++i) busy = true;
  return busy;
}

// Progress once, or sleep until there is something to do (at most until `until`).
void UcxEndpoint::Step(Clock::time_point until) {
  const bool busy = Progress();
  FinishDeferred();
  if (busy) return;
  const auto left = std::chrono::duration_cast<Millis>(until - Clock::now()).count();
  WaitForEvents(static_cast<int>(std::clamp<long long>(left, 0, 10)));
}

void UcxEndpoint::WaitForEvents(int timeout_ms) {
  if (ucp_worker_arm(ucx_->worker()) == UCS_ERR_BUSY) return;  // events are already waiting
  pollfd fds[2] = {{ucx_->event_fd(), POLLIN, 0}, {wake_fd_, POLLIN, 0}};
  if (poll(fds, 2, timeout_ms) > 0 && (fds[1].revents & POLLIN)) {
    uint64_t count;
    (void)!read(wake_fd_, &count, sizeof(count));
  }
}

// Work UCX callbacks asked for but may not do themselves.
void UcxEndpoint::FinishDeferred() {
  if (!setting_up_.empty()) CheckSetups();
  if (!conn_requests_.empty()) {
    std::vector<ucp_conn_request_h> requests;
    requests.swap(conn_requests_);
    for (ucp_conn_request_h r : requests) {
      if (stopping_.load()) {
        ucp_listener_reject(listener_, r);
      } else {
        Accept(r);
      }
    }
  }
  if (!broken_.empty()) {
    std::vector<Connection*> broken;
    broken.swap(broken_);
    for (Connection* c : broken) StartClose(c);
  }
  for (size_t i = 0; i < flushing_.size();) {
    auto [request, flush] = flushing_[i];
    const ucs_status_t st = ucp_request_check_status(request);
    if (st == UCS_INPROGRESS) {
      ++i;
      continue;
    }
    ucp_request_free(request);
    flushing_.erase(flushing_.begin() + static_cast<long>(i));
    flush->Finish(st);
  }
  for (size_t i = 0; i < closing_.size();) {
    auto [request, c] = closing_[i];
    if (ucp_request_check_status(request) == UCS_INPROGRESS) {
      ++i;
      continue;
    }
    ucp_request_free(request);
    closing_.erase(closing_.begin() + static_cast<long>(i));
    Retire(c);
  }
}

// Lets queued messages leave and connections close, within close_timeout_ms.
void UcxEndpoint::Shutdown() {
  delivering_ = false;  // Close promises no Receiver call after it returns
  RunCommands();
  const auto until = Clock::now() + Millis(options_.close_timeout_ms);
  // Rendezvous receives under way too: with UCX_TLS=sm, destroying the
  // worker while one still waits on its CMA endpoint aborts inside UCX 1.13
  // (uct_cma_ep_t_delete: arbiter group not empty).
  while ((!in_flight_.empty() || !setting_up_.empty() || !receiving_.empty() || !flushing_.empty()) &&
         Clock::now() < until)
    Step(until);
  for (auto& [request, flush] : flushing_) {
    ucp_request_free(request);
    flush->Finish(UCS_ERR_CANCELED);
  }
  flushing_.clear();
  // Without peer-failure handling UCX names endpoints by address: a peer still
  // finishing its side of a connection would reach one closed here while this
  // worker lives on (UCX 1.13 asserts, or uses freed memory). Destroying the
  // worker with them is safe; peers see the connection manager's disconnect.
  if (ucx_->peer_failure_handling()) {
    std::vector<Connection*> open;
    for (auto& [ep, c] : connections_) open.push_back(c.get());
    for (Connection* c : open) StartClose(c);
  }
  while (!closing_.empty() && Clock::now() < until) Step(until);
  for (auto& [request, c] : closing_) ucp_request_free(request);
  closing_.clear();
  if (listener_ != nullptr) ucp_listener_destroy(listener_);
  listener_ = nullptr;
}

}  // namespace ucx

Result<std::unique_ptr<Endpoint>> CreateUcxEndpoint(const UcxOptions& options) {
  SYNCLINE_ASSIGN_OR_RETURN(std::unique_ptr<ucx::Context> context, ucx::Context::Open());
  auto endpoint = std::make_unique<ucx::UcxEndpoint>(options, std::move(context));
  SYNCLINE_RETURN_IF_ERROR(endpoint->Start());
  return std::unique_ptr<Endpoint>(std::move(endpoint));
}

}  // namespace syncline
