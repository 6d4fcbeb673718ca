#include "deploy/remote_job.h"

#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <map>

#include "deploy/remote_shell.h"

namespace syncline::deploy {

// How a remote process gets the job token and dies with its connection. ssh
// hands the command to the remote login shell, which execs /bin/sh with this
// script; its stdin is the ssh channel's stdin: first the token's line (kept
// off every command line), then nothing until end-of-file, which comes when
// pslaunch's end of the pipe closes (pslaunch exited or was killed), when the
// local ssh is killed, or when the connection drops (sshd then closes the
// channel).
//   - The token's line is read byte by byte (sh's read never reads past the
//     newline of a pipe), so the rest of stdin stays for the watcher.
//   - The command runs in the background (stdin /dev/null, as in a local job)
//     in its own session and process group (setsid -w: the group is the
//     process's, and $pid lives exactly as long as the command), so the
//     signals below reach everything it forked.
//   - A watcher reads the channel's stdin (saved as fd 3: a background list's
//     stdin is /dev/null) until end-of-file, immune to the signals that may hit
//     the session's group (so it outlives a killed wrapper), then sends SIGTERM
//     to the command's group, and SIGKILL after $1 seconds if anything is
//     left. Its stdout and stderr go to /dev/null so that sshd does not wait
//     for it once the command has ended.
//   - The script waits for the command and exits with its status (128 + N when
//     it was killed by signal N), which ssh passes on to pslaunch.
// When the command ends first, sshd closes the channel, the watcher reads
// end-of-file, finds nothing left to signal (or a straggler of the group,
// which it stops too) and exits.
const char* const kRemoteWrapper =
    "g=$1; shift\n"
    "IFS= read -r t || { echo 'pslaunch-remote: no job token on stdin' >&2; exit 1; }\n"
    "if [ -n \"$t\" ]; then SYNCLINE_JOB_TOKEN=$t; export SYNCLINE_JOB_TOKEN; fi\n"
    "t=\n"
    "exec 3<&0\n"
    "if command -v setsid >/dev/null 2>&1; then setsid -w \"$@\" 3<&- & else \"$@\" 3<&- & fi\n"
    "pid=$!\n"
    "(\n"
    "  trap '' HUP INT TERM\n"
    "  cat >/dev/null\n"
    "  if kill -0 -$pid; then t=-$pid; else t=$pid; fi\n"
    "  kill -TERM $t || exit 0\n"
    "  i=0\n"
    "  while [ $i -lt $g ] && kill -0 $t; do sleep 1; i=$((i+1)); done\n"
    "  kill -KILL $t\n"
    ") <&3 >/dev/null 2>&1 &\n"
    "exec 3<&-\n"
    "wait $pid\n";

std::string RemoteCommandLine(const std::string& cwd, int grace_s, const std::vector<std::string>& unset,
                              const std::vector<EnvAssignment>& set, const std::vector<std::string>& argv) {
  std::string line = "cd " + ShellQuote(cwd) + " && exec /bin/sh -c " + ShellQuote(kRemoteWrapper) +
                     " pslaunch-remote " + std::to_string(std::max(0, grace_s)) + " env";
  for (const auto& name : unset) line += " -u " + ShellQuote(name);
  for (const auto& [name, value] : set) line += " " + ShellQuote(name + "=" + value);
  line += " " + ShellJoin(argv);
  return line;
}

std::vector<std::string> SshArgv(const std::vector<std::string>& ssh, int port, const std::string& target,
                                 const std::string& remote_command) {
  std::vector<std::string> argv = ssh;
  for (const char* o :
       {"BatchMode=yes", "ConnectTimeout=15", "ServerAliveInterval=10"}) {
    argv.push_back("-o");
    argv.push_back(o);
  }
  if (port > 0) {
    argv.push_back("-p");
    argv.push_back(std::to_string(port));
  }
  argv.push_back("-T");  // no terminal: output is relayed line by line
  argv.push_back(target);
  argv.push_back(remote_command);
  return argv;
}

Result<RemoteStdin> OpenRemoteStdin(const std::string& token) {
  if (token.find('\n') != std::string::npos) return InvalidArgument("the job token holds a line break");
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return Unavailable(std::string("pipe2: ") + strerror(errno));
  const std::string line = token + "\n";
  // A pipe holds at least 4 KiB (PIPE_BUF) before a write would block.
  if (line.size() > PIPE_BUF || write(fds[1], line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
    const int err = errno;
    close(fds[0]);
    close(fds[1]);
    return line.size() > PIPE_BUF ? InvalidArgument("the job token is longer than " + std::to_string(PIPE_BUF - 1) +
                                                    " bytes")
                                   : Unavailable(std::string("writing the job token to a pipe: ") + strerror(err));
  }
  return RemoteStdin{fds[0], fds[1]};
}

namespace {

bool Has(const std::vector<EnvAssignment>& env, const std::string& name) {
  return std::any_of(env.begin(), env.end(), [&](const EnvAssignment& a) { return a.first == name; });
}

}  // namespace

Result<std::vector<PlannedProcess>> PlanHostsJob(const HostsJob& job, const Environment& local_env) {
  if (job.hosts.empty()) return InvalidArgument("no hosts given");
  if (job.ssh.empty() || job.ssh[0].empty()) return InvalidArgument("--ssh: empty command");
  if (job.command.empty() || job.command[0].empty())
    return InvalidArgument("no worker command given (pslaunch ... -- <command>)");
  if (job.shape.num_workers < 1 || job.shape.num_servers < 1)
    return InvalidArgument("--workers and --servers must be at least 1");
  SYNCLINE_ASSIGN_OR_RETURN(Placement placement,
                            PlaceProcesses(job.hosts, job.shape.num_servers, job.shape.num_workers));

  // Index of each process on its host (by address: a host listed twice is
  // one machine), for metrics ports and workers' local ranks.
  struct Slot {
    Role role;
    int rank;
    int entry;
  };
  std::vector<Slot> slots{{Role::kScheduler, -1, placement.scheduler}};
  for (int i = 0; i < job.shape.num_servers; ++i) slots.push_back({Role::kServer, i, placement.servers[i]});
  for (int r = 0; r < job.shape.num_workers; ++r) slots.push_back({Role::kWorker, r, placement.workers[r]});
  std::map<std::string, int> on_host, workers_on_host;
  for (const Slot& s : slots) {
    ++on_host[job.hosts[s.entry].address];
    if (s.role == Role::kWorker) ++workers_on_host[job.hosts[s.entry].address];
  }
  const bool shared_host = std::any_of(on_host.begin(), on_host.end(), [](const auto& kv) { return kv.second > 1; });
  for (const auto& [name, value] : job.shape.extra_env) {
    if (name == "SYNCLINE_LOCAL_RANK" || name == "SYNCLINE_LOCAL_SIZE" || name == "BYTEPS_LOCAL_RANK" ||
        name == "BYTEPS_LOCAL_SIZE")
      return InvalidArgument("--env " + name +
                             ": with --hosts, pslaunch sets each worker's local rank and size "
                             "from the workers placed on its host");
    if ((name == "SYNCLINE_PORT" || name == "SYNCLINE_METRICS_PORT") && shared_host)
      return InvalidArgument("--env " + name + ": processes sharing a host would bind the same port" +
                             (name == "SYNCLINE_PORT" ? std::string("; each picks a free one instead")
                                                      : std::string("; use --metrics-port, which gives each "
                                                                    "process on a host its own")));
  }
  if (job.shape.metrics_port > 0) {
    int most = 0;
    for (const auto& kv : on_host) most = std::max(most, kv.second);
    if (job.shape.metrics_port + most - 1 > 65535)
      return InvalidArgument("--metrics-port " + std::to_string(job.shape.metrics_port) + " leaves no room for " +
                             std::to_string(most) + " consecutive ports below 65536");
  }

  std::map<std::string, int> index_on_host, worker_index_on_host;
  std::vector<PlannedProcess> out;
  for (const Slot& s : slots) {
    const HostEntry& host = job.hosts[s.entry];
    NodeJob node;
    node.shape = job.shape;
    node.shape.scheduler_host = job.hosts[placement.scheduler].address;
    const int index = index_on_host[host.address]++;
    if (job.shape.metrics_port > 0) node.shape.metrics_port = job.shape.metrics_port + index;
    node.role = s.role;
    node.rank = s.rank;
    node.host = host.address;
    node.bin_dir = job.bin_dir;
    if (s.role == Role::kWorker) node.command = job.command;
    // An empty parent: the result holds exactly what pslaunch sets.
    SYNCLINE_ASSIGN_OR_RETURN(PlannedProcess p, PlanNode(node, Environment{}));
    std::vector<EnvAssignment> set(p.spec.env.begin(), p.spec.env.end());
    // The token goes on ssh's stdin (OpenRemoteStdin), not the command line.
    std::erase_if(set, [](const EnvAssignment& a) { return a.first == "SYNCLINE_JOB_TOKEN"; });
    std::vector<std::string> unset;
    if (s.role == Role::kWorker) {
      set.emplace_back("SYNCLINE_LOCAL_RANK", std::to_string(worker_index_on_host[host.address]++));
      set.emplace_back("SYNCLINE_LOCAL_SIZE", std::to_string(workers_on_host[host.address]));
      unset = {"BYTEPS_LOCAL_RANK", "BYTEPS_LOCAL_SIZE"};
    }
    for (const auto& name : p.removed_env)
      if (!Has(set, name) && name != "SYNCLINE_JOB_TOKEN" && std::find(unset.begin(), unset.end(), name) == unset.end())
        unset.push_back(name);
    const std::string remote = RemoteCommandLine(job.cwd, job.remote_grace_s, unset, set, p.spec.argv);
    std::vector<std::string> ssh = SshArgv(job.ssh, job.ssh_port, host.target, remote);
    p.spec.argv = ssh;
    p.spec.env = local_env;
    p.label += " @" + host.address;
    p.primary = s.role == Role::kWorker;
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace syncline::deploy
