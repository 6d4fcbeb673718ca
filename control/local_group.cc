#include "control/local_group.h"

#include <algorithm>
#include <map>

namespace syncline {

std::string HostKeyOf(const proto::NodeInfo& worker) {
  // Unknown identities never match: each gets a key of its own (no identity contains '#').
  if (worker.host_id().empty()) return "#unknown#" + std::to_string(worker.rank());
  return worker.host_id() + "#" + worker.host_label();
}

Result<LocalGroup> LocalGroupOf(const std::vector<proto::NodeInfo>& workers, int my_rank) {
  std::map<std::string, std::vector<int>> ranks_by_host;
  std::string my_host;
  bool found = false;
  for (const auto& w : workers) {
    const std::string key = HostKeyOf(w);
    ranks_by_host[key].push_back(w.rank());
    if (w.rank() == my_rank) {
      my_host = key;
      found = true;
    }
  }
  if (!found) return Internal("worker rank " + std::to_string(my_rank) + " is not in the address book");
  // Hosts in order of their lowest worker rank.
  std::vector<std::pair<int, std::string>> hosts;
  for (auto& [key, ranks] : ranks_by_host) {
    std::sort(ranks.begin(), ranks.end());
    hosts.emplace_back(ranks.front(), key);
  }
  std::sort(hosts.begin(), hosts.end());
  LocalGroup group;
  group.ranks = ranks_by_host[my_host];
  group.local_size = static_cast<int>(group.ranks.size());
  group.local_rank = static_cast<int>(std::find(group.ranks.begin(), group.ranks.end(), my_rank) - group.ranks.begin());
  group.num_hosts = static_cast<int>(hosts.size());
  for (size_t i = 0; i < hosts.size(); ++i)
    if (hosts[i].second == my_host) group.host = static_cast<int>(i);
  return group;
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
