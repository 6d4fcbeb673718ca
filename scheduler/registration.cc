// The scheduler's rendezvous: nodes register (proving the job token when
// there is one), get their ranks, and receive the address book with the keys
// they share with every other node; at the startup timeout, who is missing.
#include <algorithm>
#include <set>

#include "common/log_limiter.h"
#include "common/logging.h"
#include "control/job_wide_settings.h"
#include "scheduler/scheduler.h"
#include "transport/wire.h"

namespace syncline {
namespace {

const auto kSendDeadline = Millis(2000);
// Registrations waiting for their challenge at most: this many per node of
// the job, plus a few.
constexpr size_t kChallengedPerNode = 2;
constexpr size_t kChallengedExtra = 16;

}  // namespace

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
  int32_t id;
  if (keys_) {
    // The token alone does not make a registration fresh: one recorded in an
    // earlier job with the same token proves it too. It must carry back the
    // challenge this scheduler sent to its nonce.
    if (r.challenge().empty()) return Challenge(m);
    auto it = challenged_.find(nonce);
    if (it == challenged_.end() || !SameSecret(r.challenge(), it->second.challenge)) {
      stale_registrations_.fetch_add(1, std::memory_order_relaxed);
      rejected_registrations_.Add();
      SYNCLINE_LOG_WARN_LIMITED("dropping a registration of a {} at {}: its challenge was not issued by this "
                                "scheduler (recorded in an earlier job with the same token, or replayed)",
                                proto::Role_Name(r.role()), r.address());
      return;
    }
    id = it->second.id;  // connected, and its key set, when challenged
    challenged_.erase(it);
  } else {
    id = next_id_++;
    if (Status st = endpoint_->Connect(id, r.address()); !st.ok()) return reject(st.message());
  }
  Node node;
  node.info.set_id(id);
  node.info.set_role(r.role());
  node.info.set_rank(r.requested_rank());
  node.info.set_address(r.address());
  node.info.set_hostname(r.hostname());
  node.info.set_host_id(r.host_id());
  node.info.set_host_label(r.host_label());
  node.info.set_pid(r.pid());
  node.info.set_shm(r.shm());
  node.last_seen = Clock::now();
  node.nonce = nonce;
  node.job_wide = r.job_wide();
  nodes_[id] = node;
  SYNCLINE_LOG_INFO("registered {} at {} as node {} ({} of {} workers, {} of {} servers)",
                    proto::Role_Name(r.role()), r.address(), id, CountRole(proto::WORKER), settings_.num_workers,
                    CountRole(proto::SERVER), settings_.num_servers);
  if (CountRole(proto::WORKER) == static_cast<size_t>(settings_.num_workers) &&
      CountRole(proto::SERVER) == static_cast<size_t>(settings_.num_servers))
    AssignRanksAndPublish();
}

void Scheduler::Challenge(const Message& m) {
  const std::string& nonce = m.header.auth().nonce();
  auto it = challenged_.find(nonce);
  if (it == challenged_.end()) {
    // Each entry is a connection to the address a token holder named; a
    // replay of many recorded registrations cannot make more than this.
    const size_t limit = kChallengedPerNode * (settings_.num_workers + settings_.num_servers) + kChallengedExtra;
    if (challenged_.size() >= limit) {
      rejected_registrations_.Add();
      SYNCLINE_LOG_WARN_LIMITED("dropping a registration from {}: {} registrations already wait for their challenge",
                                m.header.register_body().address(), challenged_.size());
      return;
    }
    const int32_t id = next_id_++;
    keys_->SetPeerKey(id, NodeKey(JobKey(settings_.job_token), nonce));
    if (Status st = endpoint_->Connect(id, m.header.register_body().address()); !st.ok()) {
      rejected_registrations_.Add();
      SYNCLINE_LOG_WARN_LIMITED("cannot answer a registration from {}: {}", m.header.register_body().address(),
                                st.message());
      return;
    }
    it = challenged_.emplace(nonce, Challenged{id, RandomBytes(kRegistrationChallengeBytes)}).first;
  }
  Message challenge = MakeMessage(proto::REGISTER_CHALLENGE, kSchedulerId);
  challenge.header.mutable_register_body()->set_challenge(it->second.challenge);
  SendTo(it->second.id, std::move(challenge));
}

void Scheduler::AssignRanksAndPublish() {
  // Nodes that synchronize differently would deadlock or train on different
  // rules: the job ends before it starts, naming the node and the setting.
  // Checked once all are registered, so that every node hears why.
  // Where every node agrees and only the scheduler differs (started apart,
  // without the setting), the scheduler is the one named.
  const proto::JobWideSettings job_wide = JobWideSettingsOf(settings_);
  const proto::JobWideSettings& first = nodes_.begin()->second.job_wide;
  const bool nodes_agree = std::all_of(nodes_.begin(), nodes_.end(), [&](const auto& kv) {
    return JobWideDifference(first, kv.second.job_wide).empty();
  });
  if (std::string difference = JobWideDifference(first, job_wide); nodes_agree && !difference.empty())
    return AbortJob("the scheduler has " + difference + " (every worker and server): every node of a job needs the same",
                    -1);
  for (const auto& [id, n] : nodes_)
    if (std::string difference = JobWideDifference(job_wide, n.job_wide); !difference.empty())
      return AbortJob(Describe(id) + " has " + difference + ": every node of a job needs the same", id);
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
  self->set_role(proto::SCHEDULER);
  for (auto& [id, n] : nodes_) *book.add_nodes() = n.info;
  published_ = true;
  std::vector<std::pair<int32_t, Message>> books;
  for (auto& [id, n] : nodes_) {
    Message m = MakeMessage(proto::ADDRESS_BOOK, kSchedulerId);
    *m.header.mutable_address_book() = book;
    m.header.mutable_address_book()->set_your_id(id);
    if (keys_) m.header.mutable_address_book()->set_sealed_keys(SealedPeerKeys(id));
    // A header over the limit would be dropped by its receiver, leaving the
    // job to its startup timeout: say so now instead.
    const size_t bytes = m.header.ByteSizeLong() + 64;  // + the auth stamp
    if (bytes > kMaxHeaderBytes)
      return AbortJob("the job's address book (" + std::to_string(nodes_.size()) + " nodes) is " +
                          std::to_string(bytes) + " bytes, over the " + std::to_string(kMaxHeaderBytes) +
                          "-byte header limit: run fewer workers and servers per job",
                      -1);
    books.emplace_back(id, std::move(m));
  }
  // Every node of the job has its key now: a message naming any other id is
  // refused from here on, and what was held for such ids is dropped.
  if (keys_) keys_->MarkComplete();
  for (auto& [id, m] : books) SendTo(id, std::move(m));
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


}  // namespace syncline
