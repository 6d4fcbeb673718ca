#include "control/client.h"

#include <unistd.h>

#include <algorithm>

#include "common/host_identity.h"
#include "common/log_limiter.h"
#include "common/logging.h"
#include "control/job_wide_settings.h"
#include "transport/factory.h"
#include "transport/reachability.h"
#include "transport/wire.h"

namespace syncline {
namespace {
const auto kSendDeadline = Millis(5000);
const auto kStartupReportEvery = Millis(10000);
constexpr int kStartupGraceMs = 2000;

std::string Hostname() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "";
  return name;
}
}  // namespace

SchedulerClient::SchedulerClient(const Settings& settings, Role role, Endpoint* endpoint,
                                 std::string scheduler_address, KeyRing* keys)
    : settings_(settings),
      role_(role),
      scheduler_address_(scheduler_address.empty() ? settings.SchedulerAddress() : std::move(scheduler_address)),
      endpoint_(endpoint),
      keys_(keys) {}

SchedulerClient::~SchedulerClient() {
  stop_ = true;
  {
    // Under the lock: a waiter that just found stop_ false is then already
    // waiting, and this wakes it.
    MutexLock lock(mu_);
    cv_.NotifyAll();
  }
  if (heartbeat_thread_.joinable()) heartbeat_thread_.join();
}

Status SchedulerClient::Join(const std::string& my_address, bool shm) {
  {
    MutexLock lock(mu_);
    my_address_ = my_address;
  }
  if (!settings_.job_token.empty() && keys_ == nullptr)
    return FailedPrecondition("a job with a token needs an authenticated endpoint (control/authenticated_endpoint.h)");
  if (keys_ != nullptr) {
    // The token is proven, never sent: the registration and everything after
    // it carry MACs under a key derived from the token and a fresh nonce.
    const std::string nonce = RandomBytes(kRegistrationNonceBytes);
    scheduler_key_ = NodeKey(JobKey(settings_.job_token), nonce);
    keys_->SetOwnNonce(nonce);
    keys_->SetPeerKey(kSchedulerPeer, scheduler_key_);
  }
  // Encrypted: the scheduler's CURVE key derives from the token.
  SYNCLINE_RETURN_IF_ERROR(endpoint_->Connect(
      kSchedulerPeer, settings_.encrypt ? WithCurveKey(scheduler_address_, SchedulerCurvePublicKey(JobKey(settings_.job_token)))
                                        : scheduler_address_));
  Message reg = MakeMessage(proto::REGISTER, -1);
  proto::Register* body = reg.header.mutable_register_body();
  body->set_role(role_ == Role::kServer ? proto::SERVER : proto::WORKER);
  body->set_address(my_address);
  body->set_requested_rank(role_ == Role::kWorker   ? settings_.worker_rank
                           : role_ == Role::kServer ? settings_.server_rank
                                                    : -1);
  body->set_hostname(Hostname());
  body->set_host_id(HostIdentity());
  body->set_host_label(settings_.host_label);
  body->set_pid(getpid());
  body->set_shm(shm);
  *body->mutable_job_wide() = JobWideSettingsOf(settings_);
  if (keys_ != nullptr) {
    // This first REGISTER asks for the scheduler's challenge; the node joins
    // with a second one that carries it back (Handle: REGISTER_CHALLENGE).
    MutexLock lock(mu_);
    registration_ = *body;
  }
  SYNCLINE_RETURN_IF_ERROR(Send(std::move(reg)));
  SYNCLINE_RETURN_IF_ERROR(WaitForJobStart());
  heartbeat_thread_ = std::thread([this] { HeartbeatLoop(); });
  return Status::Ok();
}

Status SchedulerClient::WaitForJobStart() {
  // A little longer than the scheduler waits for registrations: when a node
  // is missing, the scheduler's abort, which names it, arrives first.
  const Deadline deadline = Deadline::AfterMs(settings_.startup_timeout_ms + kStartupGraceMs);
  const std::string what = "waiting for the scheduler at " + scheduler_address_ + " to start the job";
  const auto beat = Millis(std::max(1, settings_.heartbeat_interval_ms));
  auto next_report = Clock::now() + kStartupReportEvery;
  MutexLock lock(mu_);
  for (;;) {
    // Waited in slices. With a token, the node heartbeats the scheduler
    // meanwhile (naming its registration nonce): its answers tell a scheduler
    // waiting for other nodes from one that stopped. Every report interval,
    // whether its address accepts connections at all tells a scheduler that
    // is not there (or not yet).
    const Deadline slice(std::min({deadline.at(), Clock::now() + beat, next_report}));
    Status st = WaitLocked(slice, what, [&]() REQUIRES(mu_) { return book_.has_value(); });
    if (st.ok()) break;
    if (st.code() != StatusCode::kDeadlineExceeded) return st;
    if (!deadline.Expired() && Clock::now() < next_report) {
      if (keys_ == nullptr) continue;
      lock.Unlock();
      (void)Send(MakeMessage(proto::HEARTBEAT, -1));
      lock.Lock();
      continue;
    }
    next_report = Clock::now() + kStartupReportEvery;
    lock.Unlock();
    const std::string reachability = DescribeReachability(scheduler_address_);
    lock.Lock();
    if (book_.has_value()) break;
    const bool answers = keys_ != nullptr && last_heard_ != Clock::time_point{} &&
                         Clock::now() - last_heard_ < Millis(settings_.heartbeat_timeout_ms);
    const std::string probe = answers              ? " (it answers this node)"
                              : reachability.empty() ? ""
                                                     : " (its address: " + reachability + ")";
    if (deadline.Expired()) {
      std::string cause =
          answers ? ": not every worker and server registered (the scheduler's log names those that did)"
          : reachability != "accepts connections"
              ? ": check that it runs and that SYNCLINE_SCHEDULER_ADDRESS/SYNCLINE_SCHEDULER_PORT (or "
                "DMLC_PS_ROOT_URI/DMLC_PS_ROOT_PORT) name it"
          : keys_ != nullptr ? ": it accepts connections but has not answered this node (stopped or overloaded?)"
                             : ": not every worker and server registered (the scheduler's log names those that did)";
      if (keys_ != nullptr && !answers)
        cause += "; a node whose SYNCLINE_JOB_TOKEN (or SYNCLINE_ENCRYPT) differs from the scheduler's is not heard "
                 "at all, so check that this node has the job's settings";
      return DeadlineExceeded("the scheduler at " + scheduler_address_ + " did not start the job within " +
                              std::to_string(settings_.startup_timeout_ms) + " ms" + probe + cause);
    }
    SYNCLINE_LOG_WARN("no word yet from the scheduler at {}{}; waiting up to {} s more", scheduler_address_, probe,
                      deadline.RemainingMs() / 1000);
  }
  last_heard_ = Clock::now();
  return Status::Ok();
}

bool SchedulerClient::Handle(const Message& m) {
  const proto::Header& h = m.header;
  switch (h.op()) {
    case proto::ADDRESS_BOOK: case proto::HEARTBEAT_ACK: case proto::BARRIER_RELEASE: case proto::DECLARE_REPLY:
    case proto::SHUTDOWN: case proto::ABORT: case proto::WORKER_FINISHED: case proto::WORKER_AT_BARRIER:
    case proto::PLACEMENT: case proto::REGISTER_CHALLENGE:
      if (h.sender() != kSchedulerPeer) {
        SYNCLINE_LOG_WARN_LIMITED("ignoring {} from node {}: only the scheduler sends it", proto::Op_Name(h.op()), h.sender());
        return true;
      }
      break;
    default: return false;
  }
  MutexLock lock(mu_);
  last_heard_ = Clock::now();
  switch (h.op()) {
    case proto::ADDRESS_BOOK:
      if (book_) break;  // the first one counts
      if (keys_ != nullptr && !InstallPeerKeys(h.address_book())) {
        lock.Unlock();
        MarkAborted("the address book's keys could not be opened with this node's key");
        return true;
      }
      book_ = h.address_book();
      book_->clear_sealed_keys();
      my_id_ = book_->your_id();
      for (const auto& n : book_->nodes())
        if (n.id() == my_id_) my_rank_ = n.rank();
      break;
    case proto::HEARTBEAT_ACK: break;
    case proto::REGISTER_CHALLENGE: {
      // Answered once: the scheduler refuses a second registration of a nonce.
      if (!registration_ || book_) return true;
      Message reg = MakeMessage(proto::REGISTER, -1);
      *reg.header.mutable_register_body() = std::move(*registration_);
      registration_.reset();
      reg.header.mutable_register_body()->set_challenge(h.register_body().challenge());
      lock.Unlock();
      if (Status st = Send(std::move(reg)); !st.ok()) SYNCLINE_LOG_WARN("answering the scheduler's challenge: {}", st.message());
      return true;
    }
    case proto::BARRIER_RELEASE: released_[{h.barrier().group(), h.barrier().sequence()}] = true; break;
    case proto::DECLARE_REPLY: declared_[h.declare_reply().name()] = h.declare_reply(); break;
    case proto::SHUTDOWN: shutdown_ = true; break;
    case proto::WORKER_FINISHED: {
      auto handler = worker_finished_handler_;
      lock.Unlock();
      if (handler) handler(h.worker_finished().rank());
      return true;
    }
    case proto::PLACEMENT: {
      auto handler = placement_handler_;
      lock.Unlock();
      if (handler) handler(h.declare_reply());
      Message ack = MakeMessage(proto::PLACEMENT_ACK, my_id_);
      ack.header.set_request_id(h.declare_reply().tensor_id());
      (void)Send(std::move(ack));
      return true;
    }
    case proto::WORKER_AT_BARRIER: {
      auto handler = worker_at_barrier_handler_;
      lock.Unlock();
      if (handler) handler(h.worker_at_barrier());
      return true;
    }
    case proto::ABORT:
      lock.Unlock();
      MarkAborted(h.abort().reason());
      return true;
    default: return false;
  }
  cv_.NotifyAll();
  return true;
}

std::vector<proto::NodeInfo> SchedulerClient::NodesOf(proto::Role role) const {
  MutexLock lock(mu_);
  std::vector<proto::NodeInfo> out;
  if (!book_) return out;
  for (const auto& n : book_->nodes())
    if (n.role() == role) out.push_back(n);
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.rank() < b.rank(); });
  return out;
}

std::string SchedulerClient::Describe(int32_t id) const {
  MutexLock lock(mu_);
  if (book_)
    for (const auto& n : book_->nodes())
      if (n.id() == id)
        return (n.role() == proto::SERVER ? "server " : n.role() == proto::WORKER ? "worker " : "scheduler ") +
               std::to_string(n.rank()) + " (node " + std::to_string(id) + " at " + n.address() + ")";
  return "node " + std::to_string(id);
}

Status SchedulerClient::Barrier(proto::Role group, Deadline deadline) {
  Message m = MakeMessage(proto::BARRIER, my_id_);
  uint64_t sequence;
  {
    MutexLock lock(mu_);
    sequence = barrier_sequence_[group]++;
  }
  m.header.mutable_barrier()->set_group(group);
  m.header.mutable_barrier()->set_sequence(sequence);
  SYNCLINE_RETURN_IF_ERROR(Send(std::move(m)));
  MutexLock lock(mu_);
  const std::pair<int, uint64_t> key{group, sequence};
  Status st = WaitLocked(deadline, "waiting at barrier " + std::to_string(sequence),
                         [&]() REQUIRES(mu_) { return released_.count(key) > 0; });
  released_.erase(key);
  return st;
}

Result<proto::DeclareReply> SchedulerClient::Declare(const proto::TensorSpec& spec, Deadline deadline) {
  Message m = MakeMessage(proto::DECLARE, my_id_);
  *m.header.mutable_declare()->mutable_spec() = spec;
  SYNCLINE_RETURN_IF_ERROR(Send(std::move(m)));
  MutexLock lock(mu_);
  SYNCLINE_RETURN_IF_ERROR(WaitLocked(deadline, "waiting for every worker to declare '" + spec.name() + "'",
                                      [&]() REQUIRES(mu_) { return declared_.count(spec.name()) > 0; }));
  proto::DeclareReply reply = std::move(declared_[spec.name()]);
  declared_.erase(spec.name());
  return reply;
}

Status SchedulerClient::Finish() { return Send(MakeMessage(proto::FINISH, my_id_)); }

Status SchedulerClient::WaitForShutdown(Deadline deadline) {
  MutexLock lock(mu_);
  return WaitLocked(deadline, "waiting for the job to finish", [&]() REQUIRES(mu_) { return shutdown_; });
}

void SchedulerClient::Abort(const std::string& reason, int32_t culprit, std::optional<uint64_t> key) {
  Message m = MakeMessage(proto::ABORT, my_id_);
  m.header.mutable_abort()->set_reason(reason);
  m.header.mutable_abort()->set_culprit(culprit);
  if (key) m.header.mutable_abort()->set_key(*key);
  {
    MutexLock lock(mu_);
    m.header.mutable_abort()->set_address(my_address_);
  }
  (void)Send(std::move(m));
  MarkAborted(reason);
}

Status SchedulerClient::health() const {
  MutexLock lock(mu_);
  return aborted_ ? *aborted_ : Status::Ok();
}

void SchedulerClient::SetWorkerFinishedHandler(std::function<void(int rank)> handler) {
  MutexLock lock(mu_);
  worker_finished_handler_ = std::move(handler);
}

void SchedulerClient::SetWorkerAtBarrierHandler(std::function<void(const proto::WorkerAtBarrier&)> handler) {
  MutexLock lock(mu_);
  worker_at_barrier_handler_ = std::move(handler);
}

void SchedulerClient::SetPlacementHandler(std::function<void(const proto::DeclareReply&)> handler) {
  MutexLock lock(mu_);
  placement_handler_ = std::move(handler);
}

void SchedulerClient::SetAbortHandler(std::function<void(const Status&)> handler) {
  MutexLock lock(mu_);
  abort_handler_ = std::move(handler);
}

void SchedulerClient::HeartbeatLoop() {
  const auto interval = Millis(settings_.heartbeat_interval_ms);
  MutexLock lock(mu_);
  while (!stop_ && !aborted_) {
    cv_.WaitUntil(mu_, Deadline::After(interval), [&]() REQUIRES(mu_) { return stop_.load() || aborted_.has_value(); });
    if (stop_ || aborted_) return;
    const auto silent = std::chrono::duration_cast<Millis>(Clock::now() - last_heard_).count();
    if (silent > settings_.heartbeat_timeout_ms) {
      lock.Unlock();
      MarkAborted("lost contact with the scheduler at " + scheduler_address_ + ": nothing heard for " +
                  std::to_string(silent) + " ms");
      return;
    }
    lock.Unlock();
    (void)Send(MakeMessage(proto::HEARTBEAT, my_id_));
    lock.Lock();
  }
}

bool SchedulerClient::InstallPeerKeys(const proto::AddressBook& book) {
  auto plain = Open(scheduler_key_, book.sealed_keys());
  proto::PeerKeys peer_keys;
  if (!plain.ok() || !peer_keys.ParseFromString(*plain)) return false;
  for (const proto::PeerKey& k : peer_keys.keys()) {
    SecretKey key;
    if (k.key().size() != key.size() || k.peer() == kSchedulerPeer) return false;
    std::copy(k.key().begin(), k.key().end(), key.begin());
    keys_->SetPeerKey(k.peer(), key);
  }
  keys_->MarkComplete();
  return true;
}

void SchedulerClient::MarkAborted(const std::string& reason) {
  std::function<void(const Status&)> handler;
  Status status = Aborted(reason);
  {
    MutexLock lock(mu_);
    if (aborted_) return;
    aborted_ = status;
    handler = abort_handler_;
    cv_.NotifyAll();
  }
  SYNCLINE_LOG_ERROR("job aborted: {}", reason);
  if (handler) handler(status);
}

Status SchedulerClient::Send(Message m) {
  Status st = endpoint_->Send(kSchedulerPeer, std::move(m), Deadline::After(kSendDeadline));
  if (st.ok()) return st;
  // An abort closes the endpoint; a send that lost that race reports the
  // abort's reason, not "endpoint closed".
  Status cause = health();
  return cause.ok() ? st : cause;
}

Status SchedulerClient::WaitLocked(Deadline deadline, const std::string& what, const std::function<bool()>& ready) {
  cv_.WaitUntil(mu_, deadline, [&]() REQUIRES(mu_) { return ready() || aborted_.has_value() || stop_.load(); });
  if (aborted_) return *aborted_;
  if (ready()) return Status::Ok();
  if (stop_) return Aborted("client stopped while " + what);
  return DeadlineExceeded(what);
}

}  // namespace syncline
