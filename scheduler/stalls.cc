// The scheduler's view of stalled workers (worker/stall_watch.h): a worker
// none of whose push_pulls ended for the stall timeout says so, with how many
// push_pulls it started per tensor. Once every worker still in the job is
// stalled (or waits at a barrier), none can push what another waits for: the
// job ends, naming the tensors whose counts differ between workers, instead
// of waiting out the request timeout. While some worker is not waiting (it
// may be computing, or evaluating on its own), the scheduler only warns.
// Declarations wait the same way: a worker that declared a tensor the
// others never declare (they declared another at the same point) waits in
// it; once such waits are as old as the stall timeout and every other worker
// waits too, the job ends naming what each waits in.
#include <algorithm>
#include <map>
#include <set>
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

// "850 ms", "75 s".
std::string Elapsed(Millis waited) {
  const auto ms = waited.count();
  return ms < 10000 ? std::to_string(ms) + " ms" : std::to_string(ms / 1000) + " s";
}

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
  std::map<int, int32_t> stalled;  // rank -> node id, in rank order
  std::vector<int> at_barrier, busy;
  for (const auto& [id, n] : nodes_) {
    if (n.info.role() != proto::WORKER || n.finished) continue;
    if (stalled_.count(id))
      stalled[n.info.rank()] = id;
    else
      (AtBarrier(id) ? at_barrier : busy).push_back(n.info.rank());
  }
  if (stalled.empty()) return;
  std::vector<int> stalled_ranks;
  for (const auto& [rank, id] : stalled) stalled_ranks.push_back(rank);
  std::sort(at_barrier.begin(), at_barrier.end());
  std::sort(busy.begin(), busy.end());
  const int ms = settings_.stall_timeout_ms;
  const std::string waited = ms % 1000 ? std::to_string(ms) + " ms" : std::to_string(ms / 1000) + " s";
  if (!busy.empty()) {
    const bool one = busy.size() == 1;
    SYNCLINE_LOG_WARN_LIMITED("{} {} push_pulls in flight none of which ended for {} (tensor '{}'); {} {} not "
                              "waiting for any: if {} never make{} the push_pulls the others wait for, the job waits "
                              "until the request timeout (SYNCLINE_REQUEST_TIMEOUT_MS)",
                              Workers(stalled_ranks), stalled.size() == 1 ? "has" : "have", waited,
                              stalled_[stalled.begin()->second].waiting_for(), Workers(busy), one ? "is" : "are",
                              one ? "it" : "they", one ? "s" : "");
    return;
  }
  // Per tensor, each stalled worker's push_pull count (a tensor it never named: 0).
  std::map<std::string, std::map<int, uint64_t>> calls;  // tensor -> rank -> count
  for (const auto& [rank, id] : stalled)
    for (const proto::TensorCalls& c : stalled_[id].calls()) calls[c.tensor()][rank] = c.push_pulls();
  std::string differ;
  int32_t culprit = -1;
  int shown = 0;
  for (const auto& [tensor, by_rank] : calls) {
    std::map<uint64_t, std::vector<int>> by_count;  // count -> ranks, both ascending
    for (const auto& [rank, id] : stalled) {
      auto it = by_rank.find(rank);
      by_count[it == by_rank.end() ? 0 : it->second].push_back(rank);
    }
    if (by_count.size() < 2) continue;
    if (shown++ == 3) {
      differ += "; ...";
      break;
    }
    differ += std::string(differ.empty() ? "" : "; ") + "tensor '" + tensor + "':";
    for (const auto& [n, ranks] : by_count) {
      differ += " " + std::to_string(n) + " by " + Workers(ranks) + ",";
      // The one worker apart from all the others is the likely culprit.
      if (culprit < 0 && shown == 1 && ranks.size() == 1 && stalled.size() > 2) culprit = stalled.at(ranks[0]);
    }
    differ.pop_back();
  }
  std::string reason = "every worker waits for the others: no push_pull of " + Workers(stalled_ranks) +
                       " has ended for " + waited + " (SYNCLINE_STALL_TIMEOUT_MS)";
  if (!at_barrier.empty()) reason += ", and " + Workers(at_barrier) + " wait" + (at_barrier.size() == 1 ? "s" : "") + " at a barrier";
  if (!differ.empty()) {
    reason += ". They did not make the same push_pull calls (push_pulls per tensor: " + differ +
              "): every worker must make the same push_pull calls (the same tensors, as many times)";
  } else {
    reason += ", although they made the same push_pull calls (each waits for tensor";
    for (const auto& [rank, id] : stalled)
      reason += std::string(rank == stalled.begin()->first ? " " : ", ") + "'" + stalled_[id].waiting_for() +
                "' (worker " + std::to_string(rank) + ")";
    reason += "): a server may be stuck; see its log";
  }
  AbortJob(reason, culprit);
}

void Scheduler::CheckStuckDeclarations() {
  if (settings_.stall_timeout_ms <= 0) return;
  const auto now = Clock::now();
  const auto timeout = Millis(settings_.stall_timeout_ms);
  // Per waiting worker (by rank), the oldest declaration it waits in.
  struct Wait {
    int32_t id;
    Clock::time_point since;
    const std::string* name;
    const TensorEntry* tensor;
  };
  std::map<int, Wait> declaring;
  std::set<int32_t> just_declared;  // waiting less than the timeout: their wait may yet end
  for (const auto& [name, t] : tensors_)
    for (const auto& [id, since] : t.waiting_since) {
      const Node& n = nodes_.at(id);
      if (n.finished) continue;
      if (now - since < timeout) {
        just_declared.insert(id);
        continue;
      }
      auto [it, fresh] = declaring.try_emplace(n.info.rank(), Wait{id, since, &name, &t});
      if (!fresh && since < it->second.since) it->second = Wait{id, since, &name, &t};
    }
  if (declaring.empty()) return;
  std::vector<int> stalled, at_barrier, busy, finished;
  for (const auto& [id, n] : nodes_) {
    if (n.info.role() != proto::WORKER || declaring.count(n.info.rank())) continue;
    if (just_declared.count(id)) return;
    if (n.finished)
      finished.push_back(n.info.rank());
    else if (stalled_.count(id))
      stalled.push_back(n.info.rank());
    else if (AtBarrier(id))
      at_barrier.push_back(n.info.rank());
    else
      busy.push_back(n.info.rank());
  }
  // What each waits in (the first three), and who has not declared it.
  std::string waits;
  int shown = 0;
  for (const auto& [rank, wait] : declaring) {
    if (shown++ == 3) {
      waits += "; ...";
      break;
    }
    std::vector<int> missing;
    for (const auto& [id, n] : nodes_)
      if (n.info.role() == proto::WORKER && !wait.tensor->declared_by.count(id))
        missing.push_back(n.info.rank());
    std::sort(missing.begin(), missing.end());
    waits += std::string(waits.empty() ? "" : "; ") + "worker " + std::to_string(rank) + " has waited " +
             Elapsed(std::chrono::duration_cast<Millis>(now - wait.since)) + " in the declaration of tensor '" +
             *wait.name + "' (" + DescribeSpec(wait.tensor->spec) + ")" +
             (missing.empty() ? "" : ", which " + Workers(missing) + (missing.size() == 1 ? " has" : " have") +
                                         " not declared");
  }
  auto also = [](const std::vector<int>& ranks, const std::string& verb_one, const std::string& verb_many,
                 const std::string& what) {
    return ranks.empty() ? "" : "; " + Workers(ranks) + " " + (ranks.size() == 1 ? verb_one : verb_many) + what;
  };
  if (!busy.empty()) {
    if (now - declarations_warned_at_ < timeout) return;  // once per stall timeout, as stall notes come
    declarations_warned_at_ = now;
    SYNCLINE_LOG_WARN("{}; {} {} not waiting for anything: if {} never declare{} the same tensors, the job "
                              "waits until the request timeout (SYNCLINE_REQUEST_TIMEOUT_MS)",
                              waits, Workers(busy), busy.size() == 1 ? "is" : "are", busy.size() == 1 ? "it" : "they",
                              busy.size() == 1 ? "s" : "");
    return;
  }
  std::string reason = "workers wait in declarations the others do not make: " + waits +
                       also(stalled, "waits", "wait", " on push_pulls") +
                       also(at_barrier, "waits", "wait", " at a barrier") +
                       also(finished, "has", "have", " finished") +
                       ". Every worker must declare the same tensors in the same order (a tensor is declared at its "
                       "first push_pull; a push_pull without a name is named after its dtype and shape, or counted "
                       "where it is compressed or in a graph)";
  AbortJob(reason, declaring.size() == 1 ? declaring.begin()->second.id : -1);
}

}  // namespace syncline
