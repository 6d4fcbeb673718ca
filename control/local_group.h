// LocalGroup: the workers of a job that share this worker's host, as the
// scheduler's address book says (each node registers its host identity,
// common/host_identity.h, and its SYNCLINE_HOST_LABEL), not as an
// environment variable claims. Within a group, local ranks follow the
// workers' ranks; hosts are numbered by their lowest worker rank. It is what
// local_rank() and local_size() report, and the unit of a hierarchical
// reduce: one copy of each gradient per group leaves the host.
//
// Thread-safety: a plain value, computed once after the job starts.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "syncline.pb.h"

namespace syncline {

struct LocalGroup {
  int local_rank = 0;      // this worker's index in `ranks`
  int local_size = 1;      // ranks.size()
  std::vector<int> ranks;  // the worker ranks on this host, ascending
  int host = 0;            // this host's index among the job's worker hosts
  int num_hosts = 1;
};

// The host a worker counts as on: its host identity and label. A worker whose
// identity is unknown (empty) is alone on a host of its own.
std::string HostKeyOf(const proto::NodeInfo& worker);

// The group of the worker of rank `my_rank` among `workers` (the address
// book's, SchedulerClient::NodesOf); an error if that rank is not there.
Result<LocalGroup> LocalGroupOf(const std::vector<proto::NodeInfo>& workers, int my_rank);

// Every worker's host index (as LocalGroup::host), by rank: entry r is
// worker r's, -1 where rank r is not among `workers`. One pass over the
// address book, for a server that needs every worker's host at once; an
// error for a rank outside [0, num_workers).
Result<std::vector<int>> HostIndexByRank(const std::vector<proto::NodeInfo>& workers, int num_workers);

// Where the launcher gave SYNCLINE_LOCAL_RANK / _SIZE (`given`) and they
// differ from `group`: a sentence saying both, for a warning; else "".
std::string LauncherDisagreement(const LocalGroup& group, bool given, int settings_local_rank,
                                 int settings_local_size);

}  // namespace syncline
