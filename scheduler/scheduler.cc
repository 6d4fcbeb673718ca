#include "scheduler/scheduler.h"

#include <algorithm>
#include <thread>

#include "common/dtype.h"
#include "common/log_limiter.h"
#include "common/logging.h"
#include "control/authenticated_endpoint.h"
#include "metrics/common_metrics.h"
#include "metrics/process_metrics.h"
#include "transport/wire.h"

namespace syncline {
namespace {

constexpr int32_t kSchedulerId = 0;
const auto kSendDeadline = Millis(2000);

proto::Role ToWire(Role r) {
  switch (r) {
    case Role::kScheduler: return proto::SCHEDULER;
    case Role::kServer: return proto::SERVER;
    case Role::kWorker: return proto::WORKER;
  }
  return proto::ROLE_UNKNOWN;
}

std::string DescribeSpec(const proto::TensorSpec& s) {
  auto dtype = DTypeFromWire(s.dtype());
  return std::string(dtype.ok() ? DTypeName(*dtype) : "?") + "[" + std::to_string(s.num_elements()) +
         "] in chunks of " + std::to_string(s.partition_bytes()) + " bytes";
}

// The scheduler's endpoint: authenticated when the job has a token.
std::unique_ptr<Endpoint> SchedulerEndpoint(const Settings& settings, std::unique_ptr<Endpoint> inner,
                                            std::shared_ptr<KeyRing>* keys) {
  if (settings.job_token.empty()) return inner;
  *keys = std::make_shared<KeyRing>(JobKey(settings.job_token));
  return std::make_unique<AuthenticatedEndpoint>(std::move(inner), *keys);
}

bool SameSpec(const proto::TensorSpec& a, const proto::TensorSpec& b) {
  return a.dtype() == b.dtype() && a.num_elements() == b.num_elements() && a.partition_bytes() == b.partition_bytes();
}

}  // namespace

Scheduler::Scheduler(Settings settings, std::unique_ptr<Endpoint> endpoint, SchedulerLimits limits)
    : settings_(std::move(settings)),
      limits_(limits),
      rejected_registrations_(ErrorCounter(metrics_, "registration_rejected")),
      unexpected_messages_(ErrorCounter(metrics_, "unexpected_message")),
      foreign_barrier_arrivals_(ErrorCounter(metrics_, "barrier_not_a_member")),
      secret_(RandomKey()),
      endpoint_(SchedulerEndpoint(settings_, std::move(endpoint), &keys_)) {
  AddMetrics();
}

Scheduler::~Scheduler() {
  exporter_.reset();  // its collectors read the state below
  endpoint_->Close();
}

void Scheduler::AddMetrics() {
  using Series = std::vector<std::pair<MetricLabels, double>>;
  AddProcessMetrics(metrics_);
  AddNodeInfo(metrics_, "scheduler", -1);
  metrics_.AddCollector("syncline_heartbeat_age_seconds", "Time since the scheduler last heard from each peer", [this] {
    Series series;
    std::lock_guard<std::mutex> lock(mu_);
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
    std::lock_guard<std::mutex> lock(mu_);
    return Series{{{{"role", "worker"}}, double(CountRole(proto::WORKER))},
                  {{{"role", "server"}}, double(CountRole(proto::SERVER))}};
  });
  metrics_.AddCollector("syncline_declared_tensors", "Tensors the workers declared (each partition size counts)", [this] {
    std::lock_guard<std::mutex> lock(mu_);
    return Series{{{}, double(tensors_.size())}};
  });
}

Result<std::string> Scheduler::Listen(const std::string& address) {
  if (!exporter_) {
    SYNCLINE_ASSIGN_OR_RETURN(exporter_, MetricsExporter::FromSettings(settings_, &metrics_));
  }
  return endpoint_->Listen(address, [this](Message&& m) { Handle(std::move(m)); });
}

Status Scheduler::Run() {
  const Deadline startup = Deadline::AfterMs(settings_.startup_timeout_ms);
  const auto tick = Millis(std::max(5, settings_.heartbeat_interval_ms / 4));
  std::unique_lock<std::mutex> lock(mu_);
  while (!outcome_) {
    done_cv_.wait_for(lock, tick);
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
  }
  Status result = *outcome_;
  lock.unlock();
  // Give queued messages (the abort, the shutdown) a moment to leave.
  std::this_thread::sleep_for(Millis(100));
  endpoint_->Close();
  return result;
}

void Scheduler::RequestAbort(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  AbortJob(reason, -1);
}

void Scheduler::Handle(Message&& m) {
  std::lock_guard<std::mutex> lock(mu_);
  if (outcome_) return;
  const int32_t sender = m.header.sender();
  if (auto it = nodes_.find(sender); it != nodes_.end()) it->second.last_seen = Clock::now();
  switch (m.header.op()) {
    case proto::REGISTER: return OnRegister(m);
    case proto::HEARTBEAT:
      if (nodes_.count(sender)) SendTo(sender, MakeMessage(proto::HEARTBEAT_ACK, kSchedulerId));
      return;
    case proto::BARRIER: return OnBarrier(m);
    case proto::DECLARE: return OnDeclare(m);
    case proto::FINISH: return OnFinish(m);
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

void Scheduler::OnRegister(const Message& m) {
  const proto::Register& r = m.header.register_body();
  auto reject = [&](const std::string& why) {
    rejected_registrations_.Add();
    SYNCLINE_LOG_WARN_LIMITED("rejecting registration of a {} at {}: {}", proto::Role_Name(r.role()), r.address(), why);
    // One reused peer id for rejected nodes: connecting it again replaces the last one.
    const int32_t temp = -1;
    if (keys_) keys_->SetPeerKey(temp, NodeKey(JobKey(settings_.job_token), m.header.auth().nonce()));
    if (!endpoint_->Connect(temp, r.address()).ok()) return;
    Message abort = MakeMessage(proto::ABORT, kSchedulerId);
    abort.header.mutable_abort()->set_reason("registration rejected: " + why);
    abort.header.mutable_abort()->set_culprit(-1);
    (void)endpoint_->Send(temp, std::move(abort), Deadline::After(kSendDeadline));
  };
  // A job with a token: the endpoint passed only registrations that proved it.
  const std::string& nonce = m.header.auth().nonce();
  if (keys_)
    for (const auto& [id, n] : nodes_)
      if (n.nonce == nonce) return reject("its registration nonce was used by " + Describe(id));
  if (r.role() != proto::WORKER && r.role() != proto::SERVER) return reject("only workers and servers register");
  if (published_) return reject("the job has already started");
  const size_t limit = r.role() == proto::WORKER ? settings_.num_workers : settings_.num_servers;
  if (r.requested_rank() >= static_cast<int64_t>(limit))
    return reject("rank " + std::to_string(r.requested_rank()) + " is not below the number of " +
                  (r.role() == proto::WORKER ? "workers" : "servers") + " (" + std::to_string(limit) + ")");
  if (CountRole(r.role()) >= limit)
    return reject("the job already has " + std::to_string(limit) + " " + proto::Role_Name(r.role()) + "s");
  const int32_t id = next_id_++;
  Node node;
  node.info.set_id(id);
  node.info.set_role(r.role());
  node.info.set_rank(r.requested_rank());
  node.info.set_address(r.address());
  node.info.set_hostname(r.hostname());
  node.info.set_host_id(r.host_id());
  node.info.set_pid(r.pid());
  node.last_seen = Clock::now();
  node.nonce = nonce;
  if (Status st = endpoint_->Connect(id, r.address()); !st.ok()) return reject(st.message());
  if (keys_) keys_->SetPeerKey(id, NodeKey(JobKey(settings_.job_token), nonce));
  nodes_[id] = node;
  SYNCLINE_LOG_INFO("registered {} at {} as node {} ({} of {} workers, {} of {} servers)",
                    proto::Role_Name(r.role()), r.address(), id, CountRole(proto::WORKER), settings_.num_workers,
                    CountRole(proto::SERVER), settings_.num_servers);
  if (CountRole(proto::WORKER) == static_cast<size_t>(settings_.num_workers) &&
      CountRole(proto::SERVER) == static_cast<size_t>(settings_.num_servers))
    AssignRanksAndPublish();
}

void Scheduler::AssignRanksAndPublish() {
  // Per role: requested ranks first, the rest fill the gaps in arrival order.
  std::map<proto::Role, std::set<int32_t>> taken;
  for (auto& [id, n] : nodes_) {
    if (n.info.rank() < 0) continue;
    if (!taken[n.info.role()].insert(n.info.rank()).second)
      return AbortJob("two " + std::string(n.info.role() == proto::WORKER ? "workers" : "servers") +
                          " asked for rank " + std::to_string(n.info.rank()),
                      id);
  }
  std::map<proto::Role, int32_t> next;
  std::map<int32_t, int32_t> server_by_rank;
  for (auto& [id, n] : nodes_) {
    if (n.info.rank() < 0) {
      auto& used = taken[n.info.role()];
      int32_t& rank = next[n.info.role()];
      while (used.count(rank)) ++rank;
      n.info.set_rank(rank);
      used.insert(rank);
    }
    if (n.info.role() == proto::SERVER) server_by_rank[n.info.rank()] = id;
    n.last_seen = Clock::now();
  }
  std::vector<int32_t> server_ids;  // in rank order: placement is by server rank
  for (const auto& [rank, id] : server_by_rank) server_ids.push_back(id);
  placement_ = std::make_unique<KeyPlacement>(server_ids);
  proto::AddressBook book;
  book.set_heartbeat_interval_ms(settings_.heartbeat_interval_ms);
  book.set_heartbeat_timeout_ms(settings_.heartbeat_timeout_ms);
  proto::NodeInfo* self = book.add_nodes();
  self->set_id(kSchedulerId);
  self->set_role(ToWire(Role::kScheduler));
  for (auto& [id, n] : nodes_) *book.add_nodes() = n.info;
  published_ = true;
  for (auto& [id, n] : nodes_) {
    Message m = MakeMessage(proto::ADDRESS_BOOK, kSchedulerId);
    *m.header.mutable_address_book() = book;
    m.header.mutable_address_book()->set_your_id(id);
    if (keys_) m.header.mutable_address_book()->set_sealed_keys(SealedPeerKeys(id));
    SendTo(id, std::move(m));
  }
  SYNCLINE_LOG_INFO("all {} workers and {} servers registered; address book sent", settings_.num_workers,
                    settings_.num_servers);
}

std::string Scheduler::SealedPeerKeys(int32_t id) const {
  proto::PeerKeys keys;
  for (const auto& [peer, n] : nodes_) {
    if (peer == id) continue;
    const SecretKey key = PairKey(secret_, id, peer);
    proto::PeerKey* k = keys.add_keys();
    k->set_peer(peer);
    k->set_key(std::string(key.begin(), key.end()));
  }
  return Seal(NodeKey(JobKey(settings_.job_token), nodes_.at(id).nonce), keys.SerializeAsString());
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
  if (arrived.size() < members.size()) return;
  for (int32_t id : members) {
    Message release = MakeMessage(proto::BARRIER_RELEASE, kSchedulerId);
    *release.header.mutable_barrier() = b;
    SendTo(id, std::move(release));
  }
  barriers_.erase({b.group(), b.sequence()});
}

void Scheduler::OnDeclare(const Message& m) {
  const int32_t sender = m.header.sender();
  auto node = nodes_.find(sender);
  if (!published_ || node == nodes_.end() || node->second.info.role() != proto::WORKER) return;
  const proto::TensorSpec& spec = m.header.declare().spec();
  auto [it, fresh] = tensors_.try_emplace(spec.name());
  TensorEntry& t = it->second;
  if (fresh) {
    t.spec = spec;
    t.id = next_tensor_id_++;
    auto chunks = placement_->Place(t.id, spec);
    if (!chunks.ok())
      return AbortJob("tensor '" + spec.name() + "' declared by " + Describe(sender) + ": " + chunks.status().message(),
                      sender);
    if (total_chunks_ + chunks->size() > limits_.max_chunks)
      return AbortJob("tensor '" + spec.name() + "' declared by " + Describe(sender) + " (" + DescribeSpec(spec) +
                          ") would bring the job's chunks to " + std::to_string(total_chunks_ + chunks->size()) +
                          ", over the limit of " + std::to_string(limits_.max_chunks) +
                          ": use larger partitions (SYNCLINE_PARTITION_BYTES) or fewer tensors",
                      sender);
    total_chunks_ += chunks->size();
    t.chunks = std::move(chunks).value();
  } else if (!SameSpec(t.spec, spec)) {
    return AbortJob("mismatched declaration of tensor '" + spec.name() + "': " + Describe(sender) + " declared " +
                        DescribeSpec(spec) + ", but " + Describe(*t.declared_by.begin()) + " declared " +
                        DescribeSpec(t.spec),
                    sender);
  }
  t.declared_by.insert(sender);
  if (t.declared_by.size() < static_cast<size_t>(settings_.num_workers)) return;
  for (int32_t id : t.declared_by) {
    Message reply = MakeMessage(proto::DECLARE_REPLY, kSchedulerId);
    proto::DeclareReply* body = reply.header.mutable_declare_reply();
    body->set_tensor_id(t.id);
    for (const auto& c : t.chunks) *body->add_chunks() = c;
    body->set_name(spec.name());
    SendTo(id, std::move(reply));
  }
}

void Scheduler::OnFinish(const Message& m) {
  auto it = nodes_.find(m.header.sender());
  if (it == nodes_.end()) return;
  it->second.finished = true;
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
    done_cv_.notify_all();
  }
}

std::string Scheduler::MissingNodes() const {
  std::string missing;
  for (const proto::Role role : {proto::WORKER, proto::SERVER}) {
    const int32_t size = role == proto::WORKER ? settings_.num_workers : settings_.num_servers;
    // Ranks are known only where every registered node of the role asked for one.
    std::set<int32_t> ranks;
    bool all_requested = true;
    for (const auto& [id, n] : nodes_) {
      if (n.info.role() != role) continue;
      if (n.info.rank() < 0) all_requested = false;
      ranks.insert(n.info.rank());
    }
    if (!all_requested || static_cast<int32_t>(ranks.size()) >= size) continue;
    for (int32_t rank = 0; rank < size; ++rank)
      if (!ranks.count(rank))
        missing += std::string(missing.empty() ? "" : ", ") + (role == proto::WORKER ? "worker " : "server ") +
                   std::to_string(rank);
  }
  return missing.empty() ? "" : " (never registered: " + missing + ")";
}

std::string Scheduler::TensorOfKey(uint64_t key) const {
  for (const auto& [name, t] : tensors_)
    for (size_t i = 0; i < t.chunks.size(); ++i)
      if (t.chunks[i].key() == key)
        return " [tensor '" + name + "'" +
               (t.chunks.size() > 1 ? ", chunk " + std::to_string(i) + " of " + std::to_string(t.chunks.size()) : "") +
               "]";
  return " [key " + std::to_string(key) + "]";
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
  done_cv_.notify_all();
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
