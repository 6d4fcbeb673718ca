#include "control/local_group.h"

#include <algorithm>
#include <map>

namespace syncline {

std::string HostKeyOf(const proto::NodeInfo& worker) {
  // Unknown identities never match: each gets a key of its own (no identity contains '#').
  if (worker.host_id().empty()) return "#unknown#" + std::to_string(worker.rank());
  return worker.host_id() + "#" + worker.host_label();
}

namespace {

// The job's worker hosts: each one's ranks (ascending) and its index, hosts
// numbered in order of their lowest worker rank.
struct Hosts {
  std::map<std::string, std::vector<int>> ranks;
  std::map<std::string, int> index;
};

Hosts HostsOf(const std::vector<proto::NodeInfo>& workers) {
  Hosts hosts;
  for (const auto& w : workers) hosts.ranks[HostKeyOf(w)].push_back(w.rank());
  std::vector<std::pair<int, std::string>> by_lowest;
  for (auto& [key, ranks] : hosts.ranks) {
    std::sort(ranks.begin(), ranks.end());
    by_lowest.emplace_back(ranks.front(), key);
  }
  std::sort(by_lowest.begin(), by_lowest.end());
  for (size_t i = 0; i < by_lowest.size(); ++i) hosts.index[by_lowest[i].second] = static_cast<int>(i);
  return hosts;
}

}  // namespace

Result<LocalGroup> LocalGroupOf(const std::vector<proto::NodeInfo>& workers, int my_rank) {
  const auto me = std::find_if(workers.begin(), workers.end(), [my_rank](const auto& w) { return w.rank() == my_rank; });
  if (me == workers.end()) return Internal("worker rank " + std::to_string(my_rank) + " is not in the address book");
  const std::string my_host = HostKeyOf(*me);
  Hosts hosts = HostsOf(workers);
  LocalGroup group;
  group.ranks = hosts.ranks[my_host];
  group.local_size = static_cast<int>(group.ranks.size());
  group.local_rank = static_cast<int>(std::find(group.ranks.begin(), group.ranks.end(), my_rank) - group.ranks.begin());
  group.num_hosts = static_cast<int>(hosts.ranks.size());
  group.host = hosts.index[my_host];
  return group;
}

Result<std::vector<int>> HostIndexByRank(const std::vector<proto::NodeInfo>& workers, int num_workers) {
  std::vector<int> host_of(std::max(num_workers, 0), -1);
  for (const auto& w : workers)
    if (w.rank() < 0 || w.rank() >= num_workers)
      return Internal("worker rank " + std::to_string(w.rank()) + " out of range [0, " + std::to_string(num_workers) +
                      ")");
  Hosts hosts = HostsOf(workers);
  for (const auto& w : workers) host_of[w.rank()] = hosts.index[HostKeyOf(w)];
  return host_of;
}

std::string LauncherDisagreement(const LocalGroup& group, bool given, int settings_local_rank,
                                 int settings_local_size) {
  if (!given || (settings_local_rank == group.local_rank && settings_local_size == group.local_size)) return "";
  return "SYNCLINE_LOCAL_RANK/_SIZE (or BYTEPS_LOCAL_*) say local rank " + std::to_string(settings_local_rank) +
         " of " + std::to_string(settings_local_size) + ", but registration puts this worker at local rank " +
         std::to_string(group.local_rank) + " of " + std::to_string(group.local_size) +
         " (the workers with its host identity and SYNCLINE_HOST_LABEL); local_rank() reports the "
         "launcher's, the host groups are registration's";
}

}  // namespace syncline
