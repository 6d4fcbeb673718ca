// pslaunch --hosts: hostfile parsing, placement, shell quoting (round trips
// through /bin/sh), the composed ssh command lines, the remote wrapper (its
// process dies when the connection's stdin closes), and pslaunch itself with
// a stand-in ssh that runs the remote command locally.
#include "deploy/remote_job.h"

#include <fcntl.h>
#include <limits.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "deploy/remote_hosts.h"
#include "deploy/remote_shell.h"
#include "test_util.h"

namespace syncline::deploy {
namespace {

using testing::Captured;
using testing::RunCaptured;

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

std::string Get(const std::vector<EnvAssignment>& env, const std::string& name) {
  for (const auto& [k, v] : env)
    if (k == name) return v;
  return "<unset>";
}

// ---- hosts and placement ---------------------------------------------------

TEST(RemoteHostsTest, HostList) {
  auto hosts = ParseHostList("h1, alice@h2 ,h1");
  ASSERT_TRUE(hosts.ok()) << hosts.status().ToString();
  ASSERT_EQ(hosts->size(), 3u);
  EXPECT_EQ((*hosts)[1].target, "alice@h2");
  EXPECT_EQ((*hosts)[1].address, "h2");
  EXPECT_EQ((*hosts)[2].address, "h1");
  EXPECT_EQ((*hosts)[0].slots, 0);
  for (const char* bad : {"", "h1,,h2", "h1,", "-oProxyCommand=x", "h 1", "@h", "u@", "a;b"})
    EXPECT_FALSE(ParseHostList(bad).ok()) << bad;
}

TEST(RemoteHostsTest, Hostfile) {
  auto hosts = ParseHostfile("# the cluster\n\n  node1 slots=2  # two\nbob@node2\t slots=8\r\nnode3\n", "hf");
  ASSERT_TRUE(hosts.ok()) << hosts.status().ToString();
  ASSERT_EQ(hosts->size(), 3u);
  EXPECT_EQ((*hosts)[0].target, "node1");
  EXPECT_EQ((*hosts)[0].slots, 2);
  EXPECT_EQ((*hosts)[1].target, "bob@node2");
  EXPECT_EQ((*hosts)[1].address, "node2");
  EXPECT_EQ((*hosts)[1].slots, 8);
  EXPECT_EQ((*hosts)[2].slots, 0);

  auto bad = ParseHostfile("a\nb slots=0\n", "hosts.txt");
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(Contains(bad.status().message(), "hosts.txt:2:")) << bad.status().ToString();
  EXPECT_FALSE(ParseHostfile("a slots=x\n", "f").ok());
  EXPECT_FALSE(ParseHostfile("a slots=2x\n", "f").ok());
  EXPECT_FALSE(ParseHostfile("a cpus=2\n", "f").ok());
  EXPECT_FALSE(ParseHostfile("# nothing\n\n", "f").ok());
}

TEST(RemoteHostsTest, RoundRobinPlacement) {
  auto hosts = *ParseHostList("a,b,c");
  auto p = PlaceProcesses(hosts, 2, 5);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->scheduler, 0);
  EXPECT_EQ(p->servers, (std::vector<int>{0, 1}));
  EXPECT_EQ(p->workers, (std::vector<int>{0, 1, 2, 0, 1}));
}

TEST(RemoteHostsTest, SlotsCapAndOverflow) {
  // a holds 2: the scheduler and server 0; everything else moves on.
  auto hosts = *ParseHostfile("a slots=2\nb slots=3\nc slots=2\n", "f");
  auto p = PlaceProcesses(hosts, 2, 4);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->scheduler, 0);
  EXPECT_EQ(p->servers, (std::vector<int>{0, 1}));
  EXPECT_EQ(p->workers, (std::vector<int>{1, 1, 2, 2}));
  auto full = PlaceProcesses(hosts, 2, 5);
  ASSERT_FALSE(full.ok());
  EXPECT_TRUE(Contains(full.status().message(), "8 processes")) << full.status().ToString();
  // One uncapped host takes any overflow.
  auto mixed = *ParseHostfile("a slots=1\nb\n", "f");
  auto m = PlaceProcesses(mixed, 1, 3);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->servers, (std::vector<int>{1}));
  EXPECT_EQ(m->workers, (std::vector<int>{1, 1, 1}));
}

// ---- shell words -----------------------------------------------------------

const std::vector<std::string>& NastyValues() {
  static const std::vector<std::string> values{"plain",     "",     "two words", "it's",  "\"double\"", "$HOME",
                                               "${X:-y}",   "`id`", "$(id)",     "a\\b",  "\\",         "line1\nline2",
                                               "tab\there", "*",    "?[a]",      "~",     "x;y|z&w",    "'",
                                               "''",        "-n",   "#c",        "a=b c", "!x",         "\\'\\\"",
                                               "trail\\",   "\n",   " lead",     "ünï €"};
  return values;
}

// What /bin/sh makes of `script`, run with stdin /dev/null.
std::string ShOutput(const std::string& script) {
  Captured c = RunCaptured(ProcessSpec{{"/bin/sh", "-c", script}, ProcessEnvironment()}, Millis(10000));
  EXPECT_FALSE(c.timed_out);
  EXPECT_EQ(c.status.ShellCode(), 0) << c.err;
  return c.out;
}

TEST(RemoteShellTest, QuoteRoundTripsThroughSh) {
  for (const auto& v : NastyValues()) {
    SCOPED_TRACE("value [" + v + "]");
    EXPECT_EQ(ShOutput("printf '%s|END\\n' " + ShellQuote(v)), v + "|END\n");
  }
  std::string all;
  for (const auto& v : NastyValues()) all += "<" + v + ">";
  EXPECT_EQ(ShOutput("printf '<%s>' " + ShellJoin(NastyValues()) + "; echo"), all + "\n");
}

TEST(RemoteShellTest, QuoteLeavesSafeWordsAlone) {
  EXPECT_EQ(ShellQuote("/opt/bin/syncline-server"), "/opt/bin/syncline-server");
  EXPECT_EQ(ShellQuote("SYNCLINE_ROLE=worker"), "SYNCLINE_ROLE=worker");
  EXPECT_EQ(ShellQuote("a b"), "'a b'");
  EXPECT_EQ(ShellQuote("it's"), "'it'\\''s'");
  EXPECT_EQ(ShellQuote(""), "''");
}

TEST(RemoteShellTest, SplitCommandWords) {
  auto w = SplitCommandWords("ssh -i '/tmp/my key' -o \"UserKnownHostsFile=/a b/k\" -p 2222 a\\ b ''");
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(*w, (std::vector<std::string>{"ssh", "-i", "/tmp/my key", "-o", "UserKnownHostsFile=/a b/k", "-p", "2222",
                                          "a b", ""}));
  EXPECT_EQ(*SplitCommandWords("  ssh  "), std::vector<std::string>{"ssh"});
  EXPECT_EQ(*SplitCommandWords("\"a\\\"b\\\\c\\x\""), std::vector<std::string>{"a\"b\\c\\x"});
  EXPECT_TRUE(SplitCommandWords("")->empty());
  EXPECT_FALSE(SplitCommandWords("ssh 'open").ok());
  EXPECT_FALSE(SplitCommandWords("ssh \"open").ok());
  EXPECT_FALSE(SplitCommandWords("ssh \\").ok());
  // Quoting and splitting are inverses.
  auto back = SplitCommandWords(ShellJoin(NastyValues()));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, NastyValues());
}

// ---- composed command lines ------------------------------------------------

TEST(RemoteJobTest, SshArgv) {
  auto argv = SshArgv({"ssh", "-i", "k"}, 2222, "bob@h2", "CMD");
  // No host-key policy of its own: the user's (~/.ssh/config, --ssh) holds.
  EXPECT_EQ(argv, (std::vector<std::string>{"ssh", "-i", "k", "-o", "BatchMode=yes", "-o", "ConnectTimeout=15", "-o",
                                            "ServerAliveInterval=10", "-p", "2222", "-T", "bob@h2", "CMD"}));
  auto no_port = SshArgv({"ssh"}, 0, "h", "C");
  EXPECT_EQ(std::count(no_port.begin(), no_port.end(), "-p"), 0);
}

TEST(RemoteJobTest, RemoteCommandLineShape) {
  std::string line = RemoteCommandLine("/work dir", 3, {"DMLC_ROLE"}, {{"SYNCLINE_ROLE", "worker"}, {"X", "a b"}},
                                       {"python", "train.py"});
  EXPECT_EQ(line.rfind("cd '/work dir' && exec /bin/sh -c '", 0), 0u) << line;
  EXPECT_TRUE(Contains(line,
                       "' pslaunch-remote 3 env -u DMLC_ROLE "
                       "SYNCLINE_ROLE=worker 'X=a b' python train.py"))
      << line;
}

HostsJob ThreeHostJob() {
  HostsJob job;
  job.shape.num_workers = 3;
  job.shape.num_servers = 2;
  job.shape.scheduler_port = 9000;
  job.shape.job_token = "cafe";
  job.shape.metrics_port = 9100;
  job.shape.extra_env = {{"NCCL_DEBUG", "INFO"}};
  job.hosts = *ParseHostList("10.0.0.1,u@10.0.0.2");
  job.bin_dir = "/opt/s/bin";
  job.command = {"python", "train.py", "--lr", "0.1"};
  job.cwd = "/home/u/job";
  job.ssh = {"ssh", "-i", "/k"};
  job.ssh_port = 2222;
  return job;
}

// The remote command of a planned process, split back into the words the
// remote shell sees after `exec /bin/sh -c WRAPPER`.
struct RemoteWords {
  std::string target;
  std::vector<std::string> unset;
  std::vector<EnvAssignment> set;
  std::vector<std::string> argv;
};

RemoteWords Decode(const PlannedProcess& p) {
  RemoteWords r;
  const auto& argv = p.spec.argv;
  auto t = std::find(argv.begin(), argv.end(), "-T");
  EXPECT_NE(t, argv.end());
  r.target = *(t + 1);
  auto words = SplitCommandWords(*(t + 2));
  EXPECT_TRUE(words.ok());
  // cd DIR && exec /bin/sh -c WRAPPER pslaunch-remote GRACE env ...
  EXPECT_GE(words->size(), 11u);
  EXPECT_EQ((*words)[6], kRemoteWrapper);
  EXPECT_EQ((*words)[9], "env");
  size_t i = 10;
  for (; i + 1 < words->size() && (*words)[i] == "-u"; i += 2) r.unset.push_back((*words)[i + 1]);
  for (; i < words->size() && (*words)[i].find('=') != std::string::npos; ++i) {
    size_t eq = (*words)[i].find('=');
    r.set.emplace_back((*words)[i].substr(0, eq), (*words)[i].substr(eq + 1));
  }
  r.argv.assign(words->begin() + static_cast<long>(i), words->end());
  return r;
}

TEST(RemoteJobTest, PlanPlacesLabelsAndSetsTheEnvironment) {
  Environment local{{"PATH", "/usr/bin"}, {"SSH_AUTH_SOCK", "/s"}, {"DMLC_ROLE", "server"}};
  auto plan = PlanHostsJob(ThreeHostJob(), local);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  std::vector<std::string> labels;
  for (const auto& p : *plan) labels.push_back(p.label);
  EXPECT_EQ(labels, (std::vector<std::string>{"scheduler @10.0.0.1", "server 0 @10.0.0.1", "server 1 @10.0.0.2",
                                              "worker 0 @10.0.0.1", "worker 1 @10.0.0.2", "worker 2 @10.0.0.1"}));
  for (const auto& p : *plan) {
    SCOPED_TRACE(p.label);
    EXPECT_EQ(p.spec.env, local);  // ssh runs with pslaunch's environment
    EXPECT_EQ(p.primary, p.role == Role::kWorker);
    EXPECT_EQ(p.spec.argv[0], "ssh");
    RemoteWords r = Decode(p);
    const bool second = p.label.find("10.0.0.2") != std::string::npos;
    EXPECT_EQ(r.target, second ? "u@10.0.0.2" : "10.0.0.1");
    EXPECT_EQ(Get(r.set, "SYNCLINE_SCHEDULER_HOST"), "10.0.0.1");
    EXPECT_EQ(Get(r.set, "SYNCLINE_SCHEDULER_PORT"), "9000");
    // The token travels on ssh's stdin (OpenRemoteStdin), never on a command line.
    EXPECT_EQ(Get(r.set, "SYNCLINE_JOB_TOKEN"), "<unset>");
    EXPECT_EQ(std::find(r.unset.begin(), r.unset.end(), "SYNCLINE_JOB_TOKEN"), r.unset.end());
    for (const std::string& word : p.spec.argv) EXPECT_EQ(word.find("cafe"), std::string::npos) << word;
    EXPECT_EQ(Get(r.set, "SYNCLINE_NUM_WORKERS"), "3");
    EXPECT_EQ(Get(r.set, "SYNCLINE_NUM_SERVERS"), "2");
    EXPECT_EQ(Get(r.set, "SYNCLINE_HOST"), second ? "10.0.0.2" : "10.0.0.1");
    EXPECT_EQ(Get(r.set, "NCCL_DEBUG"), "INFO");
    EXPECT_EQ(Get(r.set, "PATH"), "<unset>");  // only pslaunch's settings travel
    EXPECT_NE(std::find(r.unset.begin(), r.unset.end(), "DMLC_ROLE"), r.unset.end());
    if (p.role == Role::kWorker) {
      EXPECT_EQ(r.argv, (std::vector<std::string>{"python", "train.py", "--lr", "0.1"}));
      EXPECT_EQ(Get(r.set, "SYNCLINE_WORKER_RANK"), std::to_string(p.rank));
      EXPECT_EQ(Get(r.set, "SYNCLINE_SERVER_RANK"), "<unset>");
      EXPECT_NE(std::find(r.unset.begin(), r.unset.end(), "SYNCLINE_SERVER_RANK"), r.unset.end());
    } else {
      EXPECT_EQ(r.argv.size(), 1u);
      EXPECT_EQ(Get(r.set, "SYNCLINE_WORKER_RANK"), "<unset>");
      EXPECT_NE(std::find(r.unset.begin(), r.unset.end(), "DMLC_WORKER_ID"), r.unset.end());
    }
  }
  EXPECT_EQ(Decode((*plan)[0]).argv[0], "/opt/s/bin/syncline-scheduler");
  EXPECT_EQ(Decode((*plan)[2]).argv[0], "/opt/s/bin/syncline-server");
  EXPECT_EQ(Get(Decode((*plan)[2]).set, "SYNCLINE_SERVER_RANK"), "1");
  // Metrics ports: the process's index on its host. 10.0.0.1 holds the
  // scheduler, server 0, workers 0 and 2; 10.0.0.2 server 1 and worker 1.
  const char* ports[] = {"9100", "9101", "9100", "9102", "9101", "9103"};
  for (size_t i = 0; i < plan->size(); ++i)
    EXPECT_EQ(Get(Decode((*plan)[i]).set, "SYNCLINE_METRICS_PORT"), ports[i]) << (*plan)[i].label;
  // Local rank and size among the workers of a host.
  EXPECT_EQ(Get(Decode((*plan)[5]).set, "SYNCLINE_LOCAL_RANK"), "1");
  EXPECT_EQ(Get(Decode((*plan)[5]).set, "SYNCLINE_LOCAL_SIZE"), "2");
  EXPECT_EQ(Get(Decode((*plan)[4]).set, "SYNCLINE_LOCAL_RANK"), "0");
  EXPECT_EQ(Get(Decode((*plan)[4]).set, "SYNCLINE_LOCAL_SIZE"), "1");
}

TEST(RemoteJobTest, PlanRefusesWhatCannotWork) {
  HostsJob job = ThreeHostJob();
  job.shape.extra_env = {{"SYNCLINE_ROLE", "x"}};
  EXPECT_FALSE(PlanHostsJob(job, {}).ok());
  job.shape.extra_env = {{"SYNCLINE_PORT", "7000"}};  // two processes share a host
  auto port = PlanHostsJob(job, {});
  ASSERT_FALSE(port.ok());
  EXPECT_TRUE(Contains(port.status().message(), "same port")) << port.status().ToString();
  job.shape.extra_env = {{"SYNCLINE_LOCAL_RANK", "0"}};
  EXPECT_FALSE(PlanHostsJob(job, {}).ok());
  job.shape.extra_env = {};
  job.command = {};
  EXPECT_FALSE(PlanHostsJob(job, {}).ok());
  // One process per host: a data port given to all is fine.
  HostsJob spread = ThreeHostJob();
  spread.hosts = *ParseHostfile("a slots=1\nb slots=1\nc slots=1\nd slots=1\ne slots=1\nf slots=1\n", "f");
  spread.shape.extra_env = {{"SYNCLINE_PORT", "7000"}};
  EXPECT_TRUE(PlanHostsJob(spread, {}).ok());
}

// ---- the remote wrapper, run locally
// -----------------------------------------

// A temporary directory, removed with its files.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/remote_job_test_XXXXXX";
    path_ = mkdtemp(tmpl) ? tmpl : "";
  }
  ~TempDir() {
    std::string cmd = "rm -rf '" + path_ + "'";
    if (!path_.empty()) {
      EXPECT_EQ(std::system(cmd.c_str()), 0);
    }
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Running (a zombie waiting for its reaper counts as gone).
bool Alive(pid_t pid) {
  std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  size_t paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] != 'Z';
}

// Waits up to `limit` for `path` to hold a pid; 0 if it did not.
pid_t WaitForPid(const std::string& path, Millis limit) {
  Deadline d = Deadline::After(limit);
  while (!d.Expired()) {
    std::string text = ReadFile(path);
    if (!text.empty() && text.back() == '\n') return static_cast<pid_t>(std::stol(text));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return 0;
}

bool WaitGone(pid_t pid, Millis limit) {
  Deadline d = Deadline::After(limit);
  while (Alive(pid) && !d.Expired()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  return !Alive(pid);
}

TEST(RemoteWrapperTest, PassesTheTokenTheEnvironmentAndExitStatus) {
  const std::string token = " a b'\"$x\\ ";  // spaces at both ends, quotes, a dollar, a backslash
  auto pipe = OpenRemoteStdin(token);
  ASSERT_TRUE(pipe.ok()) << pipe.status().ToString();
  std::vector<EnvAssignment> set;
  for (size_t i = 0; i < NastyValues().size(); ++i) set.emplace_back("V" + std::to_string(i), NastyValues()[i]);
  // The program prints each value and exits 7.
  std::string script = "for i in $(seq 0 " + std::to_string(NastyValues().size() - 1) +
                       "); do eval \"printf '<%s>' \\\"\\$V$i\\\"\"; done; echo; "
                       "printf 'token=<%s>\\n' \"$SYNCLINE_JOB_TOKEN\"; echo gone=${GONE-unset} pwd=$(pwd); exit 7";
  std::string line = RemoteCommandLine("/tmp", 2, {"GONE"}, set, {"sh", "-c", script});
  Environment env = ProcessEnvironment();
  env["GONE"] = "still here";
  Captured c = RunCaptured(ProcessSpec{{"/bin/sh", "-c", line}, env, pipe->read_fd}, Millis(10000));
  close(pipe->read_fd);
  close(pipe->write_fd);
  ASSERT_FALSE(c.timed_out);
  EXPECT_EQ(c.status.ShellCode(), 7) << c.out << c.err;
  std::string all;
  for (const auto& v : NastyValues()) all += "<" + v + ">";
  EXPECT_TRUE(Contains(c.out, all + "\n")) << c.out;
  EXPECT_TRUE(Contains(c.out, "token=<" + token + ">\n")) << c.out;
  EXPECT_TRUE(Contains(c.out, "gone=unset pwd=/tmp\n")) << c.out;
}

TEST(RemoteWrapperTest, ATokenThatCannotBeOneLineIsRefused) {
  EXPECT_EQ(OpenRemoteStdin("two\nlines").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(OpenRemoteStdin(std::string(PIPE_BUF, 'x')).status().code(), StatusCode::kInvalidArgument);
}

// Starts `program` under the wrapper with stdin from its pipe (the token,
// then nothing); the program writes its pid to DIR/pid. Closing the write
// end is the connection dropping.
struct Wrapped {
  std::unique_ptr<Process> process;
  RemoteStdin pipe;
  pid_t program = 0;
};

Wrapped StartWrapped(const TempDir& dir, const std::string& program, int grace_s) {
  Wrapped w;
  auto pipe = OpenRemoteStdin("token");
  EXPECT_TRUE(pipe.ok());
  w.pipe = *pipe;
  std::string line =
      RemoteCommandLine(dir.path(), grace_s, {}, {}, {"sh", "-c", "echo $$ > pid.tmp; mv pid.tmp pid; " + program});
  auto p = Process::Spawn(ProcessSpec{{"/bin/sh", "-c", line}, ProcessEnvironment(), w.pipe.read_fd});
  EXPECT_TRUE(p.ok());
  close(w.pipe.read_fd);
  w.process = std::move(*p);
  w.program = WaitForPid(dir.path() + "/pid", Millis(5000));
  return w;
}

TEST(RemoteWrapperTest, ProgramDiesWhenTheConnectionCloses) {
  TempDir dir;
  Wrapped w = StartWrapped(dir, "exec sleep 300", 5);
  ASSERT_GT(w.program, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_TRUE(Alive(w.program));
  EXPECT_FALSE(w.process->Poll());
  auto t0 = std::chrono::steady_clock::now();
  close(w.pipe.write_fd);  // pslaunch is gone
  EXPECT_TRUE(WaitGone(w.program, Millis(3000)));
  Deadline d = Deadline::AfterMs(3000);
  while (!w.process->Poll() && !d.Expired()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(w.process->Poll());
  EXPECT_EQ(w.process->Poll()->ShellCode(), 128 + SIGTERM);
  EXPECT_LT(testing::SecondsSince(t0), 2.0);
}

TEST(RemoteWrapperTest, ProgramIgnoringSigtermIsKilledAfterTheGrace) {
  TempDir dir;
  // Ignores SIGTERM and forks a child into its group: both must go.
  Wrapped w = StartWrapped(dir, "trap '' TERM; sleep 300 & echo $! > child; wait; wait", 1);
  ASSERT_GT(w.program, 0);
  pid_t child = WaitForPid(dir.path() + "/child", Millis(3000));
  ASSERT_GT(child, 0);
  auto t0 = std::chrono::steady_clock::now();
  close(w.pipe.write_fd);
  EXPECT_TRUE(WaitGone(w.program, Millis(5000)));
  EXPECT_TRUE(WaitGone(child, Millis(1000)));
  EXPECT_LT(testing::SecondsSince(t0), 4.0);
  EXPECT_GE(testing::SecondsSince(t0), 0.9);  // the grace was given
}

TEST(RemoteWrapperTest, NormalExitLeavesNothingBehind) {
  TempDir dir;
  Wrapped w = StartWrapped(dir, "exit 0", 5);
  Deadline d = Deadline::AfterMs(5000);
  while (!w.process->Poll() && !d.Expired()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(w.process->Poll());
  EXPECT_EQ(w.process->Poll()->ShellCode(), 0);
  close(w.pipe.write_fd);
}

// ---- pslaunch --hosts with a stand-in ssh
// ------------------------------------

// Runs the remote command locally as sshd would (through a shell, in a
// session of its own: signals to the local ssh's group do not reach the
// "remote" side), after checking that pslaunch's options came first. Unlike a
// real ssh, killing it does not close the remote side's stdin; only pslaunch's
// exit does (its stdin pipe).
constexpr const char* kFakeSsh = R"(#!/bin/sh
case "$*" in *"BatchMode=yes"*"-T"*) ;; *) echo "fake ssh: unexpected options: $*" >&2; exit 255;; esac
while [ "$1" != "-T" ]; do shift; done
shift
case "$1" in down*) echo "ssh: connect to host $1 port 22: Connection refused" >&2; exit 255;; esac
exec setsid -w /bin/sh -c "$2"
)";

constexpr const char* kFakeNode = R"(#!/bin/sh
echo "role=$SYNCLINE_ROLE host=$SYNCLINE_HOST at=$SYNCLINE_SCHEDULER_HOST:$SYNCLINE_SCHEDULER_PORT srank=${SYNCLINE_SERVER_RANK-none}"
echo $$ >> "$FAKE_PIDS"
sleep "${FAKE_NODE_SECONDS:-0.3}"
)";

class PslaunchHostsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    for (const char* name : {"syncline-scheduler", "syncline-server", "ssh"}) {
      std::string path = dir_.path() + "/" + name;
      std::ofstream(path) << (std::string(name) == "ssh" ? kFakeSsh : kFakeNode);
      ASSERT_EQ(chmod(path.c_str(), 0755), 0);
    }
  }

  ProcessSpec Spec(std::vector<std::string> args) {
    std::vector<std::string> argv{PSLAUNCH_PATH, "--bin-dir", dir_.path(), "--ssh", dir_.path() + "/ssh"};
    argv.insert(argv.end(), args.begin(), args.end());
    return ProcessSpec{argv, testing::EnvWith({{"FAKE_PIDS", dir_.path() + "/pids"}})};
  }

  std::vector<pid_t> Pids() {
    std::vector<pid_t> pids;
    std::stringstream in(ReadFile(dir_.path() + "/pids"));
    for (long pid; in >> pid;) pids.push_back(static_cast<pid_t>(pid));
    return pids;
  }

  TempDir dir_;
};

TEST_F(PslaunchHostsTest, RunsEveryProcessOnItsHostWithPrefixes) {
  Captured r = RunCaptured(Spec({"--hosts", "ha,hb,ha", "-w", "3", "-s", "2", "--port", "9123", "--", "sh", "-c",
                                 "echo \"rank=$SYNCLINE_WORKER_RANK host=$SYNCLINE_HOST "
                                 "local=$SYNCLINE_LOCAL_RANK/"
                                 "$SYNCLINE_LOCAL_SIZE tok=${#SYNCLINE_JOB_TOKEN}\"; "
                                 "echo $$ >> \"$FAKE_PIDS\""}),
                           Millis(20000));
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.status.ShellCode(), 0) << r.out << r.err;
  EXPECT_TRUE(Contains(r.out, "[scheduler @ha] role=scheduler host=ha at=ha:9123 srank=none\n")) << r.out;
  EXPECT_TRUE(Contains(r.out, "[server 0 @ha] role=server host=ha at=ha:9123 srank=0\n")) << r.out;
  EXPECT_TRUE(Contains(r.out, "[server 1 @hb] role=server host=hb at=ha:9123 srank=1\n")) << r.out;
  EXPECT_TRUE(Contains(r.out, "[worker 0 @ha] rank=0 host=ha local=0/2 tok=32\n")) << r.out;
  EXPECT_TRUE(Contains(r.out, "[worker 1 @hb] rank=1 host=hb local=0/1 tok=32\n")) << r.out;
  EXPECT_TRUE(Contains(r.out, "[worker 2 @ha] rank=2 host=ha local=1/2 tok=32\n")) << r.out;
  EXPECT_TRUE(Contains(r.err, "pslaunch: job on 2 host(s) over ssh, scheduler at ha:9123")) << r.err;
}

TEST_F(PslaunchHostsTest, AFailureStopsEverythingEverywhere) {
  auto t0 = std::chrono::steady_clock::now();
  Captured r = RunCaptured(Spec({"--hosts", "ha,hb", "-w", "2", "-s", "1", "--grace", "2", "--", "sh", "-c",
                                 "echo $$ >> \"$FAKE_PIDS\"; if [ "
                                 "$SYNCLINE_WORKER_RANK = 1 ]; then sleep 0.5; "
                                 "exit 3; fi; exec sleep 300"}),
                           Millis(20000), {});
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.status.ShellCode(), 3) << r.out << r.err;
  EXPECT_TRUE(Contains(r.err, "pslaunch: worker 1 @hb exited with status 3")) << r.err;
  EXPECT_LT(testing::SecondsSince(t0), 10.0);
  // FAKE_NODE_SECONDS is 0.3: scheduler and server are gone already; worker
  // 0's sleep must be stopped by its wrapper.
  for (pid_t pid : Pids()) EXPECT_TRUE(WaitGone(pid, Millis(5000))) << pid;
}

TEST_F(PslaunchHostsTest, KillingPslaunchStopsTheRemoteProcesses) {
  auto p = Process::Spawn(
      Spec({"--hosts", "ha,hb", "-w", "2", "-s", "2", "--", "sh", "-c", "echo $$ >> \"$FAKE_PIDS\"; exec sleep 300"}));
  ASSERT_TRUE(p.ok());
  auto& pslaunch = *p;
  // Scheduler, 2 servers (FAKE_NODE_SECONDS long) and 2 workers write pids.
  Deadline d = Deadline::AfterMs(10000);
  while (Pids().size() < 5 && !d.Expired()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_EQ(Pids().size(), 5u);
  kill(pslaunch->pid(),
       SIGKILL);  // no cleanup by pslaunch: only the closed pipe tells
  auto t0 = std::chrono::steady_clock::now();
  for (pid_t pid : Pids()) EXPECT_TRUE(WaitGone(pid, Millis(5000))) << pid;
  EXPECT_LT(testing::SecondsSince(t0), 5.0);
}

TEST_F(PslaunchHostsTest, UnreachableHostIsNamed) {
  Captured r = RunCaptured(Spec({"--hosts", "ha,down1", "-w", "2", "-s", "1", "--", "sleep", "300"}), Millis(20000));
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.status.ShellCode(), 255) << r.out << r.err;
  EXPECT_TRUE(Contains(r.out, "@down1] ssh: connect to host down1 port 22: Connection refused")) << r.out;
  EXPECT_TRUE(Contains(r.err, "@down1 exited with status 255")) << r.err;
  EXPECT_TRUE(Contains(r.err, "255 is ssh's status")) << r.err;
}

TEST_F(PslaunchHostsTest, RealSshToAClosedPortFails) {
  if (access("/usr/bin/ssh", X_OK) != 0) GTEST_SKIP() << "no /usr/bin/ssh";
  // Port 1 on loopback: nothing listens, ssh fails at once with its message.
  std::vector<std::string> argv{
      PSLAUNCH_PATH, "--bin-dir", dir_.path(), "--ssh-port", "1",  "--ssh", "ssh -o UserKnownHostsFile=/dev/null",
      "--hosts",     "127.0.0.1", "-w",        "1",          "-s", "1",     "--",
      "true"};
  Captured r = RunCaptured(ProcessSpec{argv, ProcessEnvironment()}, Millis(30000));
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.status.ShellCode(), 255) << r.out << r.err;
  EXPECT_TRUE(std::regex_search(
      r.out, std::regex(R"(\[\w+( \d)? @127\.0\.0\.1\] ssh: connect to host 127\.0\.0\.1 port 1: Connection refused)")))
      << r.out;
}

TEST_F(PslaunchHostsTest, UsageErrors) {
  for (std::vector<std::string> args : std::vector<std::vector<std::string>>{
           {"--hosts", "a,,b", "-w", "1", "-s", "1", "--", "true"},
           {"--hosts", "a", "--role", "worker", "--scheduler", "a:1", "-w", "1", "-s", "1", "--", "true"},
           {"--hosts", "a", "--ssh", "ssh 'x", "-w", "1", "-s", "1", "--", "true"},
           {"--hosts", "a", "-w", "1", "-s", "1"},
           {"--hosts", "a", "-e", "SYNCLINE_PORT=1", "-w", "1", "-s", "1", "--", "true"}}) {
    Captured r = RunCaptured(Spec(args), Millis(10000));
    EXPECT_EQ(r.status.ShellCode(), 2) << r.out << r.err;
  }
}

}  // namespace
}  // namespace syncline::deploy
