#include "scheduler/scheduler.h"

#include <algorithm>

#include "common/dtype.h"
#include "common/log_limiter.h"
#include "common/logging.h"
#include "metrics/common_metrics.h"
#include "transport/wire.h"

namespace syncline {
namespace {

const auto kSendDeadline = Millis(2000);

}  // namespace

Scheduler::Scheduler(Settings settings, std::unique_ptr<Endpoint> endpoint, SchedulerLimits limits)
    : settings_(std::move(settings)),
      limits_(limits),
      rejected_registrations_(ErrorCounter(metrics_, "registration_rejected")),
      unexpected_messages_(ErrorCounter(metrics_, "unexpected_message")),
      foreign_barrier_arrivals_(ErrorCounter(metrics_, "barrier_not_a_member")),
      secret_(RandomKey()),
      runtime_(settings_, Role::kScheduler, std::move(endpoint), metrics_),
      keys_(runtime_.keys()),
      endpoint_(&runtime_.endpoint()) {
  AddMetrics();
}

Scheduler::~Scheduler() {
  runtime_.StopServingMetrics();  // its collectors read the state below
  runtime_.Close();
}

void Scheduler::AddMetrics() {
  using Series = std::vector<std::pair<MetricLabels, double>>;
  // A registration recorded in an earlier job proves the token but not that
  // it is fresh: it counts as unauthenticated.
  runtime_.AddCommonMetrics([this] { return stale_registrations_.load(); });
  metrics_.AddCollector("syncline_heartbeat_age_seconds", "Time since the scheduler last heard from each peer", [this] {
    Series series;
    MutexLock lock(mu_);
    const auto now = Clock::now();
    for (const auto& [id, node] : nodes_) {
      const bool worker = node.info.role() == proto::WORKER;
      const std::string peer = std::string(worker ? "worker" : "server") +
                               (published_ ? " " + std::to_string(node.info.rank()) : " (node " + std::to_string(id) + ")");
      series.push_back({{{"peer", peer}}, std::chrono::duration<double>(now - node.last_seen).count()});
    }
    return series;
  });
  metrics_.AddCollector("syncline_registered_nodes", "Workers and servers that joined the job", [this] {
    MutexLock lock(mu_);
    return Series{{{{"role", "worker"}}, double(CountRole(proto::WORKER))},
                  {{{"role", "server"}}, double(CountRole(proto::SERVER))}};
  });
  metrics_.AddCollector("syncline_declared_tensors", "Tensors the workers declared (each partition size counts)", [this] {
    MutexLock lock(mu_);
    return Series{{{}, double(tensors_.size())}};
  });
}

Result<std::string> Scheduler::Listen(const std::string& address) {
  return runtime_.Listen(address, [this](Message&& m) { Handle(std::move(m)); });
}

Status Scheduler::Run() {
  const Deadline startup = Deadline::AfterMs(settings_.startup_timeout_ms);
  const auto tick = Millis(std::max(5, settings_.heartbeat_interval_ms / 4));
  MutexLock lock(mu_);
  while (!outcome_) {
    done_cv_.WaitUntil(mu_, Deadline::After(tick));
    if (outcome_) break;
    if (!published_ && startup.Expired()) {
      AbortJob("only " + std::to_string(CountRole(proto::WORKER)) + " of " + std::to_string(settings_.num_workers) +
                   " workers and " + std::to_string(CountRole(proto::SERVER)) + " of " +
                   std::to_string(settings_.num_servers) + " servers registered within " +
                   std::to_string(settings_.startup_timeout_ms) + " ms" + MissingNodes(),
               -1);
      outcome_ = DeadlineExceeded(outcome_->message());
      break;
    }
    if (published_) CheckHeartbeats();
    if (published_ && !outcome_) CheckStuckDeclarations();
  }
  Status result = *outcome_;
  lock.Unlock();
  // The last messages (the abort, the shutdown) leave before the endpoint closes.
  runtime_.Flush("the job's last messages may not reach every node");
  runtime_.Close();
  return result;
}

void Scheduler::RequestAbort(const std::string& reason) {
  MutexLock lock(mu_);
  AbortJob(reason, -1);
}

void Scheduler::Handle(Message&& m) {
  MutexLock lock(mu_);
  if (outcome_) return;
  const int32_t sender = m.header.sender();
  if (auto it = nodes_.find(sender); it != nodes_.end()) it->second.last_seen = Clock::now();
  switch (m.header.op()) {
    case proto::REGISTER: return OnRegister(m);
    case proto::HEARTBEAT:
      if (nodes_.count(sender)) return SendTo(sender, MakeMessage(proto::HEARTBEAT_ACK, kSchedulerId));
      // A registered node waiting for the address book names its nonce.
      if (sender < 0 && keys_)
        for (auto& [id, n] : nodes_)
          if (n.nonce == m.header.auth().nonce()) return SendTo(id, MakeMessage(proto::HEARTBEAT_ACK, kSchedulerId));
      return;
    case proto::BARRIER: return OnBarrier(m);
    case proto::DECLARE: return OnDeclare(m);
    case proto::FINISH: return OnFinish(m);
    case proto::WORKER_STALLED: return OnWorkerStalled(m);
    case proto::PLACEMENT_ACK:
      if (nodes_.count(sender) && nodes_[sender].info.role() == proto::SERVER) return OnPlacementAck(m);
      break;
    case proto::ABORT: {
      // A node may abort before it knows its id: then the registration nonce
      // its proof names says who it is (without a token: its address).
      const proto::Abort& a = m.header.abort();
      int32_t from = nodes_.count(sender) ? sender : -1;
      if (from < 0 && sender < 0)
        for (const auto& [id, n] : nodes_)
          if (keys_ ? n.nonce == m.header.auth().nonce() : n.info.address() == a.address()) from = id;
      if (from < 0) break;
      return AbortJob(Describe(from) + " aborted the job: " + a.reason() + (a.has_key() ? TensorOfKey(a.key()) : ""),
                      a.culprit() >= 0 ? a.culprit() : from);
    }
    default: break;
  }
  unexpected_messages_.Add();
  SYNCLINE_LOG_WARN_LIMITED("ignoring {} from node {}", proto::Op_Name(m.header.op()), sender);
}

Status Scheduler::CheckJobToken(const Settings& settings) {
  if (!settings.job_token.empty() || settings.allow_no_token) return Status::Ok();
  return FailedPrecondition(
      "no job token (SYNCLINE_JOB_TOKEN): any process that reaches the scheduler's port could join the job and "
      "push into its sums. Give every node the same SYNCLINE_JOB_TOKEN (pslaunch --token; pslaunch makes one for "
      "local jobs), or set SYNCLINE_ALLOW_NO_TOKEN=1 on a closed network");
}

void Scheduler::OnBarrier(const Message& m) {
  const int32_t sender = m.header.sender();
  if (!published_ || !nodes_.count(sender)) return;
  const proto::Barrier& b = m.header.barrier();
  if (b.group() != proto::ROLE_UNKNOWN && nodes_[sender].info.role() != b.group()) {
    foreign_barrier_arrivals_.Add();
    SYNCLINE_LOG_WARN_LIMITED("ignoring {}'s arrival at a {} barrier it is not a member of", Describe(sender),
                      proto::Role_Name(b.group()));
    return;
  }
  auto& arrived = barriers_[{b.group(), b.sequence()}];
  arrived.insert(sender);
  std::vector<int32_t> members;
  for (auto& [id, n] : nodes_)
    if (b.group() == proto::ROLE_UNKNOWN || n.info.role() == b.group()) members.push_back(id);
  const bool released = arrived.size() >= members.size();
  // A worker waits at a workers' barrier only after its own push_pulls: the
  // servers learn it, so that a round lacking its push ends the job naming it
  // (server/server.h), and learn when the barrier is released.
  if (b.group() == proto::WORKER && (!released || arrived.size() > 1)) {
    proto::WorkerAtBarrier note;
    note.set_rank(released ? -1 : nodes_[sender].info.rank());
    note.set_sequence(b.sequence());
    note.set_waiting(!released);
    for (auto& [id, n] : nodes_) {
      if (n.info.role() != proto::SERVER) continue;
      Message m = MakeMessage(proto::WORKER_AT_BARRIER, kSchedulerId);
      *m.header.mutable_worker_at_barrier() = note;
      SendTo(id, std::move(m));
    }
  }
  if (!released) return;
  for (int32_t id : members) {
    Message release = MakeMessage(proto::BARRIER_RELEASE, kSchedulerId);
    *release.header.mutable_barrier() = b;
    SendTo(id, std::move(release));
  }
  barriers_.erase({b.group(), b.sequence()});
}

void Scheduler::OnFinish(const Message& m) {
  auto it = nodes_.find(m.header.sender());
  if (it == nodes_.end()) return;
  it->second.finished = true;
  stalled_.erase(it->first);
  SYNCLINE_LOG_INFO("{} finished", Describe(it->first));
  bool workers_done = true, all_done = true;
  for (auto& [id, n] : nodes_) {
    if (!n.finished) all_done = false;
    if (n.info.role() == proto::WORKER && !n.finished) workers_done = false;
  }
  if (it->second.info.role() == proto::WORKER && !workers_done) {
    // The servers learn that this worker pushes nothing more: a round still
    // waiting for it can never complete, and they end the job naming it.
    for (auto& [id, n] : nodes_) {
      if (n.info.role() != proto::SERVER) continue;
      Message note = MakeMessage(proto::WORKER_FINISHED, kSchedulerId);
      note.header.mutable_worker_finished()->set_rank(it->second.info.rank());
      SendTo(id, std::move(note));
    }
  }
  if (workers_done && !shutdown_sent_) {
    shutdown_sent_ = true;
    for (auto& [id, n] : nodes_)
      if (n.info.role() == proto::SERVER) SendTo(id, MakeMessage(proto::SHUTDOWN, kSchedulerId));
  }
  if (all_done && published_) {
    outcome_ = Status::Ok();
    done_cv_.NotifyAll();
  }
}

void Scheduler::CheckHeartbeats() {
  const auto now = Clock::now();
  for (auto& [id, n] : nodes_) {
    if (n.finished) continue;
    const auto silent = std::chrono::duration_cast<Millis>(now - n.last_seen).count();
    if (silent > settings_.heartbeat_timeout_ms)
      return AbortJob(Describe(id) + " sent no heartbeat for " + std::to_string(silent) + " ms and is presumed dead",
                      id);
  }
}

void Scheduler::AbortJob(const std::string& reason, int32_t culprit) {
  if (outcome_) return;
  SYNCLINE_LOG_ERROR("aborting the job: {}", reason);
  for (auto& [id, n] : nodes_) {
    if (n.finished) continue;  // the culprit too: it may be alive and waiting
    Message m = MakeMessage(proto::ABORT, kSchedulerId);
    m.header.mutable_abort()->set_reason(reason);
    m.header.mutable_abort()->set_culprit(culprit);
    SendTo(id, std::move(m));
  }
  outcome_ = Aborted(reason);
  done_cv_.NotifyAll();
}

void Scheduler::SendTo(int32_t id, Message m) {
  Status st = endpoint_->Send(id, std::move(m), Deadline::After(kSendDeadline));
  if (!st.ok()) SYNCLINE_LOG_WARN("send to {} failed: {}", Describe(id), st.message());
}

std::string Scheduler::Describe(int32_t id) const {
  auto it = nodes_.find(id);
  if (it == nodes_.end()) return "node " + std::to_string(id);
  const proto::NodeInfo& n = it->second.info;
  std::string role = n.role() == proto::WORKER ? "worker" : "server";
  std::string rank = published_ ? " " + std::to_string(n.rank()) : "";
  return role + rank + " (node " + std::to_string(id) + " at " + n.address() +
         (n.hostname().empty() ? "" : " on " + n.hostname()) + ")";
}

size_t Scheduler::CountRole(proto::Role role) const {
  return std::count_if(nodes_.begin(), nodes_.end(), [&](const auto& kv) { return kv.second.info.role() == role; });
}

}  // namespace syncline
