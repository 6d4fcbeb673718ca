// pslaunch: starts a Syncline job.
//
//   local (one host):  pslaunch -w N -s M [options] -- <worker command...>
//     one syncline-scheduler, M syncline-server and N copies of the command;
//   multi-host, whole job over ssh:
//     pslaunch --hosts h1,h2,... | --hostfile FILE -w N -s M [options] -- <worker command...>
//   multi-host (one process of a job per call):
//     pslaunch --role scheduler|server|worker --scheduler HOST:PORT -w N -s M
//              [--rank R] [--host ADDR] [--token-file FILE] [-- <worker command...>]
//   multi-host, the L workers of one host (ranks I*L .. I*L+L-1):
//     pslaunch --role worker --scheduler HOST:PORT -w N -s M --local-workers L
//              --node-rank I [...] -- <worker command...>
//
// The job token comes from --token-file or --token (which `ps` shows to every
// user of the host), else SYNCLINE_JOB_TOKEN; a local or --hosts job without
// one draws a random one. It reaches the processes in their environment (over
// ssh: on stdin), never on a command line.
//
// Every line the children print comes out on stdout prefixed with who printed
// it; pslaunch's own notices go to stderr. See deploy/README.md for the exit
// codes and the environment each child gets.
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/settings.h"
#include "deploy/launch_plan.h"
#include "deploy/remote_job.h"
#include "deploy/remote_shell.h"
#include "deploy/supervisor.h"
#include "deploy/token_file.h"

namespace syncline::deploy {
namespace {

// Written by the signal handler, read by the supervisor. A signal handler can
// only reach static storage; nothing else in pslaunch is global.
std::atomic<int> g_stop_signal{0};

void OnStopSignal(int sig) { g_stop_signal.store(sig); }

void InstallSignalHandlers() {
  struct sigaction sa {};
  sa.sa_handler = OnStopSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: poll() returns at once with EINTR
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &sa, nullptr);
  // A reader of our stdout that goes away must not kill the supervisor.
  signal(SIGPIPE, SIG_IGN);
}

struct Options {
  int workers = 0;
  int servers = 0;
  int port = 0;
  std::string transport;
  std::vector<std::string> env;
  double timeout_s = 0;
  double grace_s = 5;
  std::string bin_dir;
  std::string role;
  std::string scheduler;
  int rank = -1;
  int local_workers = 0;
  int node_rank = -1;
  std::string host;
  std::string token;
  std::string token_file;
  int metrics_port = 0;
  int emulated_hosts = 1;
  std::string hosts;
  std::string hostfile;
  std::string ssh = "ssh";
  int ssh_port = 0;
  std::vector<std::string> command;
};

Millis SecondsToMillis(double s) { return Millis(static_cast<long long>(std::llround(s * 1000.0))); }

// A CLI11 check that runs one of launch_plan's parsers.
template <typename T>
CLI::Validator FromParser(const std::string& name, Result<T> (*parse)(const std::string&)) {
  return CLI::Validator(
      [parse](std::string& text) -> std::string {
        Result<T> parsed = parse(text);
        return parsed.ok() ? std::string() : parsed.status().message();
      },
      name);
}

void DefineOptions(CLI::App& app, Options& o) {
  app.add_option("-w,--workers", o.workers, "Number of workers (N >= 1)")->required()->check(CLI::Range(1, 65535));
  app.add_option("-s,--servers", o.servers, "Number of servers (M >= 1)")->required()->check(CLI::Range(1, 65535));
  auto* port = app.add_option("-p,--port", o.port, "Scheduler port of a local job (default: a free one) or of a "
                                                   "--hosts job (default 9000)")
                   ->check(CLI::Range(1, 65535));
  app.add_option("--transport", o.transport,
                 "Data transport: tcp or ipc (ZeroMQ; ipc: single host only), or ucx (UCX, steered by UCX_TLS)")
      ->check(CLI::IsMember({"tcp", "ipc", "ucx"}));
  app.add_option("-e,--env", o.env, "Extra environment variable NAME=VALUE for every process (repeatable)")
      ->check(FromParser("NAME=VALUE", &ParseEnvAssignment))
      ->allow_extra_args(false);
  app.add_option("--timeout", o.timeout_s, "Stop the job after this many seconds, exit 124 (0 = never)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--grace", o.grace_s, "Seconds between SIGTERM and SIGKILL, and for the scheduler and servers "
                                      "to exit after the workers (default 5)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--bin-dir", o.bin_dir, "Where syncline-scheduler and syncline-server are "
                                         "(default: pslaunch's own directory)")
      ->check(CLI::ExistingDirectory);
  auto* role = app.add_option("--role", o.role, "Multi-host mode: run only this process of the job")
                   ->check(CLI::IsMember({"scheduler", "server", "worker"}));
  auto* sched = app.add_option("--scheduler", o.scheduler, "Multi-host mode: the scheduler's HOST:PORT")
                    ->check(FromParser("HOST:PORT", &ParseHostPort));
  auto* rank = app.add_option("--rank", o.rank, "Multi-host mode: this worker's or server's rank (default: assigned)")
                   ->check(CLI::Range(0, 65534));
  auto* local_workers =
      app.add_option("--local-workers", o.local_workers,
                     "Multi-host mode, --role worker: start L workers on this host (local ranks 0..L-1, ranks "
                     "node-rank * L + local rank), as torchrun's --nproc-per-node")
          ->check(CLI::Range(1, 65535));
  auto* node_rank = app.add_option("--node-rank", o.node_rank,
                                   "With --local-workers: this host's index among the job's worker hosts")
                        ->check(CLI::Range(0, 65534));
  auto* host = app.add_option("--host", o.host, "Multi-host mode: the address this node advertises");
  auto* token = app.add_option("--token", o.token,
                               "Job token. Every user of this host sees it through ps: prefer --token-file or "
                               "SYNCLINE_JOB_TOKEN. Default: SYNCLINE_JOB_TOKEN from the environment, else a "
                               "random one (local and --hosts jobs)");
  auto* token_file = app.add_option("--token-file", o.token_file,
                                    "Read the job token from this file (all of it, less a final newline; "
                                    "keep it readable by you only)");
  app.add_option("--metrics-port", o.metrics_port,
                 "Serve Prometheus metrics: a local job's scheduler on this port, its servers and workers on the "
                 "ports after it (printed); multi-host mode: this process on this port (with --local-workers, local "
                 "rank i on this port + i)")
      ->check(CLI::Range(1, 65535));
  auto* emulated = app.add_option("--emulated-hosts", o.emulated_hosts,
                                  "Local job: split the workers into H emulated hosts (contiguous ranks; each its own "
                                  "SYNCLINE_HOST_LABEL and local ranks), so that one machine runs the hierarchical "
                                  "reduce of H hosts")
                       ->check(CLI::Range(1, 65535));
  auto* hosts = app.add_option("--hosts", o.hosts, "Whole job over ssh on these hosts ([user@]host,...): "
                                                 "scheduler on the first, servers and workers round-robin");
  auto* hostfile = app.add_option("--hostfile", o.hostfile, "Like --hosts, from a file: one '[user@]host "
                                                            "[slots=K]' per line, # comments")
                       ->check(CLI::ExistingFile);
  app.add_option("--ssh", o.ssh, "With --hosts: the ssh command and its options (default \"ssh\")");
  app.add_option("--ssh-port", o.ssh_port, "With --hosts: the port of the hosts' sshd (default: ssh's)")
      ->check(CLI::Range(1, 65535));
  token->excludes(token_file);
  hosts->excludes(hostfile);
  hosts->excludes(role);
  hostfile->excludes(role);
  role->needs(sched);
  sched->needs(role);
  rank->needs(role);
  local_workers->needs(role);
  local_workers->needs(node_rank);
  local_workers->excludes(rank);
  node_rank->needs(local_workers);
  host->needs(role);
  port->excludes(role);
  emulated->excludes(role);
  emulated->excludes(hosts);
  emulated->excludes(hostfile);
  app.footer("Everything after the first non-option word (or after --) is the worker command.\n"
             "Exit status: 0 success; a failed process's status (128+signal if killed); 124 timeout;\n"
             "130/143 interrupted; 127 a process could not be started; 1 the scheduler or a server\n"
             "did not exit after the workers finished; 2 usage error.");
}

void WriteStderrLine(const std::string& line) {
  std::string text = line + "\n";
  ssize_t unused = write(STDERR_FILENO, text.data(), text.size());
  (void)unused;
}

Status CheckExecutable(const std::string& dir, const char* name) {
  std::string path = dir + "/" + name;
  if (access(path.c_str(), X_OK) == 0) return Status::Ok();
  return NotFound(std::string(name) + " not found (or not executable) in " + dir +
                  "; build it next to pslaunch or pass --bin-dir");
}

// --token, else --token-file, else SYNCLINE_JOB_TOKEN from the environment;
// empty when none is set (a local or --hosts job then draws one).
Result<std::string> JobToken(const Options& o, const Environment& parent) {
  if (!o.token_file.empty()) return ReadTokenFile(o.token_file);
  if (!o.token.empty()) return o.token;
  auto inherited = parent.find("SYNCLINE_JOB_TOKEN");
  return inherited == parent.end() ? std::string() : inherited->second;
}

SupervisedProcess ToSupervised(PlannedProcess p) {
  return SupervisedProcess{std::move(p.label), std::move(p.spec), p.primary};
}

// A whole job over ssh (--hosts/--hostfile).
Result<std::vector<SupervisedProcess>> PlanHosts(const Options& o, JobShape shape, const std::string& bin_dir,
                                                 const Environment& parent) {
  HostsJob job;
  if (!o.hostfile.empty()) {
    std::ifstream in(o.hostfile);
    std::stringstream text;
    text << in.rdbuf();
    if (!in) return InvalidArgument("cannot read --hostfile " + o.hostfile);
    SYNCLINE_ASSIGN_OR_RETURN(job.hosts, ParseHostfile(text.str(), o.hostfile));
  } else {
    SYNCLINE_ASSIGN_OR_RETURN(job.hosts, ParseHostList(o.hosts));
  }
  SYNCLINE_ASSIGN_OR_RETURN(job.ssh, SplitCommandWords(o.ssh));
  if (job.ssh.empty()) return InvalidArgument("--ssh: empty command");
  shape.scheduler_port = o.port != 0 ? o.port : kDefaultHostsSchedulerPort;
  if (shape.job_token.empty()) {
    SYNCLINE_ASSIGN_OR_RETURN(shape.job_token, NewJobToken());
  }
  job.shape = shape;
  job.bin_dir = bin_dir;
  job.command = o.command;
  job.ssh_port = o.ssh_port;
  job.remote_grace_s = static_cast<int>(std::ceil(o.grace_s));
  char cwd[4096];
  if (getcwd(cwd, sizeof(cwd)) == nullptr) return Unavailable("getcwd failed");
  job.cwd = cwd;
  SYNCLINE_ASSIGN_OR_RETURN(std::vector<PlannedProcess> plan, PlanHostsJob(job, parent));
  // Each ssh's stdin: the token, then held open (never written again) until
  // pslaunch exits, as remote_job.h says; the descriptors live as long as it.
  for (PlannedProcess& p : plan) {
    SYNCLINE_ASSIGN_OR_RETURN(RemoteStdin in, OpenRemoteStdin(shape.job_token));
    p.spec.stdin_fd = in.read_fd;
  }
  std::string where;
  for (const auto& p : plan) where += (where.empty() ? "" : ", ") + p.label;
  std::set<std::string> machines;
  for (const auto& h : job.hosts) machines.insert(h.address);
  WriteStderrLine("pslaunch: job on " + std::to_string(machines.size()) + " host(s) over ssh, scheduler at " +
                  plan.front().label.substr(plan.front().label.find('@') + 1) + ":" +
                  std::to_string(shape.scheduler_port) + ": " + where);
  std::vector<SupervisedProcess> out;
  for (auto& p : plan) out.push_back(ToSupervised(std::move(p)));
  return out;
}

// Builds the processes to start; a Status error is a usage error.
Result<std::vector<SupervisedProcess>> Plan(const Options& o, const Environment& parent) {
  JobShape shape;
  shape.num_workers = o.workers;
  shape.num_servers = o.servers;
  shape.transport = o.transport;
  SYNCLINE_ASSIGN_OR_RETURN(shape.job_token, JobToken(o, parent));
  shape.metrics_port = o.metrics_port;
  if (o.emulated_hosts > o.workers)
    return InvalidArgument("--emulated-hosts " + std::to_string(o.emulated_hosts) + " is more than the " +
                           std::to_string(o.workers) + " workers");
  shape.emulated_hosts = o.emulated_hosts;
  for (const auto& e : o.env) {
    SYNCLINE_ASSIGN_OR_RETURN(EnvAssignment a, ParseEnvAssignment(e));
    shape.extra_env.push_back(std::move(a));
  }
  std::string bin_dir = o.bin_dir;
  if (bin_dir.empty()) {
    SYNCLINE_ASSIGN_OR_RETURN(bin_dir, ExecutableDir());
  }

  std::vector<SupervisedProcess> out;
  if (!o.hosts.empty() || !o.hostfile.empty()) return PlanHosts(o, shape, bin_dir, parent);
  if (o.ssh != "ssh" || o.ssh_port != 0) return InvalidArgument("--ssh and --ssh-port apply to --hosts/--hostfile");
  if (o.role.empty()) {
    if (o.port != 0) {
      shape.scheduler_port = o.port;
    } else {
      SYNCLINE_ASSIGN_OR_RETURN(shape.scheduler_port, PickFreePort(shape.scheduler_host));
    }
    if (shape.job_token.empty()) {
      SYNCLINE_ASSIGN_OR_RETURN(shape.job_token, NewJobToken());
    }
    SYNCLINE_ASSIGN_OR_RETURN(std::vector<PlannedProcess> plan,
                              PlanLocalJob(LocalJob{shape, bin_dir, o.command}, parent));
    SYNCLINE_RETURN_IF_ERROR(CheckExecutable(bin_dir, kSchedulerBinary));
    SYNCLINE_RETURN_IF_ERROR(CheckExecutable(bin_dir, kServerBinary));
    for (auto& p : plan) out.push_back(ToSupervised(std::move(p)));
    WriteStderrLine("pslaunch: local job: 1 scheduler (127.0.0.1:" + std::to_string(shape.scheduler_port) + "), " +
                    std::to_string(o.servers) + " server(s), " + std::to_string(o.workers) + " worker(s)");
    if (shape.metrics_port > 0)
      WriteStderrLine("pslaunch: metrics at http://127.0.0.1:PORT/metrics: scheduler " +
                      std::to_string(shape.metrics_port) + ", servers " +
                      std::to_string(MetricsPortOf(shape, Role::kServer, 0)) + "-" +
                      std::to_string(MetricsPortOf(shape, Role::kServer, o.servers - 1)) + ", workers " +
                      std::to_string(MetricsPortOf(shape, Role::kWorker, 0)) + "-" +
                      std::to_string(MetricsPortOf(shape, Role::kWorker, o.workers - 1)) + " (by rank)");
    return out;
  }

  SYNCLINE_ASSIGN_OR_RETURN(auto scheduler, ParseHostPort(o.scheduler));
  shape.scheduler_host = scheduler.first;
  shape.scheduler_port = scheduler.second;
  NodeJob node;
  node.shape = shape;
  SYNCLINE_ASSIGN_OR_RETURN(node.role, ParseRole(o.role));
  node.rank = o.rank;
  node.host = o.host;
  node.bin_dir = bin_dir;
  node.command = o.command;
  if (o.local_workers > 0) {
    node.local_workers = o.local_workers;
    node.node_rank = o.node_rank;
    SYNCLINE_ASSIGN_OR_RETURN(std::vector<PlannedProcess> workers, PlanNodeWorkers(node, parent));
    WriteStderrLine("pslaunch: " + std::to_string(workers.size()) + " worker(s) on this host: " +
                    workers.front().label + " to " + workers.back().label);
    for (auto& p : workers) out.push_back(ToSupervised(std::move(p)));
    return out;
  }
  SYNCLINE_ASSIGN_OR_RETURN(PlannedProcess p, PlanNode(node, parent));
  if (node.role == Role::kScheduler) SYNCLINE_RETURN_IF_ERROR(CheckExecutable(bin_dir, kSchedulerBinary));
  if (node.role == Role::kServer) SYNCLINE_RETURN_IF_ERROR(CheckExecutable(bin_dir, kServerBinary));
  out.push_back(ToSupervised(std::move(p)));
  return out;
}

int Main(int argc, char** argv) {
  CLI::App app{
      "pslaunch: start a Syncline parameter-server job\n"
      "  local job:  pslaunch -w N -s M [OPTIONS] [--] COMMAND...\n"
      "  over ssh:   pslaunch --hosts H1,H2,... -w N -s M [OPTIONS] [--] COMMAND...\n"
      "  multi-host: pslaunch --role scheduler|server|worker --scheduler HOST:PORT -w N -s M [OPTIONS]"
      " [[--] COMMAND...]\n"
      "  a host's workers: pslaunch --role worker --scheduler HOST:PORT -w N -s M --local-workers L"
      " --node-rank I [OPTIONS] [--] COMMAND...",
      "pslaunch"};
  Options o;
  DefineOptions(app, o);
  app.prefix_command();  // the worker command keeps its own options
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  o.command = app.remaining();
  if (!o.command.empty() && o.command.front() == "--") o.command.erase(o.command.begin());

  Result<std::vector<SupervisedProcess>> plan = Plan(o, ProcessEnvironment());
  if (!plan.ok()) {
    WriteStderrLine("pslaunch: " + plan.status().message());
    bool usage = plan.status().code() == StatusCode::kInvalidArgument;
    if (usage) WriteStderrLine("Run with --help for more information.");
    return usage ? 2 : 127;
  }

  InstallSignalHandlers();
  SupervisorOptions options;
  options.grace = SecondsToMillis(o.grace_s);
  options.timeout = SecondsToMillis(o.timeout_s);
  options.stop_signal = &g_stop_signal;
  Supervisor supervisor(options, FdLineSink(STDOUT_FILENO), WriteStderrLine);
  JobOutcome outcome = supervisor.Run(std::move(plan).value());
  if ((!o.hosts.empty() || !o.hostfile.empty()) && outcome.end == JobEnd::kProcessFailed && outcome.exit_code == 255)
    WriteStderrLine("pslaunch: (255 is ssh's status when it cannot reach or log in to a host: ssh's own message "
                    "is in the output above, under the same prefix)");
  return outcome.exit_code;
}

}  // namespace
}  // namespace syncline::deploy

int main(int argc, char** argv) { return syncline::deploy::Main(argc, argv); }
