// Scheduler: the control plane of one job (the syncline-scheduler role).
// Rendezvous of N workers and M servers (ids, ranks, address book), barriers,
// tensor declarations and key placement, heartbeats and failure detection,
// job-wide abort carrying a reason, and a clean end once every node finished.
//
// Thread-safety: the endpoint's I/O thread delivers messages while Run()
// watches the clock and the metrics exporter's thread reads the state; all
// state is guarded by one mutex, which message handling holds throughout
// (sends included).
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "common/mutex.h"
#include "common/settings.h"
#include "control/key_ring.h"
#include "metrics/registry.h"
#include "node/node_runtime.h"
#include "scheduler/placement.h"
#include "transport/transport.h"

namespace syncline {

// What one job may make the scheduler hold, whatever its workers declare.
struct SchedulerLimits {
  // Chunks of every declared tensor together (each tensor is also capped at
  // kMaxChunksPerTensor): about 50 bytes each here and in every worker. 4M
  // chunks are 1 TiB of tensors at the default 256 KiB partitions.
  uint64_t max_chunks = uint64_t{1} << 22;
};

class Scheduler {
 public:
  Scheduler(Settings settings, std::unique_ptr<Endpoint> endpoint, SchedulerLimits limits = {});
  ~Scheduler();

  // OK if the settings give the job a token, or explicitly allow none; the
  // scheduler process checks this before it listens.
  static Status CheckJobToken(const Settings& settings);

  // Binds the scheduler's address (and the metrics port, when the settings
  // name one); returns the concrete address.
  Result<std::string> Listen(const std::string& address);
  // Runs the job to its end: OK once every node finished, Aborted with the
  // reason if a node died, misbehaved or asked to abort, DeadlineExceeded if
  // the nodes did not all register within the startup timeout.
  Status Run();
  // Ends Run() with an abort (e.g. on SIGTERM).
  void RequestAbort(const std::string& reason) EXCLUDES(mu_);

  // What the scheduler counts, peers' heartbeat ages included.
  const MetricsRegistry& metrics() const { return metrics_; }

 private:
  static constexpr int32_t kSchedulerId = 0;  // the scheduler's node id
  struct Node {
    proto::NodeInfo info;
    Clock::time_point last_seen;
    bool finished = false;
    std::string nonce;  // its registration nonce (a job with a token)
    proto::JobWideSettings job_wide;  // as registered; compared with the scheduler's at publication
  };
  struct TensorEntry {
    proto::TensorSpec spec;
    uint32_t id = 0;
    std::set<int32_t> declared_by;  // worker node ids
    // Until every worker declared it: when each of declared_by did (stalls.cc).
    std::map<int32_t, Clock::time_point> waiting_since;
    std::vector<proto::ChunkPlacement> chunks;
    bool placements_sent = false;   // to the servers owning its chunks
    std::set<int32_t> unacknowledged;  // servers that have not recorded their chunks yet
  };

  void Handle(Message&& message) EXCLUDES(mu_);
  void OnRegister(const Message& m) REQUIRES(mu_);
  // A job with a token: sends the registering node (by its nonce) a fresh
  // challenge, which its next REGISTER must carry back (registration.cc).
  void Challenge(const Message& m) REQUIRES(mu_);
  void OnBarrier(const Message& m) REQUIRES(mu_);
  void OnDeclare(const Message& m) REQUIRES(mu_);
  void OnFinish(const Message& m) REQUIRES(mu_);
  void OnPlacementAck(const Message& m) REQUIRES(mu_);
  // A worker's push_pulls stopped moving, or move again (stalls.cc).
  void OnWorkerStalled(const Message& m) REQUIRES(mu_);
  // Ends the job once every worker still in it is stalled or at a barrier.
  void CheckStalledJob() REQUIRES(mu_);
  // Ends the job once workers have waited in declarations the others do not
  // make for the stall timeout, and every other worker waits too.
  void CheckStuckDeclarations() REQUIRES(mu_);
  bool AtBarrier(int32_t id) const REQUIRES(mu_);
  // Once every worker declared `t`: tells its servers their chunks, then
  // (when all of them acknowledged) the workers its id and placement.
  void PlaceDeclared(TensorEntry& t) REQUIRES(mu_);
  void ReplyDeclared(const TensorEntry& t) REQUIRES(mu_);
  void AssignRanksAndPublish() REQUIRES(mu_);
  // The keys node `id` shares with every other node, sealed for it.
  std::string SealedPeerKeys(int32_t id) const REQUIRES(mu_);
  void CheckHeartbeats() REQUIRES(mu_);
  void AbortJob(const std::string& reason, int32_t culprit) REQUIRES(mu_);
  void SendTo(int32_t id, Message m) REQUIRES(mu_);
  std::string Describe(int32_t id) const REQUIRES(mu_);
  // "float32[100] in chunks of 4096 bytes[, compressed as ...]".
  static std::string DescribeSpec(const proto::TensorSpec& s);
  // " [tensor 'name', chunk i of n]" for a key of a declared tensor.
  std::string TensorOfKey(uint64_t key) const REQUIRES(mu_);
  size_t CountRole(proto::Role role) const REQUIRES(mu_);
  // " (never registered: worker 2, server 0)" at the startup timeout, for
  // roles whose registered nodes all asked for their ranks; else "".
  std::string MissingNodes() const REQUIRES(mu_);
  void AddMetrics();

  const Settings settings_;
  const SchedulerLimits limits_;
  MetricsRegistry metrics_;  // before everything that registers in it
  Counter& rejected_registrations_;
  Counter& unexpected_messages_;
  Counter& foreign_barrier_arrivals_;
  // A job with a token: the scheduler's random secret (pair keys).
  const SecretKey secret_;
  // The endpoint stack and the common metrics; its exporter stops first in
  // the destructor, before the state its collectors read goes.
  NodeRuntime runtime_;
  KeyRing* const keys_;       // runtime_'s (its AuthenticatedEndpoint's), null without a token
  Endpoint* const endpoint_;  // runtime_'s
  mutable Mutex mu_;
  CondVar done_cv_;
  std::optional<Status> outcome_ GUARDED_BY(mu_);  // set once the job ended
  std::map<int32_t, Node> nodes_ GUARDED_BY(mu_);
  // Registrations sent a challenge and not answered yet, by nonce: the node
  // id they will get and the challenge.
  struct Challenged {
    int32_t id = 0;
    std::string challenge;
  };
  std::map<std::string, Challenged> challenged_ GUARDED_BY(mu_);
  // Registrations that proved the token but answered no challenge of this
  // scheduler (recorded in an earlier job): counted as unauthenticated.
  std::atomic<uint64_t> stale_registrations_{0};
  int32_t next_id_ GUARDED_BY(mu_) = 1;
  bool published_ GUARDED_BY(mu_) = false;  // address book sent
  std::map<std::pair<int, uint64_t>, std::set<int32_t>> barriers_ GUARDED_BY(mu_);
  std::map<std::string, TensorEntry> tensors_ GUARDED_BY(mu_);
  uint32_t next_tensor_id_ GUARDED_BY(mu_) = 0;
  uint64_t total_chunks_ GUARDED_BY(mu_) = 0;  // of every tensor
  std::unique_ptr<KeyPlacement> placement_ GUARDED_BY(mu_);
  bool shutdown_sent_ GUARDED_BY(mu_) = false;
  std::map<int32_t, proto::WorkerStalled> stalled_ GUARDED_BY(mu_);  // by worker node id
  Clock::time_point declarations_warned_at_ GUARDED_BY(mu_) = {};  // stalls.cc: the last busy-worker warning
};

}  // namespace syncline
