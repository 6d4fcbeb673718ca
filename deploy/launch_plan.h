// Launch plans: which processes pslaunch starts, with which command line and
// which environment. Pure computation over options and the parent's
// environment snapshot, so the whole policy is unit-testable; the few helpers
// at the bottom touch the OS (free port, random token, own directory).
//
// Environment policy: a child inherits the parent's environment, minus every
// setting pslaunch sets for it and those settings' BytePS aliases (DMLC_*),
// plus `--env` assignments, plus pslaunch's own SYNCLINE_* values. Only the
// canonical SYNCLINE_* names are set. An `--env` naming a setting pslaunch sets
// is an error rather than a silent override.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "common/settings.h"
#include "common/status.h"
#include "deploy/process.h"

namespace syncline::deploy {

inline constexpr const char* kSchedulerBinary = "syncline-scheduler";
inline constexpr const char* kServerBinary = "syncline-server";

using EnvAssignment = std::pair<std::string, std::string>;

// One process as pslaunch will start it.
struct PlannedProcess {
  Role role = Role::kWorker;
  int rank = -1;      // workers: their rank; local servers: their index (label only); else -1
  std::string label;  // "worker 0", "server 1", "scheduler", or "worker" when the rank is not known
  ProcessSpec spec;   // argv and the complete environment
  // The job is finished when every primary process has exited 0; the others
  // (scheduler, servers of a local job) are then expected to exit by themselves.
  bool primary = false;
  // The inherited names pslaunch removed from `spec.env` (the settings it
  // controls and their BytePS aliases), for a launcher that sets up an
  // environment elsewhere (pslaunch --hosts, over ssh).
  std::vector<std::string> removed_env;
};

// What every process of a job agrees on.
struct JobShape {
  int num_workers = 1;
  int num_servers = 1;
  std::string scheduler_host = "127.0.0.1";
  int scheduler_port = 0;          // 1..65535
  std::string job_token;           // empty: not set by pslaunch (an inherited one is kept)
  std::string transport;           // empty: not set by pslaunch; else "tcp", "ipc" or "ucx"
  std::vector<EnvAssignment> extra_env;  // --env K=V, for every process
  // SYNCLINE_METRICS_PORT; 0 = not set by pslaunch. A local job gives its
  // processes consecutive ports from this one (MetricsPortOf); a multi-host
  // node uses it as is.
  int metrics_port = 0;
  // A local job's workers split into this many emulated hosts (contiguous
  // ranks, SYNCLINE_HOST_LABEL "emulated-host-H", local ranks within each);
  // 1: the one host they are on.
  int emulated_hosts = 1;
};

// Worker `rank`'s emulated host, local rank and local size in `shape`.
struct EmulatedPlace {
  int host = 0, local_rank = 0, local_size = 1;
};
EmulatedPlace EmulatedPlaceOf(const JobShape& shape, int rank);

// A local job's metrics port for the scheduler (index -1), server i or
// worker i: metrics_port, then the servers', then the workers' (0 if off).
int MetricsPortOf(const JobShape& shape, Role role, int index);

// Everything on one host: a scheduler, num_servers servers, num_workers copies
// of `command` (ranks 0..N-1).
struct LocalJob {
  JobShape shape;
  std::string bin_dir;  // where syncline-scheduler and syncline-server live
  std::vector<std::string> command;
};

// Scheduler first, then servers, then workers.
Result<std::vector<PlannedProcess>> PlanLocalJob(const LocalJob& job, const Environment& parent);

// One process of a multi-host job, or (workers) the workers of one host.
struct NodeJob {
  JobShape shape;
  Role role = Role::kWorker;
  int rank = -1;         // workers only; -1 = assigned by the scheduler
  std::string host;      // SYNCLINE_HOST: the address this node advertises; empty = not set
  std::string bin_dir;   // scheduler and server roles
  std::vector<std::string> command;  // worker role only (required there)
  // Workers only: this host runs `local_workers` copies of the command (as
  // torchrun's --nproc-per-node), worker node_rank * local_workers + i being
  // local rank i. Used by PlanNodeWorkers; PlanNode takes one process.
  int local_workers = 1;
  int node_rank = -1;
};

// The single process, marked primary: pslaunch exits with its status.
Result<PlannedProcess> PlanNode(const NodeJob& job, const Environment& parent);

// The `local_workers` workers of one host of a multi-host job (`pslaunch
// --role worker --local-workers L --node-rank I`), every one primary. Each
// gets its rank, SYNCLINE_LOCAL_RANK/_SIZE, and the metrics port plus its
// local rank (none inherited: they would all bind one port). An error
// unless role is kWorker, node_rank >= 0 and (node_rank + 1) * local_workers
// <= num_workers.
Result<std::vector<PlannedProcess>> PlanNodeWorkers(const NodeJob& job, const Environment& parent);

// "K=V" -> {K, V}. K must be a valid variable name; V may be empty.
Result<EnvAssignment> ParseEnvAssignment(const std::string& text);
// "host:port" or "[v6addr]:port" -> {host, port}.
Result<std::pair<std::string, int>> ParseHostPort(const std::string& text);

// A TCP port on `host` that was free a moment ago (bind to port 0, read it,
// close). Another process may take it before the scheduler binds it; the
// scheduler then fails to start and the job ends with its error.
Result<int> PickFreePort(const std::string& host);
// 128 random bits from the kernel, as 32 hex digits.
Result<std::string> NewJobToken();
// The directory holding the running executable (/proc/self/exe).
Result<std::string> ExecutableDir();

}  // namespace syncline::deploy
