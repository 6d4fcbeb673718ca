// SchedulerClient: a server's or worker's side of the control plane. It
// registers the node, receives the address book, sends heartbeats and notices
// a silent scheduler, runs barriers and tensor declarations, and turns an
// abort (from the scheduler, or its own) into a Status every wait returns.
// It is its own component (control/), apart from the scheduler role, so that
// servers and workers depend on it and not on the scheduler's internals.
//
// Thread-safety: all methods may be called from any thread; the node feeds
// control messages from its endpoint's I/O thread through Handle().
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "common/settings.h"
#include "control/key_ring.h"
#include "transport/transport.h"

namespace syncline {

constexpr PeerId kSchedulerPeer = 0;

class SchedulerClient {
 public:
  // `scheduler_address`: where the scheduler listens (settings' by default).
  // `keys`: the key ring of `endpoint` (an AuthenticatedEndpoint) in a job
  // with a token, where the client proves the token when it registers and
  // installs the peers' keys from the address book; null without a token.
  SchedulerClient(const Settings& settings, Role role, Endpoint* endpoint, std::string scheduler_address = "",
                  KeyRing* keys = nullptr);
  ~SchedulerClient();

  // Registers this node, listening at `my_address`, and waits (up to the
  // startup timeout) for the address book. Starts heartbeats. `shm`: the
  // node's endpoint reads payloads placed in shared memory (a ShmEndpoint);
  // only then do colocated peers send it such references.
  Status Join(const std::string& my_address, bool shm = false);
  // Takes a control message addressed to this client; false if `m` is not one.
  bool Handle(const Message& m);

  int32_t my_id() const { return my_id_; }
  int32_t my_rank() const { return my_rank_; }
  // Nodes of `role` from the address book, ordered by rank (valid after Join).
  std::vector<proto::NodeInfo> NodesOf(proto::Role role) const;
  // "worker 2 (node 5 at tcp://...)" for a node id in the address book.
  std::string Describe(int32_t id) const;

  // Waits until every node of `group` (ROLE_UNKNOWN: all) reached this barrier.
  Status Barrier(proto::Role group, Deadline deadline);
  // Declares a tensor; returns its id and chunk placement once every worker
  // declared it identically. A mismatch aborts the job with a reason naming it.
  Result<proto::DeclareReply> Declare(const proto::TensorSpec& spec, Deadline deadline);
  // Tells the scheduler this node is done (workers: after their last op).
  Status Finish();
  // Waits for the scheduler's SHUTDOWN (servers) or an abort.
  Status WaitForShutdown(Deadline deadline);
  // Aborts the job: tells the scheduler, and fails every wait here.
  // `culprit`: the node at fault, if known; `key`: the key the reason is
  // about, which the scheduler turns into its tensor's name.
  void Abort(const std::string& reason, int32_t culprit = -1, std::optional<uint64_t> key = std::nullopt);

  // OK, or Aborted with the reason once the job was aborted.
  Status health() const;
  // Called once, from whichever thread notices, when the job aborts.
  void SetAbortHandler(std::function<void(const Status&)> handler);
  // Servers: called with a worker's rank when the scheduler says that worker
  // finished (it will push nothing more), on the thread that received it.
  void SetWorkerFinishedHandler(std::function<void(int rank)> handler);
  // Servers: called when the scheduler says a worker waits at a barrier, or
  // that a barrier was released (rank -1, waiting false).
  void SetWorkerAtBarrierHandler(std::function<void(const proto::WorkerAtBarrier&)> handler);
  // Servers: called with the chunks of a newly declared tensor this server
  // owns, before the workers learn the tensor is declared (the client
  // acknowledges it to the scheduler once the handler returns).
  void SetPlacementHandler(std::function<void(const proto::DeclareReply&)> handler);

 private:
  // Join's wait for the address book, saying meanwhile (and in its error)
  // whether the scheduler's address accepts connections.
  Status WaitForJobStart();
  void HeartbeatLoop();
  void MarkAborted(const std::string& reason) EXCLUDES(mu_);
  // Installs the peer keys sealed in the address book; false if they cannot be opened.
  bool InstallPeerKeys(const proto::AddressBook& book);
  Status Send(Message m);
  // Waits on cv_ until `ready` (a lambda annotated REQUIRES(mu_)) or abort
  // or deadline.
  Status WaitLocked(Deadline deadline, const std::string& what, const std::function<bool()>& ready) REQUIRES(mu_);

  const Settings settings_;
  const Role role_;
  const std::string scheduler_address_;
  Endpoint* const endpoint_;
  KeyRing* const keys_;
  SecretKey scheduler_key_{};  // shared with the scheduler (keys_ set)
  std::atomic<int32_t> my_id_{-1};
  std::atomic<int32_t> my_rank_{-1};

  mutable Mutex mu_;
  CondVar cv_;
  std::optional<proto::AddressBook> book_ GUARDED_BY(mu_);
  // A job with a token: what this node registers with, until it answers the
  // scheduler's challenge with it.
  std::optional<proto::Register> registration_ GUARDED_BY(mu_);
  std::optional<Status> aborted_ GUARDED_BY(mu_);
  bool shutdown_ GUARDED_BY(mu_) = false;
  std::map<std::pair<int, uint64_t>, bool> released_ GUARDED_BY(mu_);
  std::map<int, uint64_t> barrier_sequence_ GUARDED_BY(mu_);
  std::map<std::string, proto::DeclareReply> declared_ GUARDED_BY(mu_);
  std::function<void(const Status&)> abort_handler_ GUARDED_BY(mu_);
  std::function<void(int)> worker_finished_handler_ GUARDED_BY(mu_);
  std::function<void(const proto::WorkerAtBarrier&)> worker_at_barrier_handler_ GUARDED_BY(mu_);
  std::function<void(const proto::DeclareReply&)> placement_handler_ GUARDED_BY(mu_);
  Clock::time_point last_heard_ GUARDED_BY(mu_);
  std::string my_address_ GUARDED_BY(mu_);

  std::atomic<bool> stop_{false};
  std::thread heartbeat_thread_;
};

}  // namespace syncline
