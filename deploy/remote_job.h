// A whole job across hosts over ssh (`pslaunch --hosts ...`): one local `ssh`
// child per remote process, so the supervisor runs, relays and stops them like
// local processes.
//
// Every process gets the environment a `pslaunch --role` node would (PlanNode's
// policy): the job-wide settings, SYNCLINE_HOST = its host's address, worker
// and server ranks, SYNCLINE_LOCAL_RANK/_SIZE among the workers of its host,
// the metrics port offset by its index on its host, and every --env. Only
// these travel: the remote process otherwise has its login environment, minus
// the names pslaunch controls (and their BytePS aliases).
//
// The job token never appears on a command line (where `ps` on either host
// would show it): each ssh's stdin is a pipe of its own (OpenRemoteStdin)
// whose first line is the token, which the remote wrapper (kRemoteWrapper)
// reads and exports.
//
// Remote processes die with the connection. After the token, pslaunch writes
// nothing more to that pipe and holds its write end open. ssh forwards stdin,
// so when pslaunch exits or is killed (SIGKILL included) the kernel closes the
// write end, ssh sends EOF, and the remote wrapper stops its process. The same
// happens when an ssh is killed (the supervisor stops the job) or the
// connection drops: sshd closes the command's stdin.
#pragma once

#include <string>
#include <vector>

#include "deploy/launch_plan.h"
#include "deploy/remote_hosts.h"

namespace syncline::deploy {

// The scheduler's port when --hosts is given without --port: a free port
// cannot be picked on another host.
inline constexpr int kDefaultHostsSchedulerPort = 9000;

struct HostsJob {
  JobShape shape;  // scheduler_host is replaced by the first host's address
  std::vector<HostEntry> hosts;
  std::string bin_dir;                  // the same path on every host
  std::vector<std::string> command;     // the worker command
  std::string cwd;                      // remote processes start here (it must exist there)
  std::vector<std::string> ssh{"ssh"};  // the ssh command and its own options (--ssh)
  int ssh_port = 0;                     // 0: ssh's default or ~/.ssh/config
  int remote_grace_s = 5;               // remote SIGTERM -> SIGKILL delay after the connection drops
};

// Scheduler, servers by rank, workers by rank; each a local ssh command.
// `local_env` is what the ssh processes run with (pslaunch's environment).
// Each must be given its stdin from OpenRemoteStdin(job.shape.job_token).
Result<std::vector<PlannedProcess>> PlanHostsJob(const HostsJob& job, const Environment& local_env);

// The remote side, run by /bin/sh with $1 = grace seconds and the rest the
// command (see remote_job.cc for how it works).
extern const char* const kRemoteWrapper;

// The command string ssh hands to the remote login shell (POSIX sh syntax):
// cd CWD && exec /bin/sh -c WRAPPER pslaunch-remote GRACE env -u NAME... K=V...
// ARGV...
std::string RemoteCommandLine(const std::string& cwd, int grace_s, const std::vector<std::string>& unset,
                              const std::vector<EnvAssignment>& set, const std::vector<std::string>& argv);

// ssh words, then -o BatchMode=yes -o ConnectTimeout=15
// -o ServerAliveInterval=10 [-p PORT] -T TARGET COMMAND (no host-key policy:
// the user's configuration decides).
// The user's words come first, so their -o settings win (ssh keeps the first).
std::vector<std::string> SshArgv(const std::vector<std::string>& ssh, int port, const std::string& target,
                                 const std::string& remote_command);

// One remote process's stdin: a pipe holding the job token's line, whose
// `read_fd` becomes one ssh's stdin (ProcessSpec::stdin_fd) and whose
// `write_fd` pslaunch keeps open, writing nothing more, for its whole life.
// Both are close-on-exec: no other child holds either end.
struct RemoteStdin {
  int read_fd = -1;
  int write_fd = -1;
};
Result<RemoteStdin> OpenRemoteStdin(const std::string& token);

}  // namespace syncline::deploy
