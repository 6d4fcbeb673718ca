// LocalReducer (worker/local_reduce.h): the host's workers that will not send
// their parts (finished, at a barrier), the notices that say so, and ending
// the job or failing what waits here.
#include "common/logging.h"
#include "transport/wire.h"
#include "worker/local_reduce.h"
#include "worker/operation.h"

namespace syncline {

std::string LocalReducer::AbsenceLocked(int peer) const {
  if (finished_[peer]) return "finished";
  // At a barrier this worker passed already: released, on its way back.
  if (at_barrier_[peer] && *at_barrier_[peer] >= barriers_passed_) return "waits at a barrier";
  return "";
}

void LocalReducer::OnPeerAbsent(int local_rank, std::optional<uint64_t> barrier) {
  std::optional<std::pair<uint64_t, std::string>> orphaned;  // round, tensor
  std::string why;
  {
    MutexLock lock(mu_);
    if (barrier)
      at_barrier_[local_rank] = barrier;
    else
      finished_[local_rank] = true;
    why = AbsenceLocked(local_rank);
    if (why.empty()) return;
    for (const auto& [id, g] : gathering_)
      if (g.mine && !g.by_local_rank[local_rank] && !orphaned) orphaned.emplace(id.second, g.mine->op->tensor_name());
    for (const auto& [id, a] : awaiting_)
      if (a.owner == local_rank && !orphaned) orphaned.emplace(id.second, a.op->tensor_name());
  }
  if (orphaned) (void)ReportAbsentPeer(local_rank, why, orphaned->first, orphaned->second);
}

Status LocalReducer::ReportAbsentPeer(int peer, const std::string& why, uint64_t round, const std::string& tensor) {
  // The servers' wording (server/server.cc), for the same mistake.
  const std::string rule = why == "finished" ? "every worker must make the same push_pull calls (the same tensors, "
                                               "as many times)"
                                             : "every worker must make the same push_pull calls before a barrier";
  const std::string reason = "worker " + std::to_string(group_.ranks[peer]) + " " + why + " without pushing round " +
                             std::to_string(round) +
                             " of a tensor the other workers of its host push_pull (local reduce): " + rule +
                             " [tensor '" + tensor + "']";
  End(reason, peer);
  return Aborted(reason);
}

void LocalReducer::End(const std::string& why, int peer) {
  abort_(why, peer_ids_[peer]);
  FailAll(Aborted(why));
}

void LocalReducer::AnnounceFinished() {
  Announce(proto::LOCAL_FINISHED, 0);
  StopTakingParts();
}

void LocalReducer::StopTakingParts() {
  // This worker posts nothing more: parts of later rounds sent here wait for
  // nothing, and hold their senders' memory (an in-process transport's views).
  std::map<RoundKey, Gathering> dropped;
  {
    MutexLock lock(mu_);
    finished_self_ = true;
    dropped.swap(gathering_);
    early_ = 0;
  }
  // Chunks of this worker still gathering (a push_pull Shutdown gave up
  // waiting for) end now.
  for (auto& [id, g] : dropped)
    if (g.mine) g.mine->op->Fail(Aborted("worker shut down while its push_pull of tensor '" +
                                         g.mine->op->tensor_name() + "' waited for its host's other workers"));
}

void LocalReducer::AnnounceBarrier() {
  uint64_t barrier;
  {
    MutexLock lock(mu_);
    barrier = barriers_passed_;
  }
  Announce(proto::LOCAL_AT_BARRIER, barrier);
}

void LocalReducer::PassedBarrier() {
  MutexLock lock(mu_);
  ++barriers_passed_;
}

void LocalReducer::Announce(proto::Op op, uint64_t round) {
  // From the reducer's thread, after the sums it still has to pass on: this
  // worker's push_pulls are done, but another's may wait for those, and must
  // have them before it hears this worker is absent.
  auto send = [this, op, round] {
    for (int p = 0; p < group_.local_size; ++p) {
      if (p == group_.local_rank) continue;
      Message m = MakeMessage(op, control_->my_id());
      m.header.set_round(round);
      Status st = endpoint_->Send(peer_ids_[p], std::move(m), Deadline::AfterMs(request_timeout_ms_));
      if (!st.ok()) SYNCLINE_LOG_WARN("sending {} to {}: {}", proto::Op_Name(op), control_->Describe(peer_ids_[p]), st.message());
    }
  };
  // This worker's parts still queued go first (its push_pulls may have been
  // given up on, not finished).
  Status st = parts_.Drain(Deadline::AfterMs(request_timeout_ms_));
  if (st.ok()) st = thread_.Submit(0, send);
  if (st.ok()) st = thread_.Drain(Deadline::AfterMs(request_timeout_ms_));
  if (!st.ok()) SYNCLINE_LOG_WARN("sending {}: {}", proto::Op_Name(op), st.message());
}

void LocalReducer::FailAll(const Status& status) {
  std::map<RoundKey, Gathering> gathering;
  std::map<RoundKey, Awaiting> awaiting;
  {
    MutexLock lock(mu_);
    if (!failed_) failed_ = status;
    gathering.swap(gathering_);
    early_ = 0;
    awaiting.swap(awaiting_);
  }
  for (auto& [id, g] : gathering)
    if (g.mine) g.mine->op->Fail(status);
  for (auto& [id, a] : awaiting) a.op->Fail(status);
}

}  // namespace syncline
