#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include "deploy/output_relay.h"
#include "deploy/process.h"
#include "test_util.h"

namespace syncline::deploy {
namespace {

using testing::EnvWith;
using testing::SecondsSince;

ProcessSpec Sh(const std::string& script, Environment env = EnvWith({})) {
  return ProcessSpec{{"/bin/sh", "-c", script}, std::move(env)};
}

// Spawns every script, relays all their output into one string, and waits
// (bounded) until all have exited and their pipes are drained.
std::string RelayAll(const std::vector<std::pair<std::string, std::string>>& prefixed_scripts,
                     size_t max_line = 64 * 1024) {
  std::string merged;
  OutputRelay relay([&merged](std::string_view line) { merged.append(line); }, max_line);
  std::vector<std::unique_ptr<Process>> procs;
  for (const auto& [prefix, script] : prefixed_scripts) {
    auto p = Process::Spawn(Sh(script));
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    if (!p.ok()) continue;
    relay.Add((*p)->TakeStdout(), prefix);
    relay.Add((*p)->TakeStderr(), prefix);
    procs.push_back(std::move(p).value());
  }
  Deadline deadline = Deadline::AfterMs(10000);
  while (relay.open_sources() > 0 && !deadline.Expired()) EXPECT_TRUE(relay.PollOnce(50).ok());
  relay.DrainAndClose(Deadline::AfterMs(1000));
  for (auto& p : procs) {
    while (!p->Poll() && !deadline.Expired()) usleep(1000);
  }
  return merged;
}

TEST(ProcessTest, ReportsExitCodes) {
  auto r = testing::RunCaptured(Sh("exit 3"), Millis(10000));
  ASSERT_TRUE(r.spawn_error.empty()) << r.spawn_error;
  EXPECT_FALSE(r.status.success());
  EXPECT_FALSE(r.status.signaled);
  EXPECT_EQ(r.status.code, 3);
  EXPECT_EQ(r.status.ShellCode(), 3);
  EXPECT_EQ(r.status.Describe(), "exited with status 3");

  r = testing::RunCaptured(Sh("kill -9 $$"), Millis(10000));
  EXPECT_TRUE(r.status.signaled);
  EXPECT_EQ(r.status.signal, 9);
  EXPECT_EQ(r.status.ShellCode(), 137);
  EXPECT_EQ(r.status.Describe(), "killed by signal 9 (SIGKILL)");

  r = testing::RunCaptured(Sh("true"), Millis(10000));
  EXPECT_TRUE(r.status.success());
}

TEST(ProcessTest, ChildSeesExactlyItsEnvironmentAndNoStdin) {
  Environment env{{"PATH", "/usr/bin:/bin"}, {"FOO", "bar baz"}};
  auto r = testing::RunCaptured(Sh("echo \"$FOO|${HOME-nohome}\"; cat; echo end", env), Millis(10000));
  EXPECT_EQ(r.out, "bar baz|nohome\nend\n");
  EXPECT_TRUE(r.status.success());
}

TEST(ProcessTest, RunsInItsOwnProcessGroup) {
  auto r = testing::RunCaptured(Sh("cut -d' ' -f5 /proc/$$/stat; echo $$"), Millis(10000));
  // pgid == pid
  std::string out = r.out;
  size_t nl = out.find('\n');
  ASSERT_NE(nl, std::string::npos) << out;
  auto trim = [](std::string s) {
    s.erase(0, s.find_first_not_of(' '));
    return s.substr(0, s.find_last_not_of(" \n") + 1);
  };
  EXPECT_EQ(trim(out.substr(0, nl)), trim(out.substr(nl + 1)));
  EXPECT_NE(trim(out.substr(0, nl)), std::to_string(getpgrp()));
}

TEST(ProcessTest, SpawnFailureIsAStatus) {
  auto p = Process::Spawn(ProcessSpec{{"/nonexistent/program"}, {}});
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("/nonexistent/program"), std::string::npos);
  p = Process::Spawn(ProcessSpec{{"no-such-program-xyz"}, EnvWith({})});
  EXPECT_FALSE(p.ok());
  EXPECT_FALSE(Process::Spawn(ProcessSpec{{}, {}}).ok());
}

TEST(ProcessTest, SignalGroupReachesGrandchildren) {
  // The shell forks sleep and waits: SIGTERM to the group ends both, and the
  // pipe (held by sleep too) reaches end-of-file.
  auto t0 = std::chrono::steady_clock::now();
  std::string merged;
  OutputRelay relay([&merged](std::string_view line) { merged.append(line); });
  auto p = Process::Spawn(Sh("echo started; sleep 30 & wait"));
  ASSERT_TRUE(p.ok());
  relay.Add((*p)->TakeStdout(), "");
  relay.Add((*p)->TakeStderr(), "");
  Deadline deadline = Deadline::AfterMs(10000);
  while (merged.empty() && !deadline.Expired()) ASSERT_TRUE(relay.PollOnce(20).ok());
  ASSERT_TRUE((*p)->SignalGroup(SIGTERM).ok());
  while (relay.open_sources() > 0 && !deadline.Expired()) ASSERT_TRUE(relay.PollOnce(20).ok());
  while (!(*p)->Poll() && !deadline.Expired()) usleep(1000);
  ASSERT_TRUE((*p)->Poll().has_value());
  EXPECT_TRUE((*p)->Poll()->signaled);
  EXPECT_EQ(relay.open_sources(), 0u);
  EXPECT_LT(SecondsSince(t0), 5.0);
  EXPECT_TRUE((*p)->SignalGroup(SIGTERM).ok());  // an empty group is not an error
}

TEST(OutputRelayTest, PrefixesStdoutAndStderrLines) {
  std::string out = RelayAll({{"[worker 0] ", "echo one; echo two >&2; echo three"}});
  EXPECT_NE(out.find("[worker 0] one\n"), std::string::npos) << out;
  EXPECT_NE(out.find("[worker 0] two\n"), std::string::npos) << out;
  EXPECT_NE(out.find("[worker 0] three\n"), std::string::npos) << out;
  EXPECT_EQ(out.size(), 3 * std::string("[worker 0] ").size() + 4 + 4 + 6);
}

TEST(OutputRelayTest, JoinsPartialLinesAndFlushesTheTail) {
  std::string out = RelayAll({{"[server 1] ", "printf 'hel'; sleep 0.2; printf 'lo\\nwor'; sleep 0.2; "
                                              "printf 'ld\\nno newline'; printf 'err tail' >&2"}});
  EXPECT_NE(out.find("[server 1] hello\n"), std::string::npos) << out;
  EXPECT_NE(out.find("[server 1] world\n"), std::string::npos) << out;
  EXPECT_NE(out.find("[server 1] no newline\n"), std::string::npos) << out;
  EXPECT_NE(out.find("[server 1] err tail\n"), std::string::npos) << out;
  EXPECT_EQ(out.find("[server 1] hel\n"), std::string::npos) << out;
  EXPECT_EQ(out.find("[server 1] wor\n"), std::string::npos) << out;
}

TEST(OutputRelayTest, LinesOfManyChildrenNeverInterleave) {
  // Each child writes its lines in two halves with a pause in between, while
  // the others are writing too.
  std::vector<std::pair<std::string, std::string>> scripts;
  for (int i = 0; i < 4; ++i)
    scripts.push_back({"[worker " + std::to_string(i) + "] ",
                       "for n in 1 2 3; do printf 'w" + std::to_string(i) +
                           "-first-half-'; sleep 0.05; printf 'second-half\\n'; done"});
  scripts.push_back({"[scheduler] ", "echo ready"});
  std::string out = RelayAll(scripts);
  int lines = 0;
  size_t pos = 0;
  while (pos < out.size()) {
    size_t nl = out.find('\n', pos);
    ASSERT_NE(nl, std::string::npos);
    std::string line = out.substr(pos, nl - pos);
    pos = nl + 1;
    ++lines;
    if (line == "[scheduler] ready") continue;
    ASSERT_EQ(line.rfind("[worker ", 0), 0u) << line;
    char rank = line[8];
    EXPECT_EQ(line, std::string("[worker ") + rank + "] w" + rank + "-first-half-second-half");
  }
  EXPECT_EQ(lines, 13);
}

TEST(OutputRelayTest, CutsOverlongLines) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  std::string out;
  OutputRelay relay([&out](std::string_view line) { out.append(line); }, 4);
  relay.Add(fds[0], "> ");
  ASSERT_EQ(write(fds[1], "abcdefghij\nxy", 13), 13);
  ASSERT_TRUE(relay.PollOnce(1000).ok());
  EXPECT_EQ(out, "> abcd\n> efgh\n> ij\n");
  close(fds[1]);
  relay.DrainAndClose(Deadline::AfterMs(1000));
  EXPECT_EQ(out, "> abcd\n> efgh\n> ij\n> xy\n");
  EXPECT_EQ(relay.open_sources(), 0u);
}

TEST(OutputRelayTest, DrainIsBoundedWhenAPipeStaysOpen) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  std::string out;
  OutputRelay relay([&out](std::string_view line) { out.append(line); });
  relay.Add(fds[0], "");
  ASSERT_EQ(write(fds[1], "partial", 7), 7);
  auto t0 = std::chrono::steady_clock::now();
  relay.DrainAndClose(Deadline::AfterMs(200));
  EXPECT_LT(SecondsSince(t0), 2.0);
  EXPECT_EQ(out, "partial\n");
  close(fds[1]);
}

TEST(OutputRelayTest, IdlePollSleeps) {
  OutputRelay relay([](std::string_view) {});
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(relay.PollOnce(50).ok());
  EXPECT_GE(SecondsSince(t0), 0.04);
}

}  // namespace
}  // namespace syncline::deploy
