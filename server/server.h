// Server: the syncline-server role. Joins the job, then serves pushes and
// pulls for the keys the scheduler placed on it until the scheduler says the
// job is done (or aborts it). Summation runs on SerialLanes threads, one
// lane per key, never on the network thread.
//
// Thread-safety: Run() is called once; RequestStop() from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <functional>
#include <thread>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "common/buffer.h"
#include "common/mutex.h"
#include "common/settings.h"
#include "control/client.h"
#include "metrics/common_metrics.h"
#include "metrics/registry.h"
#include "node/node_runtime.h"
#include "server/key_store.h"
#include "server/reply_scheduler.h"
#include "summation/engine.h"
#include "summation/lanes.h"
#include "transport/transport.h"

namespace syncline {

class Server {
 public:
  // Empty addresses: derived from the settings (transport, host, port,
  // scheduler host and port). Tests pass loopback addresses.
  Server(Settings settings, std::unique_ptr<Endpoint> endpoint, std::string listen_address = "",
         std::string scheduler_address = "");
  ~Server();

  // Listens, joins the job and serves until it ends: OK on the scheduler's
  // shutdown, Aborted with the reason otherwise.
  Status Run();
  // Aborts the job (e.g. on SIGTERM); Run() returns soon after.
  void RequestStop(const std::string& reason);

  const KeyStore& key_store() const { return store_; }
  const ReplyScheduler& reply_scheduler() const { return replies_; }
  // What this server counts (served over HTTP when settings.metrics_port is set).
  const MetricsRegistry& metrics() const { return metrics_; }

 private:
  void OnMessage(Message&& m);
  void Serve(const std::shared_ptr<Message>& m);
  // Sends what the reply scheduler lets leave now; the rest leaves on acks.
  void SendReplies(std::vector<Reply>& replies);
  void Transmit(std::vector<Reply>& replies);
  // A worker's REPLY_ACK: sends the sums its window now has room for.
  void OnReplyAck(const Message& ack);
  // A sum (to, flags, bytes of its header) that never left is never
  // acknowledged: a windowed one's bytes leave the worker's window here (else
  // every later sum to that worker would wait); the sums that lets through
  // are appended to `released`.
  void ForgetSent(int32_t to, uint32_t flags, uint64_t bytes, std::vector<Reply>& released);
  // A worker finished, or waits at a barrier: rounds lacking its push cannot
  // complete (a barrier comes after the worker's own push_pulls, so the
  // workers that pushed such a round wait for it and never reach the barrier).
  void OnWorkerFinished(int rank);
  void OnWorkerAtBarrier(const proto::WorkerAtBarrier& note);
  void CheckEveryKeyForOrphans();
  // A round lacks an absent worker's push. A finished worker ends the job at
  // once; one at a barrier after a grace, if it is still there (the barrier's
  // release may be on its way).
  void OnOrphanedRound(uint64_t key, uint64_t round, int rank, Absence why);
  // Ends the job naming the worker and (through the scheduler) the tensor.
  void ReportOrphanedRound(uint64_t key, uint64_t round, int rank, Absence why);

  // The numbers this server reports, before everything that updates them.
  struct Instruments {
    explicit Instruments(MetricsRegistry& registry);
    TrafficCounters traffic;
    Counter& rounds;
    Histogram& summation_seconds;
    Counter& rejected;
    Counter& not_a_member;
    Counter& unexpected;
    Counter& excess_acks;
  };

  const Settings settings_;
  MetricsRegistry metrics_;
  Instruments instruments_;
  // The endpoint stack, the scheduler client and the common metrics; its
  // exporter stops at the end of the destructor, before the rest goes.
  NodeRuntime runtime_;
  const std::string listen_address_;
  SchedulerClient& client_;  // runtime_'s
  SummationEngine engine_;
  BufferPool pool_;
  KeyStore store_;
  ReplyScheduler replies_;
  SerialLanes lanes_;

  Mutex pending_mu_;
  bool ready_ GUARDED_BY(pending_mu_) = false;
  std::vector<std::shared_ptr<Message>> pending_ GUARDED_BY(pending_mu_);  // data before the address book
  // Node id -> contributor index (server/key_store.h: the worker's rank, or
  // with local reduce its host's index); written once before ready_, then read-only.
  std::unordered_map<int32_t, int> contributor_of_node_;
  // Rank -> contributor, and each contributor's ranks (for absences and
  // errors); set with contributor_of_node_ (empty before: ranks stand for themselves).
  mutable Mutex groups_mu_;
  std::vector<int> contributor_of_rank_ GUARDED_BY(groups_mu_);
  std::vector<std::vector<int>> ranks_of_contributor_ GUARDED_BY(groups_mu_);
  bool contributors_known_ GUARDED_BY(groups_mu_) = false;
  // Absences the scheduler reported before that (replayed once it is known).
  std::vector<std::function<void()>> early_absences_ GUARDED_BY(groups_mu_);
  // Runs `mark` now, or once the contributors are known.
  void WhenContributorsKnown(std::function<void()> mark);
  // Sets the three above from the address book.
  Status LearnContributors();
  int ContributorOf(int rank) const;
  // "worker 3", or "the workers of host 1 (ranks 2, 3)".
  std::string NameContributor(int contributor) const;
  std::atomic<bool> orphan_reported_{false};
  // The one pending confirmation of a round orphaned by a worker at a barrier.
  Mutex confirm_mu_;
  CondVar confirm_cv_;
  bool stopping_ GUARDED_BY(confirm_mu_) = false;
  std::atomic<bool> confirm_pending_{false};
  std::thread confirm_thread_;
};

}  // namespace syncline
