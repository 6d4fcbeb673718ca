// The scheduler's view of stalled workers (worker/stall_watch.h): a worker
// none of whose push_pulls ended for the stall timeout says so, with how many
// push_pulls it started per tensor. Once every worker still in the job is
// stalled (or waits at a barrier), none can push what another waits for: the
// job ends, naming the tensors whose counts differ between workers, instead
// of waiting out the request timeout. While some worker is not waiting (it
// may be computing, or evaluating on its own), the scheduler only warns.
#include <algorithm>
#include <map>
#include <vector>

#include "common/log_limiter.h"
#include "common/logging.h"
#include "scheduler/scheduler.h"

namespace syncline {
namespace {

// "worker 2", "workers 0 and 1", "workers 0, 1 and 3".
std::string Workers(const std::vector<int>& ranks) {
  std::string out = ranks.size() == 1 ? "worker " : "workers ";
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i > 0) out += i + 1 == ranks.size() ? " and " : ", ";
    out += std::to_string(ranks[i]);
  }
  return out;
}

// Per tensor: the push_pull counts of the stalled workers, with who made each.
using CallCounts = std::map<std::string, std::map<uint64_t, std::vector<int>>>;

}  // namespace

void Scheduler::OnWorkerStalled(const Message& m) {
  const int32_t sender = m.header.sender();
  auto node = nodes_.find(sender);
  if (!published_ || node == nodes_.end() || node->second.info.role() != proto::WORKER) return;
  const proto::WorkerStalled& note = m.header.worker_stalled();
  if (!note.stalled()) {
    stalled_.erase(sender);
    return;
  }
  // Only tensors the job declared, each once: a note holds nothing else.
  std::set<std::string> seen;
  for (const proto::TensorCalls& c : note.calls())
    if (!tensors_.count(c.tensor()) || !seen.insert(c.tensor()).second) {
      unexpected_messages_.Add();
      SYNCLINE_LOG_WARN_LIMITED("ignoring a stall note from {}: it counts tensor '{}' twice or undeclared",
                                Describe(sender), c.tensor());
      return;
    }
  if (!tensors_.count(note.waiting_for())) return unexpected_messages_.Add();
  stalled_[sender] = note;
  CheckStalledJob();
}

bool Scheduler::AtBarrier(int32_t id) const {
  for (const auto& [barrier, arrived] : barriers_)
    if (arrived.count(id)) return true;
  return false;
}

void Scheduler::CheckStalledJob() {
  std::map<int, int32_t> stalled_by_rank;  // rank -> node id
  std::vector<int> stalled, at_barrier, busy;
  std::vector<int32_t> stalled_ids;
  for (const auto& [id, n] : nodes_) {
    if (n.info.role() != proto::WORKER || n.finished) continue;
    if (stalled_.count(id))
      stalled_by_rank[n.info.rank()] = id;
    else
      (AtBarrier(id) ? at_barrier : busy).push_back(n.info.rank());
  }
  if (stalled_by_rank.empty()) return;
  for (const auto& [rank, id] : stalled_by_rank) {
    stalled.push_back(rank);
    stalled_ids.push_back(id);
  }
  std::sort(at_barrier.begin(), at_barrier.end());
  std::sort(busy.begin(), busy.end());
  const int ms = settings_.stall_timeout_ms;
  const std::string waited = ms % 1000 ? std::to_string(ms) + " ms" : std::to_string(ms / 1000) + " s";
  if (!busy.empty()) {
    const bool one = busy.size() == 1;
    SYNCLINE_LOG_WARN_LIMITED("{} {} push_pulls in flight none of which ended for {} (tensor '{}'); {} {} not "
                              "waiting for any: if {} never make{} the push_pulls the others wait for, the job waits "
                              "until the request timeout (SYNCLINE_REQUEST_TIMEOUT_MS)",
                              Workers(stalled), stalled.size() == 1 ? "has" : "have", waited,
                              stalled_[stalled_ids.front()].waiting_for(), Workers(busy), one ? "is" : "are",
                              one ? "it" : "they", one ? "s" : "");
    return;
  }
  CallCounts counts;
  for (size_t i = 0; i < stalled_ids.size(); ++i)
    for (const proto::TensorCalls& c : stalled_[stalled_ids[i]].calls()) counts[c.tensor()][c.push_pulls()].push_back(stalled[i]);
  std::string differ;
  int32_t culprit = -1;
  int shown = 0;
  for (auto& [tensor, by_count] : counts) {
    // A stalled worker that never push_pulled the tensor made 0 calls of it.
    std::vector<int> listed;
    for (const auto& [n, ranks] : by_count) listed.insert(listed.end(), ranks.begin(), ranks.end());
    for (int r : stalled)
      if (std::find(listed.begin(), listed.end(), r) == listed.end()) by_count[0].push_back(r);
    if (by_count.size() < 2) continue;
    if (shown++ == 3) {
      differ += "; ...";
      break;
    }
    differ += std::string(differ.empty() ? "" : "; ") + "tensor '" + tensor + "':";
    for (auto& [n, ranks] : by_count) {
      std::sort(ranks.begin(), ranks.end());
      differ += " " + std::to_string(n) + " by " + Workers(ranks) + ",";
      // The one worker apart from all the others is the likely culprit.
      if (culprit < 0 && shown == 1 && ranks.size() == 1 && stalled.size() > 2)
        for (size_t i = 0; i < stalled.size(); ++i)
          if (stalled[i] == ranks[0]) culprit = stalled_ids[i];
    }
    differ.pop_back();
  }
  std::string reason = "every worker waits for the others: no push_pull of " + Workers(stalled) + " has ended for " +
                       waited + " (SYNCLINE_STALL_TIMEOUT_MS)";
  if (!at_barrier.empty()) reason += ", and " + Workers(at_barrier) + " wait" + (at_barrier.size() == 1 ? "s" : "") + " at a barrier";
  if (!differ.empty()) {
    reason += ". They did not make the same push_pull calls (push_pulls per tensor: " + differ +
              "): every worker must make the same push_pull calls (the same tensors, as many times)";
  } else {
    reason += ", although they made the same push_pull calls (each waits for tensor";
    for (size_t i = 0; i < stalled_ids.size(); ++i)
      reason += std::string(i ? ", " : " ") + "'" + stalled_[stalled_ids[i]].waiting_for() + "' (worker " +
                std::to_string(stalled[i]) + ")";
    reason += "): a server may be stuck; see its log";
  }
  AbortJob(reason, culprit);
}

}  // namespace syncline
