// End-to-end tests of the pslaunch executable, with stand-in scheduler and
// server scripts in a temporary --bin-dir (the real binaries are proven by
// the integration tests).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "test_util.h"

namespace syncline::deploy {
namespace {

using testing::Captured;
using testing::EnvWith;
using testing::SecondsSince;

// Prints what it was given, then runs for $FAKE_NODE_SECONDS (default 0.3 s)
// and exits with $FAKE_NODE_EXIT.
constexpr const char* kFakeNode = R"(#!/bin/sh
echo "role=$SYNCLINE_ROLE workers=$SYNCLINE_NUM_WORKERS servers=$SYNCLINE_NUM_SERVERS at=$SYNCLINE_SCHEDULER_HOST:$SYNCLINE_SCHEDULER_PORT token=$SYNCLINE_JOB_TOKEN rank=${SYNCLINE_WORKER_RANK-none} host=${SYNCLINE_HOST-none} dmlc=${DMLC_ROLE-none}"
sleep "${FAKE_NODE_SECONDS:-0.3}"
exit "${FAKE_NODE_EXIT:-0}"
)";

class PslaunchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/pslaunch_test_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    bin_dir_ = tmpl;
    for (const char* name : {"syncline-scheduler", "syncline-server"}) {
      std::string path = bin_dir_ + "/" + name;
      std::ofstream(path) << kFakeNode;
      ASSERT_EQ(chmod(path.c_str(), 0755), 0);
    }
  }
  void TearDown() override {
    for (const std::string& path : files_) unlink(path.c_str());
    for (const char* name : {"syncline-scheduler", "syncline-server"}) unlink((bin_dir_ + "/" + name).c_str());
    rmdir(bin_dir_.c_str());
  }

  Captured Pslaunch(std::vector<std::string> args, std::vector<std::pair<std::string, std::string>> env = {},
                    const std::function<void(Process&, const std::string&)>& on_poll = {}) {
    std::vector<std::string> argv{PSLAUNCH_PATH, "--bin-dir", bin_dir_};
    argv.insert(argv.end(), args.begin(), args.end());
    Environment full = EnvWith({});
    full.erase("SYNCLINE_JOB_TOKEN");  // a token in the shell running the tests would be the job's
    for (auto& [k, v] : env) full[k] = v;
    return testing::RunCaptured(ProcessSpec{argv, full}, Millis(20000), on_poll);
  }

  // A file in the test's directory holding `text`, readable by its owner only.
  std::string WriteFile(const std::string& name, const std::string& text) {
    const std::string path = bin_dir_ + "/" + name;
    std::ofstream(path) << text;
    chmod(path.c_str(), 0600);
    files_.push_back(path);
    return path;
  }

  std::string bin_dir_;
  std::vector<std::string> files_;
};

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

std::string ReadProcFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// This user's processes whose command line, and whose environment, hold `text`.
std::pair<std::vector<std::string>, int> ProcessesHolding(const std::string& text) {
  std::vector<std::string> on_command_line;
  int in_environment = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string pid = entry.path().filename();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string cmdline = ReadProcFile(entry.path() / "cmdline");
    if (Contains(cmdline, text)) on_command_line.push_back(pid + ": " + cmdline);
    if (Contains(ReadProcFile(entry.path() / "environ"), "SYNCLINE_JOB_TOKEN=" + text + '\0')) ++in_environment;
  }
  return {on_command_line, in_environment};
}

TEST_F(PslaunchTest, LocalJobRunsEveryRoleWithItsEnvironment) {
  Captured r = Pslaunch({"-w", "2", "-s", "2", "--", "sh", "-c", "echo \"rank=$SYNCLINE_WORKER_RANK "
                                                                  "role=$SYNCLINE_ROLE dmlc=${DMLC_ROLE-none} "
                                                                  "tok=$SYNCLINE_JOB_TOKEN\""},
                        {{"DMLC_ROLE", "server"}, {"DMLC_WORKER_ID", "5"}});
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.status.ShellCode(), 0) << r.out << r.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex(R"(\[scheduler\] role=scheduler workers=2 servers=2 )"
                                                     R"(at=127\.0\.0\.1:(\d+) token=([0-9a-f]{32}) rank=none )"
                                                     R"(host=none dmlc=none)")))
      << r.out;
  const std::string token = m[2];
  EXPECT_GT(std::stoi(m[1]), 0);
  for (const char* server : {"[server 0] role=server", "[server 1] role=server"}) EXPECT_TRUE(Contains(r.out, server));
  EXPECT_TRUE(Contains(r.out, "[worker 0] rank=0 role=worker dmlc=none tok=" + token + "\n")) << r.out;
  EXPECT_TRUE(Contains(r.out, "[worker 1] rank=1 role=worker dmlc=none tok=" + token + "\n")) << r.out;
  EXPECT_TRUE(Contains(r.err, "pslaunch: local job")) << r.err;
}

TEST_F(PslaunchTest, PortTransportAndEnvOptions) {
  Captured r = Pslaunch({"-w", "1", "-s", "1", "--port", "23456", "--transport", "ipc", "--env", "A=1", "-e",
                         "B=x y", "sh", "-c", "echo $SYNCLINE_SCHEDULER_PORT $SYNCLINE_TRANSPORT $A $B; exit 0"});
  EXPECT_EQ(r.status.ShellCode(), 0) << r.out << r.err;
  EXPECT_TRUE(Contains(r.out, "[worker 0] 23456 ipc 1 x y\n")) << r.out;
  EXPECT_TRUE(Contains(r.out, "at=127.0.0.1:23456")) << r.out;
}

TEST_F(PslaunchTest, WorkerCommandKeepsItsOwnOptions) {
  Captured r = Pslaunch({"-w", "1", "-s", "1", "sh", "-c", "echo \"$0 $1\"", "--workers", "--help"});
  EXPECT_EQ(r.status.ShellCode(), 0) << r.out << r.err;
  EXPECT_TRUE(Contains(r.out, "[worker 0] --workers --help\n")) << r.out;
}

TEST_F(PslaunchTest, FailingWorkerEndsTheJobWithItsStatus) {
  auto t0 = std::chrono::steady_clock::now();
  Captured r = Pslaunch({"-w", "2", "-s", "1", "--", "sh", "-c",
                         "if [ \"$SYNCLINE_WORKER_RANK\" = 1 ]; then echo failing >&2; exit 3; fi; sleep 30"},
                        {{"FAKE_NODE_SECONDS", "30"}});
  EXPECT_EQ(r.status.ShellCode(), 3) << r.out << r.err;
  EXPECT_TRUE(Contains(r.err, "pslaunch: worker 1 exited with status 3")) << r.err;
  EXPECT_TRUE(Contains(r.out, "[worker 1] failing\n")) << r.out;
  EXPECT_LT(SecondsSince(t0), 5.0);
}

TEST_F(PslaunchTest, FailingServerEndsTheJob) {
  Captured r = Pslaunch({"-w", "1", "-s", "1", "--", "sleep", "30"}, {{"FAKE_NODE_EXIT", "4"}});
  EXPECT_EQ(r.status.ShellCode(), 4) << r.out << r.err;
  EXPECT_TRUE(std::regex_search(r.err, std::regex("pslaunch: (scheduler|server 0) exited with status 4"))) << r.err;
}

TEST_F(PslaunchTest, Timeout) {
  Captured r = Pslaunch({"-w", "1", "-s", "1", "--timeout", "0.5", "--", "sleep", "30"}, {{"FAKE_NODE_SECONDS", "30"}});
  EXPECT_EQ(r.status.ShellCode(), 124) << r.out << r.err;
  EXPECT_TRUE(Contains(r.err, "timeout")) << r.err;
}

TEST_F(PslaunchTest, LingeringServerIsAnError) {
  Captured r = Pslaunch({"-w", "1", "-s", "1", "--grace", "0.3", "--", "true"}, {{"FAKE_NODE_SECONDS", "30"}});
  EXPECT_EQ(r.status.ShellCode(), 1) << r.out << r.err;
  EXPECT_TRUE(Contains(r.err, "after the workers finished")) << r.err;
}

TEST_F(PslaunchTest, SigintIsForwardedAndGives130) {
  bool sent = false;
  Captured r = Pslaunch({"-w", "1", "-s", "1", "--", "sh", "-c", "echo up; sleep 30"}, {{"FAKE_NODE_SECONDS", "30"}},
                        [&sent](Process& p, const std::string& out) {
                          if (!sent && Contains(out, "[worker 0] up")) {
                            kill(p.pid(), SIGINT);  // pslaunch only, as a terminal's Ctrl-C would
                            sent = true;
                          }
                        });
  ASSERT_TRUE(sent) << r.out << r.err;
  EXPECT_EQ(r.status.ShellCode(), 130) << r.out << r.err;
  EXPECT_TRUE(Contains(r.err, "received SIGINT")) << r.err;
}

TEST_F(PslaunchTest, MultiHostWorker) {
  Captured r = Pslaunch({"--role", "worker", "--scheduler", "10.0.0.1:9000", "-w", "4", "-s", "2", "--rank", "3",
                         "--host", "10.0.0.7", "--token", "s3cret", "--", "sh", "-c",
                         "echo $SYNCLINE_ROLE $SYNCLINE_SCHEDULER_HOST:$SYNCLINE_SCHEDULER_PORT $SYNCLINE_WORKER_RANK "
                         "$SYNCLINE_HOST $SYNCLINE_JOB_TOKEN $SYNCLINE_NUM_WORKERS; exit 5"});
  EXPECT_EQ(r.status.ShellCode(), 5) << r.out << r.err;
  EXPECT_TRUE(Contains(r.out, "[worker 3] worker 10.0.0.1:9000 3 10.0.0.7 s3cret 4\n")) << r.out;
}

TEST_F(PslaunchTest, MultiHostWorkersOfOneHost) {
  Captured r = Pslaunch({"--role", "worker", "--scheduler", "10.0.0.1:9000", "-w", "4", "-s", "2", "--local-workers",
                         "2", "--node-rank", "1", "--host", "10.0.0.7", "--token", "s3cret", "--", "sh", "-c",
                         "echo rank $SYNCLINE_WORKER_RANK local $SYNCLINE_LOCAL_RANK of $SYNCLINE_LOCAL_SIZE at "
                         "$SYNCLINE_HOST"});
  EXPECT_EQ(r.status.ShellCode(), 0) << r.out << r.err;
  EXPECT_TRUE(Contains(r.out, "[worker 2] rank 2 local 0 of 2 at 10.0.0.7\n")) << r.out;
  EXPECT_TRUE(Contains(r.out, "[worker 3] rank 3 local 1 of 2 at 10.0.0.7\n")) << r.out;
  EXPECT_TRUE(Contains(r.err, "2 worker(s) on this host: worker 2 to worker 3")) << r.err;
  // The first worker of the host to fail stops the other and gives pslaunch its status, as in a
  // local job.
  r = Pslaunch({"--role", "worker", "--scheduler", "h:1", "-w", "2", "-s", "1", "--local-workers", "2",
                "--node-rank", "0", "--", "sh", "-c", "[ $SYNCLINE_LOCAL_RANK = 1 ] && exit 3; exec sleep 30"});
  EXPECT_EQ(r.status.ShellCode(), 3) << r.out << r.err;
}

TEST_F(PslaunchTest, MultiHostScheduler) {
  Captured r = Pslaunch({"--role", "scheduler", "--scheduler", "node1:9000", "-w", "4", "-s", "2"},
                        {{"SYNCLINE_JOB_TOKEN", "envtok"}});
  EXPECT_EQ(r.status.ShellCode(), 0) << r.out << r.err;
  EXPECT_TRUE(Contains(r.out, "[scheduler] role=scheduler workers=4 servers=2 at=node1:9000 token=envtok rank=none"))
      << r.out;
}

// Issue 28: `--token` shows the token to every user through ps. From a file
// (or the environment) it is on no command line: pslaunch's, the nodes' or
// the worker's.
TEST_F(PslaunchTest, TokenFromAFileIsOnNoCommandLine) {
  const std::string token = "tok-from-file-5e1f";
  const std::string file = WriteFile("token", token + "\n");
  bool scanned = false;
  std::pair<std::vector<std::string>, int> holders;
  Captured r = Pslaunch({"-w", "1", "-s", "1", "--token-file", file, "--", "sh", "-c",
                         "echo \"up tok=$SYNCLINE_JOB_TOKEN\"; sleep 30"},
                        {{"FAKE_NODE_SECONDS", "30"}}, [&](Process& p, const std::string& out) {
                          if (!scanned && Contains(out, "[worker 0] up")) {
                            holders = ProcessesHolding(token);  // every process of the job is up
                            kill(p.pid(), SIGINT);
                            scanned = true;
                          }
                        });
  ASSERT_TRUE(scanned) << r.out << r.err;
  EXPECT_EQ(r.status.ShellCode(), 130) << r.out << r.err;
  EXPECT_TRUE(Contains(r.out, "[worker 0] up tok=" + token + "\n")) << r.out;
  EXPECT_TRUE(Contains(r.out, "[scheduler] role=scheduler workers=1 servers=1 at=127.0.0.1:")) << r.out;
  EXPECT_TRUE(Contains(r.out, "token=" + token + " rank=none")) << r.out;
  EXPECT_EQ(holders.first, std::vector<std::string>{});
  // The scheduler, the server and the worker (and the commands they started).
  EXPECT_GE(holders.second, 3);
}

TEST_F(PslaunchTest, TokenFileWithWindowsLineEndAndMultiHostRole) {
  const std::string file = WriteFile("token", "s3cret\r\n");
  Captured r = Pslaunch({"--role", "worker", "--scheduler", "10.0.0.1:9000", "-w", "2", "-s", "1", "--token-file",
                         file, "--", "sh", "-c", "printf '<%s>\\n' \"$SYNCLINE_JOB_TOKEN\""},
                        {{"SYNCLINE_JOB_TOKEN", "from-env"}});  // the file wins
  EXPECT_EQ(r.status.ShellCode(), 0) << r.out << r.err;
  EXPECT_TRUE(Contains(r.out, "[worker] <s3cret>\n")) << r.out;
}

// SYNCLINE_JOB_TOKEN is the job's token in a local job too (it used to be
// replaced by a random one, leaving --token as the only way to choose it).
TEST_F(PslaunchTest, LocalJobTakesTheTokenFromTheEnvironment) {
  Captured r = Pslaunch({"-w", "1", "-s", "1", "--", "sh", "-c", "echo \"tok=$SYNCLINE_JOB_TOKEN\""},
                        {{"SYNCLINE_JOB_TOKEN", "envtok-local"}});
  EXPECT_EQ(r.status.ShellCode(), 0) << r.out << r.err;
  EXPECT_TRUE(Contains(r.out, "[worker 0] tok=envtok-local\n")) << r.out;
  EXPECT_TRUE(Contains(r.out, "token=envtok-local rank=none")) << r.out;
  // --token still wins over the environment.
  r = Pslaunch({"-w", "1", "-s", "1", "--token", "flag", "--", "sh", "-c", "echo \"tok=$SYNCLINE_JOB_TOKEN\""},
               {{"SYNCLINE_JOB_TOKEN", "envtok-local"}});
  EXPECT_EQ(r.status.ShellCode(), 0) << r.out << r.err;
  EXPECT_TRUE(Contains(r.out, "[worker 0] tok=flag\n")) << r.out;
}

TEST_F(PslaunchTest, TokenFileErrorsNameThePath) {
  const std::string empty = WriteFile("empty", "\n");
  const std::string two_lines = WriteFile("two", "a\nb\n");
  const std::string missing = bin_dir_ + "/no-such-token";
  const std::string given = WriteFile("token", "t\n");
  struct Case {
    std::vector<std::string> args;
    std::vector<std::string> messages;
  };
  std::vector<Case> cases = {
      {{"--token-file", missing}, {"--token-file " + missing, "No such file"}},
      {{"--token-file", empty}, {"--token-file " + empty, "empty"}},
      {{"--token-file", two_lines}, {"--token-file " + two_lines, "more than one line"}},
      {{"--token-file", bin_dir_}, {"--token-file " + bin_dir_, "not a regular file"}},
      {{"--token", "t", "--token-file", given}, {"excludes"}},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args{"-w", "1", "-s", "1"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    args.insert(args.end(), {"--", "true"});
    Captured r = Pslaunch(args);
    std::string joined;
    for (const auto& a : c.args) joined += a + " ";
    EXPECT_EQ(r.status.ShellCode(), 2) << joined << "\n" << r.out << r.err;
    for (const auto& m : c.messages) EXPECT_TRUE(Contains(r.err, m)) << joined << "\n" << r.err;
  }
}

TEST_F(PslaunchTest, HelpSaysTheTokenOptionIsVisibleInPs) {
  Captured r = Pslaunch({"--help"});
  EXPECT_EQ(r.status.ShellCode(), 0) << r.err;
  EXPECT_TRUE(Contains(r.out, "--token-file")) << r.out;
  EXPECT_TRUE(Contains(r.out, "Every user of this host sees it through ps")) << r.out;
}

TEST_F(PslaunchTest, UsageErrors) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  std::vector<Case> cases = {
      {{"-w", "1", "-s", "1"}, "no worker command"},
      {{"-w", "0", "-s", "1", "--", "true"}, "--workers"},
      {{"-s", "1", "--", "true"}, "--workers is required"},
      {{"-w", "1", "-s", "1", "--role", "boss", "--scheduler", "h:1", "--", "true"}, "--role"},
      {{"-w", "1", "-s", "1", "--role", "worker", "--scheduler", "nohostport", "--", "true"}, "HOST:PORT"},
      {{"-w", "1", "-s", "1", "--role", "worker", "--", "true"}, "--scheduler"},
      {{"-w", "1", "-s", "1", "--role", "worker", "--scheduler", "h:1"}, "needs the worker command"},
      {{"-w", "1", "-s", "1", "--role", "server", "--scheduler", "h:1", "--", "true"}, "only run by --role worker"},
      {{"-w", "2", "-s", "1", "--role", "worker", "--scheduler", "h:1", "--rank", "2", "--", "true"}, "--rank"},
      {{"-w", "1", "-s", "1", "--env", "NOEQUALS", "--", "true"}, "NAME=VALUE"},
      {{"-w", "1", "-s", "1", "--env", "SYNCLINE_ROLE=server", "--", "true"}, "pslaunch sets this itself"},
      {{"-w", "1", "-s", "1", "--port", "5", "--role", "worker", "--scheduler", "h:1", "--", "true"}, "excludes"},
      {{"-w", "2", "-s", "1", "--role", "worker", "--scheduler", "h:1", "--local-workers", "2", "--", "true"},
       "--node-rank"},
      {{"-w", "2", "-s", "1", "--local-workers", "2", "--node-rank", "0", "--", "true"}, "--role"},
      {{"-w", "4", "-s", "1", "--role", "worker", "--scheduler", "h:1", "--local-workers", "2", "--node-rank", "2",
        "--", "true"},
       "past --workers 4"},
      {{"-w", "2", "-s", "1", "--role", "server", "--scheduler", "h:1", "--local-workers", "2", "--node-rank", "0"},
       "--role worker only"},
  };
  for (const Case& c : cases) {
    Captured r = Pslaunch(c.args);
    std::string joined;
    for (const auto& a : c.args) joined += a + " ";
    EXPECT_EQ(r.status.ShellCode(), 2) << joined << "\n" << r.out << r.err;
    EXPECT_TRUE(Contains(r.err, c.message)) << joined << "\n" << r.err;
  }
}

TEST_F(PslaunchTest, MissingNodeBinaryIsReported) {
  unlink((bin_dir_ + "/syncline-server").c_str());
  Captured r = Pslaunch({"-w", "1", "-s", "1", "--", "true"});
  EXPECT_EQ(r.status.ShellCode(), 127) << r.err;
  EXPECT_TRUE(Contains(r.err, "syncline-server not found")) << r.err;
}

TEST_F(PslaunchTest, MissingWorkerCommandIsReported) {
  Captured r = Pslaunch({"-w", "1", "-s", "1", "--", "/nonexistent/train.py"});
  EXPECT_EQ(r.status.ShellCode(), 127) << r.err;
  EXPECT_TRUE(Contains(r.err, "cannot start worker 0")) << r.err;
}

}  // namespace
}  // namespace syncline::deploy
