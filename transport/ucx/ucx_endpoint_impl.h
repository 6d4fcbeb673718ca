// Internals of the UCX backend, shared by ucx_endpoint.cc (the Endpoint
// calls and the progress thread) and ucx_receive.cc (Active Message receipt).
// Not a public header: include transport/ucx/ucx_endpoint.h instead.
#pragma once

#include <ucp/api/ucp.h>

#include <atomic>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "transport/ucx/ucx_context.h"
#include "transport/ucx/ucx_endpoint.h"
#include "transport/ucx/ucx_frame.h"
#include "transport/wire.h"

namespace syncline::ucx {

class UcxEndpoint;

// What senders know about one connected peer; shared with the progress thread.
struct PeerState {
  PeerId id = 0;
  std::string address;

 private:
  // Guarded by the owning endpoint's mu_. The analysis cannot name another
  // object's lock on a member, so they are reached only through UcxEndpoint's
  // accessors, which REQUIRE it.
  friend class UcxEndpoint;
  int outstanding = 0;  // queued or in flight
  bool failed = false;  // its connection broke
};

// One message on its way: everything UCX reads until it reports completion.
struct SendOp {
  UcxEndpoint* self = nullptr;
  std::shared_ptr<PeerState> peer;
  EncodedFrames frames;
  std::vector<Buffer> payloads;  // keep the caller's memory alive until UCX is done
  std::vector<ucp_dt_iov_t> iov;
};

// A received message waiting for its turn, or for its rendezvous data.
struct Inbox;
struct Pending {
  std::shared_ptr<Inbox> inbox;
  std::string am_header;
  Buffer data;
  enum State { kWaiting, kReady, kFailed } state = kWaiting;
};
// The messages of one incoming connection, delivered in the order they were sent.
struct Inbox {
  std::deque<std::shared_ptr<Pending>> queue;
};
// What a rendezvous receive's completion callback needs.
struct RecvOp {
  UcxEndpoint* self = nullptr;
  std::shared_ptr<Pending> pending;
};

// One UCP endpoint: outgoing (to a peer we Connect-ed) or incoming (accepted
// from our listener, used only to receive).
struct Connection {
  UcxEndpoint* self = nullptr;
  ucp_ep_h ep = nullptr;
  bool outgoing = false;
  std::shared_ptr<PeerState> peer;  // outgoing only
  std::string remote;               // for logs
  std::shared_ptr<Inbox> inbox = std::make_shared<Inbox>();
  // Outgoing connections hold sends back until UCX has finished setting them
  // up (a flush of the new endpoint completes): UCX 1.13 may abort when a
  // rendezvous send queued during setup is replayed on different transports.
  void* setup = nullptr;  // the flush request, while setup is under way (both directions)
  std::deque<std::unique_ptr<SendOp>> held;
  bool failed = false;
  bool closing = false;
};

// A ucp_worker_flush_nbx that a Flush caller waits for: finished (with UCX's
// status) by the progress thread, or by Shutdown if it is still under way.
struct WorkerFlush {
  void Finish(ucs_status_t st) EXCLUDES(mu) {
    {
      MutexLock lock(mu);
      done = true;
      status = st;
    }
    done_cv.NotifyAll();
  }
  Mutex mu;
  CondVar done_cv;
  bool done GUARDED_BY(mu) = false;
  ucs_status_t status GUARDED_BY(mu) = UCS_OK;
};

// Work handed to the progress thread, run in order.
struct Command {
  std::unique_ptr<SendOp> send;        // a message to post, or
  std::shared_ptr<PeerState> connect;  // a peer to connect to (at `address`), or
  SocketAddress address;
  std::function<void()> call;          // anything else (Listen)
};

// The Endpoint over UCX. Thread-safe: Listen, Connect, Send and stats may be
// called from any thread, including the Receiver. Every UCX call is made on
// the progress thread (the worker is single-threaded); callers hand it
// Commands through a queue and an eventfd. The Receiver runs on the progress
// thread. Messages to a peer whose connection broke are dropped (the break is
// logged once): heartbeats in the control plane decide what a dead peer means.
class UcxEndpoint : public Endpoint {
 public:
  UcxEndpoint(const UcxOptions& options, std::unique_ptr<Context> context);
  ~UcxEndpoint() override;
  Status Start();

  Result<std::string> Listen(const std::string& address, Receiver receiver) override;
  Status Connect(PeerId peer, const std::string& address) override;
  Status Send(PeerId peer, Message message, Deadline deadline) override;
  // Waits until UCX has completed every send queued before (none queued,
  // held or in flight), then until a worker flush completes: UCX has handed
  // the bytes to the transport, and remote side for what it acknowledges.
  Status Flush(Deadline deadline) override;
  void Close() override;
  EndpointStats stats() const override;

  // UCX callbacks (ucx_receive.cc and ucx_endpoint.cc); progress thread only.
  static ucs_status_t OnActiveMessage(void* arg, const void* header, size_t header_length, void* data,
                                      size_t length, const ucp_am_recv_param_t* param);
  static void OnReceived(void* request, ucs_status_t status, size_t length, void* user_data);
  static void OnSent(void* request, ucs_status_t status, void* user_data);
  static void OnConnectionRequest(ucp_conn_request_h request, void* arg);
  static void OnEndpointError(void* arg, ucp_ep_h ep, ucs_status_t status);

 private:
  bool OnProgressThread() const { return std::this_thread::get_id() == progress_id_.load(); }
  void Wake() EXCLUDES(mu_);
  void Run();
  void RunCommands();
  bool Progress();
  void Step(Clock::time_point until);
  void WaitForEvents(int timeout_ms);
  void FinishDeferred();
  void Shutdown();
  void StartWorkerFlush(const std::shared_ptr<WorkerFlush>& flush);
  void DoConnect(const std::shared_ptr<PeerState>& peer, const SocketAddress& address);
  void Accept(ucp_conn_request_h request);
  void PostSend(std::unique_ptr<SendOp> op);
  void Transmit(Connection* c, std::unique_ptr<SendOp> op);
  void WatchSetup(Connection* c);
  void CheckSetups();
  void Complete(SendOp* op, ucs_status_t status);
  void StartClose(Connection* c);
  void Retire(Connection* c);
  void ConnectionFailed(Connection* c, ucs_status_t status);
  ucp_err_handling_mode_t ErrorMode() const;
  int& OutstandingOf(PeerState& peer) REQUIRES(mu_) { return peer.outstanding; }
  bool& FailedOf(PeerState& peer) REQUIRES(mu_) { return peer.failed; }

  // Receipt (ucx_receive.cc).
  ucs_status_t Receive(const uint8_t* header, size_t header_length, void* data, size_t length,
                       const ucp_am_recv_param_t* param);
  // Delivers the messages at the head of `inbox` whose data has arrived.
  void DeliverReady(Inbox& inbox);
  void Deliver(const uint8_t* header, size_t header_length, const Buffer& data);
  void Reject(const Status& why);
  std::string_view Where() const;  // this endpoint in log lines (no copy: it runs per message)

  const UcxOptions options_;
  std::unique_ptr<Context> ucx_;  // reset by Close
  const size_t max_am_header_;
  int wake_fd_ = -1;  // set before the progress thread starts; closed (under mu_) after it ends
  BufferPool pool_;
  Receiver receiver_;  // set by Listen before the listener exists
  std::thread thread_;
  std::atomic<std::thread::id> progress_id_{};
  std::atomic<bool> stopping_{false};

  Mutex close_mu_;  // one Close at a time tears down
  Mutex mu_;
  CondVar space_cv_;  // a peer's outstanding count dropped
  bool closed_ GUARDED_BY(mu_) = false;
  bool listening_ GUARDED_BY(mu_) = false;
  std::map<PeerId, std::shared_ptr<PeerState>> peers_ GUARDED_BY(mu_);
  std::deque<Command> commands_ GUARDED_BY(mu_);

  EndpointCounters counters_;

  // Progress thread only (and Close, after the thread has ended).
  ucp_listener_h listener_ = nullptr;
  std::string address_;
  std::map<ucp_ep_h, std::unique_ptr<Connection>> connections_;
  std::map<PeerId, Connection*> outgoing_;
  std::vector<ucp_conn_request_h> conn_requests_;  // accepted after progress returns
  std::vector<Connection*> broken_;                // closed after progress returns
  std::vector<std::pair<void*, Connection*>> closing_;
  std::vector<std::pair<void*, std::shared_ptr<WorkerFlush>>> flushing_;  // worker flushes under way
  std::vector<Connection*> setting_up_;  // outgoing connections whose setup flush is pending
  std::set<SendOp*> in_flight_;
  std::set<RecvOp*> receiving_;
  std::shared_ptr<Inbox> stray_ = std::make_shared<Inbox>();  // messages from no known connection
  bool delivering_ = true;
};

}  // namespace syncline::ucx
