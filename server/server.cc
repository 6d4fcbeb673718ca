#include "server/server.h"

#include <algorithm>
#include <thread>

#include "common/log_limiter.h"
#include "common/logging.h"
#include "control/local_group.h"
#include "metrics/common_metrics.h"
#include "transport/factory.h"

namespace syncline {
namespace {
// A server waits for the job as long as it runs; heartbeats, not this
// deadline, are what end a job whose peers died.
constexpr auto kJobLifetime = std::chrono::hours(24 * 365);
// Requests queued per summation lane before the network thread waits:
// bounds server memory while a lane is busy.
constexpr size_t kMaxPendingPerLane = 4096;

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}
}  // namespace

Server::Instruments::Instruments(MetricsRegistry& r)
    : traffic(TrafficCounters::Register(r)),
      rounds(RoundsCompleted(r)),
      summation_seconds(r.AddHistogram("syncline_summation_seconds",
                                       "Time a server spends taking one pushed chunk into its round's sum",
                                       ExponentialBuckets(1e-5, 4, 10))),
      rejected(ErrorCounter(r, "request_rejected")),
      not_a_member(ErrorCounter(r, "sender_not_a_worker")),
      unexpected(ErrorCounter(r, "unexpected_message")),
      excess_acks(ErrorCounter(r, "reply_ack_beyond_replies_sent")) {}

Server::Server(Settings settings, std::unique_ptr<Endpoint> endpoint, std::string listen_address,
               std::string scheduler_address)
    : settings_(std::move(settings)),
      instruments_(metrics_),
      runtime_(settings_, Role::kServer, std::move(endpoint), metrics_, std::move(scheduler_address)),
      listen_address_(std::move(listen_address)),
      client_(runtime_.client()),
      engine_(settings_.sum_threads),
      store_(KeyStoreOptions{settings_.num_workers, settings_.async, settings_.deterministic,
                             [this](uint64_t key, uint64_t round, int rank, Absence why) {
                               OnOrphanedRound(key, round, rank, why);
                             },
                             [this] { instruments_.rounds.Add(); }, /*require_placement=*/true,
                             settings_.sync_mode == "ssp" ? std::optional<int>(settings_.ssp_staleness) : std::nullopt},
             &engine_, &pool_),
      replies_(settings_.ServerReplyWindowBytes()),
      lanes_(settings_.server_threads, kMaxPendingPerLane) {
  client_.SetWorkerFinishedHandler([this](int rank) { OnWorkerFinished(rank); });
  client_.SetWorkerAtBarrierHandler([this](const proto::WorkerAtBarrier& note) { OnWorkerAtBarrier(note); });
  client_.SetPlacementHandler([this](const proto::DeclareReply& placement) {
    compression::Spec form;  // none
    if (!placement.compression().empty()) {
      auto parsed = compression::ParseSpec(placement.compression());
      if (!parsed.ok()) {
        // The scheduler refuses such declarations: its keys stay unplaced
        // here, and their pushes are refused as not placed.
        SYNCLINE_LOG_ERROR("tensor '{}' placed with compression '{}': {}", placement.name(),
                           placement.compression(), parsed.status().message());
        return;
      }
      form = *parsed;
    }
    for (const proto::ChunkPlacement& c : placement.chunks())
      if (c.server_id() == client_.my_id()) store_.Place(c.key(), c.length_bytes(), form);
  });
  runtime_.AddCommonMetrics();
  metrics_.AddCollector("syncline_keys", "Keys this server holds",
                        [this] { return std::vector<std::pair<MetricLabels, double>>{{{}, double(store_.num_keys())}}; });
  metrics_.AddCollector("syncline_server_replies_waiting",
                        "Summed replies waiting for room in their worker's reply window",
                        [this] { return std::vector<std::pair<MetricLabels, double>>{{{}, double(replies_.load().queued_replies)}}; });
  metrics_.AddCollector("syncline_server_reply_bytes_in_flight",
                        "Reply bytes sent to workers and not yet acknowledged by them",
                        [this] { return std::vector<std::pair<MetricLabels, double>>{{{}, double(replies_.load().bytes_in_flight)}}; });
}

Server::~Server() {
  {
    MutexLock lock(confirm_mu_);
    stopping_ = true;
  }
  confirm_cv_.NotifyAll();
  if (confirm_thread_.joinable()) confirm_thread_.join();
  lanes_.Shutdown();
  runtime_.Close();
  runtime_.StopServingMetrics();  // its collectors read the state below
}

Status Server::Run() {
  std::string want = listen_address_;
  if (want.empty()) {
    SYNCLINE_ASSIGN_OR_RETURN(want, ListenAddress(settings_.transport, settings_.host, settings_.port));
  }
  SYNCLINE_ASSIGN_OR_RETURN(std::string address,
                            runtime_.Listen(want, [this](Message&& m) { OnMessage(std::move(m)); }));
  SYNCLINE_LOG_INFO("server listening at {}", address);
  SYNCLINE_RETURN_IF_ERROR(runtime_.Join(address));
  SYNCLINE_RETURN_IF_ERROR(LearnContributors());
  {
    // Serve what came before the address book; then drop our references
    // at once (a payload's sender may wait for its release).
    std::vector<std::shared_ptr<Message>> early;
    {
      MutexLock lock(pending_mu_);
      ready_ = true;
      early.swap(pending_);
    }
    for (auto& m : early) Serve(m);
  }
  SYNCLINE_LOG_INFO("server {} serving {} workers in {} groups ({} mode{}{})", client_.my_rank(), settings_.num_workers,
                    store_.contributors(),
                    settings_.sync_mode == "ssp" ? "ssp" : settings_.async ? "async" : "sync",
                    settings_.sync_mode == "ssp" ? ", staleness " + std::to_string(settings_.ssp_staleness) : "",
                    settings_.deterministic ? ", deterministic" : "");

  Status st = client_.WaitForShutdown(Deadline::After(kJobLifetime));
  if (!st.ok()) return st;
  SYNCLINE_RETURN_IF_ERROR(lanes_.Drain(Deadline::AfterMs(settings_.request_timeout_ms)));
  SYNCLINE_LOG_INFO("job done; served {} keys", store_.num_keys());
  (void)runtime_.Finish();
  return Status::Ok();
}

void Server::RequestStop(const std::string& reason) { client_.Abort(reason); }

Status Server::LearnContributors() {
  const std::vector<proto::NodeInfo>& workers = runtime_.peers();
  // Every worker's host, in one pass over the address book.
  SYNCLINE_ASSIGN_OR_RETURN(const std::vector<int> host_of, HostIndexByRank(workers, settings_.num_workers));
  std::vector<int> of_rank(settings_.num_workers, -1);
  std::vector<std::vector<int>> ranks_of;
  for (const auto& w : workers) {
    const int contributor = settings_.LocalReduceApplies() ? host_of[w.rank()] : w.rank();
    of_rank[w.rank()] = contributor;
    if (contributor >= static_cast<int>(ranks_of.size())) ranks_of.resize(contributor + 1);
    ranks_of[contributor].push_back(w.rank());
  }
  for (auto& ranks : ranks_of) std::sort(ranks.begin(), ranks.end());
  for (const auto& w : workers) contributor_of_node_[w.id()] = of_rank[w.rank()];
  store_.SetContributors(static_cast<int>(ranks_of.size()));
  {
    MutexLock lock(groups_mu_);
    contributor_of_rank_ = std::move(of_rank);
    ranks_of_contributor_ = std::move(ranks_of);
  }
  // The absences reported so far, in order; those that come meanwhile queue
  // behind them until none is left (a barrier's release must not overtake
  // its arrival).
  for (;;) {
    std::vector<std::function<void()>> early;
    {
      MutexLock lock(groups_mu_);
      if (early_absences_.empty()) {
        contributors_known_ = true;
        break;
      }
      early.swap(early_absences_);
    }
    for (auto& mark : early) mark();
  }
  return Status::Ok();
}

void Server::WhenContributorsKnown(std::function<void()> mark) {
  {
    MutexLock lock(groups_mu_);
    if (!contributors_known_) return early_absences_.push_back(std::move(mark));
  }
  mark();
}

int Server::ContributorOf(int rank) const {
  MutexLock lock(groups_mu_);
  if (rank >= 0 && rank < static_cast<int>(contributor_of_rank_.size())) return contributor_of_rank_[rank];
  return rank;
}

std::string Server::NameContributor(int contributor) const {
  MutexLock lock(groups_mu_);
  if (contributor < 0 || contributor >= static_cast<int>(ranks_of_contributor_.size()) ||
      !settings_.LocalReduceApplies())
    return "worker " + std::to_string(contributor);
  const std::vector<int>& ranks = ranks_of_contributor_[contributor];
  if (ranks.size() == 1) return "worker " + std::to_string(ranks.front());
  std::string names;
  for (int r : ranks) names += (names.empty() ? "" : ", ") + std::to_string(r);
  return "the workers of host " + std::to_string(contributor) + " (ranks " + names + ", summing locally)";
}

void Server::OnWorkerFinished(int rank) {
  WhenContributorsKnown([this, rank] {
    store_.MarkFinished(ContributorOf(rank));
    CheckEveryKeyForOrphans();
  });
}

void Server::OnWorkerAtBarrier(const proto::WorkerAtBarrier& note) {
  WhenContributorsKnown([this, note] {
    if (!note.waiting()) return store_.ClearBarrier(note.sequence());
    store_.MarkAtBarrier(ContributorOf(note.rank()), note.sequence());
    CheckEveryKeyForOrphans();
  });
}

void Server::CheckEveryKeyForOrphans() {
  // Each key is checked on its own lane, where its rounds change.
  for (uint64_t key : store_.keys()) (void)lanes_.Submit(key, [this, key] { store_.CheckOrphanedRounds(key); });
}

void Server::OnOrphanedRound(uint64_t key, uint64_t round, int rank, Absence why) {
  if (why.kind == Absence::kFinished) return ReportOrphanedRound(key, round, rank, why);
  if (orphan_reported_ || confirm_pending_.exchange(true)) return;
  MutexLock lock(confirm_mu_);
  if (stopping_) return;
  if (confirm_thread_.joinable()) confirm_thread_.join();  // the last one is done: confirm_pending_ was clear
  confirm_thread_ = std::thread([this, key, round, rank, why] {
    const auto grace = Millis(std::max(1000, 2 * settings_.heartbeat_interval_ms));
    {
      MutexLock lock(confirm_mu_);
      if (confirm_cv_.WaitUntil(confirm_mu_, Deadline::After(grace), [this]() REQUIRES(confirm_mu_) { return stopping_; }))
        return;
    }
    Status queued = lanes_.Submit(key, [this, key, round, rank, why] {
      if (store_.StillOrphaned(key, round, rank, why)) ReportOrphanedRound(key, round, rank, why);
      confirm_pending_ = false;
    });
    if (!queued.ok()) confirm_pending_ = false;
  });
}

void Server::ReportOrphanedRound(uint64_t key, uint64_t round, int rank, Absence why) {
  if (orphan_reported_.exchange(true)) return;  // one abort is enough; later pushes would repeat it
  int32_t culprit = -1;  // one worker, where the contributor is one
  int workers_in_it = 0;
  for (const auto& [id, c] : contributor_of_node_)
    if (c == rank) {
      culprit = id;
      ++workers_in_it;
    }
  if (workers_in_it != 1) culprit = -1;
  const std::string worker = NameContributor(rank);
  client_.Abort(why.kind == Absence::kFinished
                    ? worker + " finished without pushing round " + std::to_string(round) +
                          " of a tensor the other workers push_pull: every worker must make the same push_pull "
                          "calls (the same tensors, as many times)"
                    : worker + " waits at a barrier without pushing round " + std::to_string(round) +
                          " of a tensor the other workers push_pull (and wait for, so they never reach the "
                          "barrier): every worker must make the same push_pull calls before a barrier",
                culprit, key);
}

void Server::OnMessage(Message&& m) {
  if (client_.Handle(m)) return;
  const proto::Op op = m.header.op();
  if (op == proto::REPLY_ACK) return OnReplyAck(m);
  if (op != proto::PUSH && op != proto::PULL) {
    instruments_.unexpected.Add();
    SYNCLINE_LOG_WARN_LIMITED("ignoring {} from node {}", proto::Op_Name(op), m.header.sender());
    return;
  }
  auto shared = std::make_shared<Message>(std::move(m));
  {
    MutexLock lock(pending_mu_);
    if (!ready_) {
      pending_.push_back(std::move(shared));
      return;
    }
  }
  Serve(shared);
}

void Server::Serve(const std::shared_ptr<Message>& m) {
  auto it = contributor_of_node_.find(m->header.sender());
  if (it == contributor_of_node_.end()) {
    instruments_.not_a_member.Add();
    SYNCLINE_LOG_WARN_LIMITED("ignoring {} from node {}: not a worker of this job", proto::Op_Name(m->header.op()),
                      m->header.sender());
    return;
  }
  const int rank = it->second;  // the contributor's index
  Status st = lanes_.Submit(m->header.key(), [this, m, rank] {
    std::vector<Reply> replies;
    if (m->header.op() == proto::PUSH) {
      instruments_.traffic.pushed_chunks.Add();
      for (const Buffer& payload : m->payloads) instruments_.traffic.pushed_bytes.Add(double(payload.size()));
      const auto start = std::chrono::steady_clock::now();
      store_.Push(*m, rank, &replies);
      instruments_.summation_seconds.Observe(SecondsSince(start));
    } else {
      store_.Pull(*m, rank, &replies);
    }
    SendReplies(replies);
  });
  if (!st.ok()) {
    // Lose nothing silently: the worker hears why its request was not served.
    // The lanes close as the server stops; when it stops because the job was
    // aborted, the abort's reason (which names its cause) is the answer.
    const Status job = client_.health();
    std::vector<Reply> replies{
        ErrorReply(*m, job.ok() ? "server cannot queue the request: " + st.message() : job.message())};
    SendReplies(replies);
  }
}

void Server::OnReplyAck(const Message& ack) {
  {
    MutexLock lock(pending_mu_);
    if (!ready_ || !contributor_of_node_.count(ack.header.sender())) {
      instruments_.unexpected.Add();
      SYNCLINE_LOG_WARN_LIMITED("ignoring REPLY_ACK from node {}: not a worker of this job", ack.header.sender());
      return;
    }
  }
  ReplyScheduler::Acknowledged acked = replies_.Acknowledge(ack.header.sender(), ack.header.reply_ack().bytes());
  if (acked.excess_bytes > 0) {
    instruments_.excess_acks.Add();
    SYNCLINE_LOG_WARN_LIMITED("node {} acknowledged {} reply bytes more than it was sent", ack.header.sender(),
                              acked.excess_bytes);
  }
  if (acked.ready.empty()) return;
  // Sent on a lane, never on this receiving thread: a send may wait for the transport.
  auto ready = std::make_shared<std::vector<Reply>>(std::move(acked.ready));
  const uint64_t lane_key = ready->front().message.header.key();
  Status st = lanes_.Submit(lane_key, [this, ready] { Transmit(*ready); });
  if (st.ok()) return;
  // The lanes are closing (the server stops): these sums never leave, nor
  // do the ones their bytes would let through.
  SYNCLINE_LOG_WARN("{} replies not sent: {}", ready->size(), st.message());
  for (size_t i = 0; i < ready->size(); ++i) {
    const proto::Header& h = (*ready)[i].message.header;
    ForgetSent((*ready)[i].to, h.flags(), h.byte_length(), *ready);
  }
}

void Server::ForgetSent(int32_t to, uint32_t flags, uint64_t bytes, std::vector<Reply>& released) {
  if (!(flags & proto::FLAG_ACK_REPLY)) return;
  for (Reply& next : replies_.Acknowledge(to, bytes).ready) released.push_back(std::move(next));
}

void Server::SendReplies(std::vector<Reply>& replies) {
  std::vector<Reply> ready = replies_.Submit(std::move(replies));
  Transmit(ready);
}

void Server::Transmit(std::vector<Reply>& replies) {
  for (size_t i = 0; i < replies.size(); ++i) {
    Reply& r = replies[i];
    r.message.header.set_sender(client_.my_id());
    if (r.message.header.op() == proto::ERROR) instruments_.rejected.Add();
    if (r.message.header.op() == proto::PULL_REPLY) {
      instruments_.traffic.pulled_chunks.Add();
      for (const Buffer& payload : r.message.payloads) instruments_.traffic.pulled_bytes.Add(double(payload.size()));
    }
    const int32_t to = r.to;
    const uint32_t flags = r.message.header.flags();
    const uint64_t bytes = r.message.header.byte_length();
    Status st = runtime_.endpoint().Send(to, std::move(r.message), Deadline::AfterMs(settings_.request_timeout_ms));
    if (st.ok()) continue;
    SYNCLINE_LOG_WARN("reply to node {} failed: {}", to, st.message());
    ForgetSent(to, flags, bytes, replies);  // may grow `replies`: `r` is not used after this
  }
}

}  // namespace syncline
