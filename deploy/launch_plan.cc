#include "deploy/launch_plan.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <climits>
#include <optional>

namespace syncline::deploy {

EmulatedPlace EmulatedPlaceOf(const JobShape& shape, int rank) {
  const int hosts = std::max(1, std::min(shape.emulated_hosts, shape.num_workers));
  EmulatedPlace place;
  // Host h holds ranks [h * N / H, (h + 1) * N / H): sizes differ by one at most.
  auto first = [&](int h) { return static_cast<int>(int64_t{h} * shape.num_workers / hosts); };
  while (place.host + 1 < hosts && rank >= first(place.host + 1)) ++place.host;
  place.local_rank = rank - first(place.host);
  place.local_size = first(place.host + 1) - first(place.host);
  return place;
}

namespace {

// The settings pslaunch sets for one process, and the inherited names it
// removes first (the same settings and their BytePS aliases).
struct EnvPlan {
  std::vector<EnvAssignment> set;
  std::vector<std::string> strip;
  std::vector<EnvAssignment> refusals;  // name -> why --env may not set it, where more specific

  void Set(const std::string& name, const char* alias, std::string value) {
    Strip(name, alias);
    set.emplace_back(name, std::move(value));
  }
  // Removes an inherited value; `why`: the reason an --env of it is refused.
  void Strip(const std::string& name, const char* alias, const char* why = nullptr) {
    if (why != nullptr) refusals.emplace_back(name, why);
    strip.push_back(name);
    if (alias != nullptr) strip.emplace_back(alias);
  }
  bool Controls(const std::string& name) const {
    return std::find(strip.begin(), strip.end(), name) != strip.end();
  }
};

Status ValidateShape(const JobShape& s) {
  if (s.num_workers < 1 || s.num_workers > 65535)
    return InvalidArgument("the number of workers must be in [1, 65535], got " + std::to_string(s.num_workers));
  if (s.num_servers < 1 || s.num_servers > 65535)
    return InvalidArgument("the number of servers must be in [1, 65535], got " + std::to_string(s.num_servers));
  if (s.scheduler_host.empty()) return InvalidArgument("the scheduler host is empty");
  if (s.scheduler_port < 1 || s.scheduler_port > 65535)
    return InvalidArgument("the scheduler port must be in [1, 65535], got " + std::to_string(s.scheduler_port));
  if (!s.transport.empty() && s.transport != "tcp" && s.transport != "ipc" && s.transport != "ucx")
    return InvalidArgument("unknown transport '" + s.transport + "' (expected tcp, ipc or ucx)");
  if (s.metrics_port < 0 || s.metrics_port > 65535)
    return InvalidArgument("the metrics port must be in [1, 65535], got " + std::to_string(s.metrics_port));
  return Status::Ok();
}

// Where one process runs among those pslaunch starts on this host.
struct HostShare {
  // Other processes of the job start here too (a local job, or a node's
  // several workers): inherited ports would be bound twice.
  bool shared = false;
  // A worker's place among its host's workers, for SYNCLINE_LOCAL_RANK/_SIZE
  // (and the emulated host's label); absent: a multi-host worker keeps what
  // its launcher gave it.
  std::optional<EmulatedPlace> place;
  int metrics_port = 0;  // 0 = not set by pslaunch
};

// The job-wide settings, then the per-process ones.
// `rank`: a worker's or server's rank for SYNCLINE_*_RANK; -1 = not set.
EnvPlan JobEnv(const JobShape& s, Role role, int rank, const std::string& host, const HostShare& share) {
  const int worker_rank = role == Role::kWorker ? rank : -1;
  const int metrics_port = share.metrics_port;
  EnvPlan plan;
  plan.Set("SYNCLINE_ROLE", "DMLC_ROLE", RoleName(role));
  plan.Set("SYNCLINE_NUM_WORKERS", "DMLC_NUM_WORKER", std::to_string(s.num_workers));
  plan.Set("SYNCLINE_NUM_SERVERS", "DMLC_NUM_SERVER", std::to_string(s.num_servers));
  plan.Set("SYNCLINE_SCHEDULER_HOST", "DMLC_PS_ROOT_URI", s.scheduler_host);
  plan.Set("SYNCLINE_SCHEDULER_PORT", "DMLC_PS_ROOT_PORT", std::to_string(s.scheduler_port));
  if (!s.job_token.empty()) plan.Set("SYNCLINE_JOB_TOKEN", nullptr, s.job_token);
  if (!s.transport.empty()) plan.Set("SYNCLINE_TRANSPORT", nullptr, s.transport);
  if (worker_rank >= 0) {
    plan.Set("SYNCLINE_WORKER_RANK", "DMLC_WORKER_ID", std::to_string(worker_rank));
  } else if (role != Role::kWorker) {
    // A rank left in the user's shell must not reach a scheduler or server.
    plan.Strip("SYNCLINE_WORKER_RANK", "DMLC_WORKER_ID");
  }
  if (role == Role::kServer && rank >= 0) {
    plan.Set("SYNCLINE_SERVER_RANK", nullptr, std::to_string(rank));
  } else if (role != Role::kServer) {
    plan.Strip("SYNCLINE_SERVER_RANK", nullptr);
  }
  if (!host.empty()) plan.Set("SYNCLINE_HOST", "DMLC_NODE_HOST", host);
  if (role == Role::kWorker && share.place) {
    const EmulatedPlace& place = *share.place;
    plan.Set("SYNCLINE_LOCAL_RANK", "BYTEPS_LOCAL_RANK", std::to_string(place.local_rank));
    plan.Set("SYNCLINE_LOCAL_SIZE", "BYTEPS_LOCAL_SIZE", std::to_string(place.local_size));
    if (s.emulated_hosts > 1) plan.Set("SYNCLINE_HOST_LABEL", nullptr, "emulated-host-" + std::to_string(place.host));
  }
  if (metrics_port > 0) plan.Set("SYNCLINE_METRICS_PORT", nullptr, std::to_string(metrics_port));
  if (share.shared) {
    // Several processes of the job start on this host: one port inherited or
    // given to all would let only one of them bind it.
    plan.Strip("SYNCLINE_PORT", nullptr,
               "every process pslaunch starts here would bind the same port; each picks a free one instead");
    if (metrics_port == 0)
      plan.Strip("SYNCLINE_METRICS_PORT", nullptr,
                 "every process pslaunch starts here would bind the same port; use --metrics-port, which gives "
                 "each process its own");
  }
  return plan;
}

Result<Environment> BuildEnv(const Environment& parent, const EnvPlan& plan,
                             const std::vector<EnvAssignment>& extra) {
  for (const auto& [name, value] : extra) {
    for (const auto& [refused, why] : plan.refusals)
      if (refused == name) return InvalidArgument("--env " + name + ": " + why);
    if (plan.Controls(name))
      return InvalidArgument("--env " + name + ": pslaunch sets this itself; use its own option instead " +
                             "(--workers, --servers, --port, --scheduler, --rank, --host, --token-file, --transport, "
                             "--metrics-port)");
  }
  Environment env = parent;
  for (const auto& name : plan.strip) env.erase(name);
  for (const auto& [name, value] : extra) env[name] = value;
  for (const auto& [name, value] : plan.set) env[name] = value;
  return env;
}

// `rank`: a worker's or server's rank (-1: the scheduler assigns one); the
// label and the rank setting agree, so a process has one name everywhere.
Result<PlannedProcess> MakeProcess(const JobShape& shape, Role role, int rank, const std::string& host,
                                   std::vector<std::string> argv, const Environment& parent,
                                   const HostShare& share) {
  if (role == Role::kScheduler) rank = -1;
  PlannedProcess p;
  p.role = role;
  p.rank = rank;
  p.label = RoleName(role);
  if (p.rank >= 0) p.label += " " + std::to_string(p.rank);
  p.spec.argv = std::move(argv);
  EnvPlan env_plan = JobEnv(shape, role, rank, host, share);
  p.removed_env = env_plan.strip;
  SYNCLINE_ASSIGN_OR_RETURN(p.spec.env, BuildEnv(parent, env_plan, shape.extra_env));
  return p;
}

std::string JoinPath(const std::string& dir, const char* file) {
  if (dir.empty()) return file;
  return dir.back() == '/' ? dir + file : dir + "/" + file;
}

}  // namespace

int MetricsPortOf(const JobShape& shape, Role role, int index) {
  if (shape.metrics_port == 0) return 0;
  switch (role) {
    case Role::kScheduler: return shape.metrics_port;
    case Role::kServer: return shape.metrics_port + 1 + index;
    case Role::kWorker: return shape.metrics_port + 1 + shape.num_servers + index;
  }
  return 0;
}

Result<std::vector<PlannedProcess>> PlanLocalJob(const LocalJob& job, const Environment& parent) {
  SYNCLINE_RETURN_IF_ERROR(ValidateShape(job.shape));
  if (job.shape.metrics_port > 0 && job.shape.metrics_port + job.shape.num_servers + job.shape.num_workers > 65535)
    return InvalidArgument("--metrics-port " + std::to_string(job.shape.metrics_port) + " leaves no room for " +
                           std::to_string(1 + job.shape.num_servers + job.shape.num_workers) +
                           " consecutive ports below 65536");
  if (job.command.empty() || job.command[0].empty())
    return InvalidArgument("no worker command given (pslaunch ... -- <command>)");
  // Every process of a local job shares this host; its workers learn their
  // (emulated) host's local ranks.
  auto local = [&](Role role, int index) {
    HostShare share{true, std::nullopt, MetricsPortOf(job.shape, role, index)};
    if (role == Role::kWorker) share.place = EmulatedPlaceOf(job.shape, index);
    return share;
  };
  std::vector<PlannedProcess> plan;
  SYNCLINE_ASSIGN_OR_RETURN(PlannedProcess scheduler,
                            MakeProcess(job.shape, Role::kScheduler, -1, "", {JoinPath(job.bin_dir, kSchedulerBinary)},
                                        parent, local(Role::kScheduler, -1)));
  plan.push_back(std::move(scheduler));
  for (int i = 0; i < job.shape.num_servers; ++i) {
    SYNCLINE_ASSIGN_OR_RETURN(PlannedProcess server,
                              MakeProcess(job.shape, Role::kServer, i, "", {JoinPath(job.bin_dir, kServerBinary)},
                                          parent, local(Role::kServer, i)));
    plan.push_back(std::move(server));
  }
  for (int i = 0; i < job.shape.num_workers; ++i) {
    SYNCLINE_ASSIGN_OR_RETURN(PlannedProcess worker,
                              MakeProcess(job.shape, Role::kWorker, i, "", job.command, parent, local(Role::kWorker, i)));
    worker.primary = true;
    plan.push_back(std::move(worker));
  }
  return plan;
}

Result<PlannedProcess> PlanNode(const NodeJob& job, const Environment& parent) {
  SYNCLINE_RETURN_IF_ERROR(ValidateShape(job.shape));
  std::vector<std::string> argv;
  if (job.role == Role::kWorker) {
    if (job.command.empty() || job.command[0].empty())
      return InvalidArgument("--role worker needs the worker command (pslaunch ... -- <command>)");
    if (job.rank >= job.shape.num_workers)
      return InvalidArgument("--rank " + std::to_string(job.rank) + " is not below --workers " +
                             std::to_string(job.shape.num_workers));
    argv = job.command;
  } else {
    if (!job.command.empty())
      return InvalidArgument(std::string("a command is only run by --role worker; --role ") + RoleName(job.role) +
                             " runs " + (job.role == Role::kScheduler ? kSchedulerBinary : kServerBinary));
    if (job.role == Role::kScheduler && job.rank >= 0)
      return InvalidArgument("--rank applies to workers and servers only");
    if (job.rank >= job.shape.num_servers)
      return InvalidArgument("--rank " + std::to_string(job.rank) + " is not below --servers " +
                             std::to_string(job.shape.num_servers));
    argv = {JoinPath(job.bin_dir, job.role == Role::kScheduler ? kSchedulerBinary : kServerBinary)};
  }
  SYNCLINE_ASSIGN_OR_RETURN(PlannedProcess p,
                            MakeProcess(job.shape, job.role, job.rank, job.host, std::move(argv), parent,
                                        HostShare{false, std::nullopt, job.shape.metrics_port}));
  p.primary = true;
  return p;
}

Result<std::vector<PlannedProcess>> PlanNodeWorkers(const NodeJob& job, const Environment& parent) {
  SYNCLINE_RETURN_IF_ERROR(ValidateShape(job.shape));
  const int per_node = job.local_workers;
  if (job.role != Role::kWorker) return InvalidArgument("--local-workers applies to --role worker only");
  if (job.command.empty() || job.command[0].empty())
    return InvalidArgument("--role worker needs the worker command (pslaunch ... -- <command>)");
  if (per_node < 1 || per_node > job.shape.num_workers)
    return InvalidArgument("--local-workers " + std::to_string(per_node) + " must be in [1, --workers " +
                           std::to_string(job.shape.num_workers) + "]");
  if (job.rank >= 0)
    return InvalidArgument("--rank names one worker; with --local-workers, --node-rank says which host this is");
  if (job.node_rank < 0)
    return InvalidArgument("--local-workers needs --node-rank (this host's index: its workers are ranks "
                           "node-rank * local-workers + 0, 1, ...)");
  const int64_t first = int64_t{job.node_rank} * per_node;
  if (first + per_node > job.shape.num_workers)
    return InvalidArgument("--node-rank " + std::to_string(job.node_rank) + " with --local-workers " +
                           std::to_string(per_node) + " gives ranks " + std::to_string(first) + ".." +
                           std::to_string(first + per_node - 1) + ", past --workers " +
                           std::to_string(job.shape.num_workers));
  if (job.shape.metrics_port > 0 && job.shape.metrics_port + per_node - 1 > 65535)
    return InvalidArgument("--metrics-port " + std::to_string(job.shape.metrics_port) + " leaves no room for " +
                           std::to_string(per_node) + " consecutive ports below 65536");
  std::vector<PlannedProcess> plan;
  for (int i = 0; i < per_node; ++i) {
    HostShare share{true, EmulatedPlace{0, i, per_node}, job.shape.metrics_port > 0 ? job.shape.metrics_port + i : 0};
    SYNCLINE_ASSIGN_OR_RETURN(PlannedProcess worker, MakeProcess(job.shape, Role::kWorker, static_cast<int>(first) + i,
                                                                 job.host, job.command, parent, share));
    worker.primary = true;
    plan.push_back(std::move(worker));
  }
  return plan;
}

Result<EnvAssignment> ParseEnvAssignment(const std::string& text) {
  size_t eq = text.find('=');
  if (eq == std::string::npos) return InvalidArgument("'" + text + "' is not of the form NAME=VALUE");
  std::string name = text.substr(0, eq);
  bool valid = !name.empty() && !(name[0] >= '0' && name[0] <= '9') &&
               std::all_of(name.begin(), name.end(), [](char c) {
                 return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
               });
  if (!valid) return InvalidArgument("'" + name + "' is not a valid environment variable name");
  return EnvAssignment{name, text.substr(eq + 1)};
}

Result<std::pair<std::string, int>> ParseHostPort(const std::string& text) {
  const std::string usage = "'" + text + "' is not HOST:PORT";
  size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0) return InvalidArgument(usage);
  std::string host = text.substr(0, colon);
  if (host.front() == '[') {
    if (host.size() < 3 || host.back() != ']') return InvalidArgument(usage);
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != std::string::npos) {
    return InvalidArgument(usage + " (write an IPv6 address as [ADDR]:PORT)");
  }
  std::string port_text = text.substr(colon + 1);
  int port = 0;
  auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (port_text.empty() || ec != std::errc() || end != port_text.data() + port_text.size() || port < 1 ||
      port > 65535)
    return InvalidArgument(usage + " (the port must be a number in [1, 65535])");
  return std::pair<std::string, int>{host, port};
}

Result<int> PickFreePort(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | AI_PASSIVE;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), "0", &hints, &res);
  if (rc != 0) return InvalidArgument("cannot resolve '" + host + "': " + gai_strerror(rc));
  Status last = Unavailable("no address for '" + host + "'");
  int port = -1;
  for (addrinfo* ai = res; ai != nullptr && port < 0; ai = ai->ai_next) {
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      last = Unavailable(std::string("socket: ") + strerror(errno));
      continue;
    }
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      last = Unavailable("cannot bind a port on '" + host + "': " + strerror(errno));
    } else if (addr.ss_family == AF_INET) {
      port = ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
    } else if (addr.ss_family == AF_INET6) {
      port = ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
    }
    close(fd);
  }
  freeaddrinfo(res);
  if (port <= 0) return last;
  return port;
}

Result<std::string> NewJobToken() {
  unsigned char bytes[16];
  size_t got = 0;
  while (got < sizeof(bytes)) {
    ssize_t n = getrandom(bytes + got, sizeof(bytes) - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Unavailable(std::string("getrandom: ") + strerror(errno));
    got += static_cast<size_t>(n);
  }
  static const char kHex[] = "0123456789abcdef";
  std::string token;
  for (unsigned char b : bytes) {
    token.push_back(kHex[b >> 4]);
    token.push_back(kHex[b & 15]);
  }
  return token;
}

Result<std::string> ExecutableDir() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return Unavailable(std::string("readlink /proc/self/exe: ") + strerror(errno));
  std::string path(buf, static_cast<size_t>(n));
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return Internal("unexpected executable path '" + path + "'");
  return slash == 0 ? std::string("/") : path.substr(0, slash);
}

}  // namespace syncline::deploy
