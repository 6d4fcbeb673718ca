#include "deploy/supervisor.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <thread>

#include "test_util.h"

namespace syncline::deploy {
namespace {

using testing::EnvWith;
using testing::SecondsSince;

SupervisedProcess Sh(const std::string& label, const std::string& script, bool primary = true) {
  return SupervisedProcess{label, ProcessSpec{{"/bin/sh", "-c", script}, EnvWith({})}, primary};
}

struct Supervised {
  JobOutcome outcome;
  std::string output;
  std::vector<std::string> notices;
  double seconds = 0;

  bool Noticed(const std::string& text) const {
    for (const auto& n : notices)
      if (n.find(text) != std::string::npos) return true;
    return false;
  }
  std::string AllNotices() const {
    std::string all;
    for (const auto& n : notices) all += n + "\n";
    return all;
  }
};

Supervised Supervise(std::vector<SupervisedProcess> procs, SupervisorOptions options = {}) {
  Supervised run;
  auto t0 = std::chrono::steady_clock::now();
  Supervisor supervisor(
      options, [&run](std::string_view line) { run.output.append(line); },
      [&run](const std::string& line) { run.notices.push_back(line); });
  run.outcome = supervisor.Run(std::move(procs));
  run.seconds = SecondsSince(t0);
  return run;
}

TEST(SupervisorTest, AllExitZeroSucceeds) {
  Supervised r = Supervise({Sh("scheduler", "sleep 0.3; echo bye", false), Sh("server 0", "sleep 0.2", false),
                     Sh("worker 0", "echo hi"), Sh("worker 1", "echo hi >&2")});
  EXPECT_EQ(r.outcome.end, JobEnd::kSucceeded) << r.AllNotices();
  EXPECT_EQ(r.outcome.exit_code, 0);
  EXPECT_TRUE(r.notices.empty()) << r.AllNotices();
  EXPECT_NE(r.output.find("[worker 0] hi\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("[worker 1] hi\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("[scheduler] bye\n"), std::string::npos) << r.output;
}

TEST(SupervisorTest, FailingWorkerStopsTheOthersQuickly) {
  Supervised r = Supervise({Sh("scheduler", "sleep 30", false), Sh("worker 0", "sleep 30"),
                     Sh("worker 1", "sleep 0.2; echo 'about to fail'; exit 3")});
  EXPECT_EQ(r.outcome.end, JobEnd::kProcessFailed);
  EXPECT_EQ(r.outcome.exit_code, 3);
  EXPECT_EQ(r.outcome.reason, "worker 1 exited with status 3");
  EXPECT_TRUE(r.Noticed("pslaunch: worker 1 exited with status 3")) << r.AllNotices();
  EXPECT_NE(r.output.find("[worker 1] about to fail\n"), std::string::npos) << r.output;
  EXPECT_LT(r.seconds, 4.0);  // SIGTERM ended the sleeps; no grace period spent
}

TEST(SupervisorTest, KilledBySignalGives128PlusSignal) {
  Supervised r = Supervise({Sh("server 0", "sleep 30", false), Sh("worker 0", "kill -9 $$")});
  EXPECT_EQ(r.outcome.end, JobEnd::kProcessFailed);
  EXPECT_EQ(r.outcome.exit_code, 137);
  EXPECT_TRUE(r.Noticed("worker 0 killed by signal 9 (SIGKILL)")) << r.AllNotices();
}

TEST(SupervisorTest, AFailingServiceFailsTheJob) {
  Supervised r = Supervise({Sh("server 0", "exit 7", false), Sh("worker 0", "sleep 30")});
  EXPECT_EQ(r.outcome.exit_code, 7);
  EXPECT_EQ(r.outcome.reason, "server 0 exited with status 7");
}

TEST(SupervisorTest, SigtermIgnoringProcessIsKilledAfterGrace) {
  SupervisorOptions options;
  options.grace = Millis(300);
  // trap '' makes SIGTERM ignored by the shell and the sleep it starts.
  Supervised r = Supervise({Sh("server 0", "trap '' TERM; sleep 30", false), Sh("worker 0", "sleep 0.2; exit 5")},
                    options);
  EXPECT_EQ(r.outcome.exit_code, 5);
  EXPECT_TRUE(r.Noticed("server 0 still running 300 ms after SIGTERM; sending SIGKILL")) << r.AllNotices();
  EXPECT_GE(r.seconds, 0.45);
  EXPECT_LT(r.seconds, 4.0);
}

TEST(SupervisorTest, StoppedProcessEndsOnSigtermWithoutWaitingForTheGrace) {
  SupervisorOptions options;
  options.grace = Millis(3000);
  // The server stops itself (as SIGSTOP or a debugger would); SIGTERM alone stays pending.
  Supervised r = Supervise({Sh("server 0", "kill -STOP $$; sleep 30", false), Sh("worker 0", "sleep 0.3; exit 5")},
                           options);
  EXPECT_EQ(r.outcome.exit_code, 5);
  EXPECT_FALSE(r.Noticed("still running")) << r.AllNotices();
  EXPECT_LT(r.seconds, 2.5);
}

TEST(SupervisorTest, ServicesThatDoNotExitAfterTheWorkersFailTheJob) {
  SupervisorOptions options;
  options.grace = Millis(300);
  Supervised r = Supervise({Sh("scheduler", "sleep 30", false), Sh("server 0", "true", false), Sh("worker 0", "true")},
                    options);
  EXPECT_EQ(r.outcome.end, JobEnd::kLingered);
  EXPECT_EQ(r.outcome.exit_code, 1);
  EXPECT_TRUE(r.Noticed("scheduler still running 300 ms after the workers finished")) << r.AllNotices();
  EXPECT_LT(r.seconds, 4.0);
}

TEST(SupervisorTest, ServiceExitingEarlyWithZeroIsFine) {
  Supervised r = Supervise({Sh("server 0", "true", false), Sh("worker 0", "sleep 0.3")});
  EXPECT_EQ(r.outcome.end, JobEnd::kSucceeded) << r.AllNotices();
}

TEST(SupervisorTest, TimeoutStopsEverything) {
  SupervisorOptions options;
  options.timeout = Millis(400);
  Supervised r = Supervise({Sh("scheduler", "sleep 30", false), Sh("worker 0", "echo working; sleep 30")}, options);
  EXPECT_EQ(r.outcome.end, JobEnd::kTimedOut);
  EXPECT_EQ(r.outcome.exit_code, 124);
  EXPECT_TRUE(r.Noticed("timeout")) << r.AllNotices();
  EXPECT_NE(r.output.find("[worker 0] working\n"), std::string::npos);
  EXPECT_GE(r.seconds, 0.35);
  EXPECT_LT(r.seconds, 4.0);
}

TEST(SupervisorTest, StopRequestEndsTheJobWith128PlusSignal) {
  std::atomic<int> stop{0};
  SupervisorOptions options;
  options.stop_signal = &stop;
  std::thread requester([&stop] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    stop.store(SIGTERM);
  });
  Supervised r = Supervise({Sh("scheduler", "sleep 30", false), Sh("worker 0", "sleep 30")}, options);
  requester.join();
  EXPECT_EQ(r.outcome.end, JobEnd::kStopped);
  EXPECT_EQ(r.outcome.exit_code, 143);
  EXPECT_TRUE(r.Noticed("received SIGTERM")) << r.AllNotices();
  EXPECT_LT(r.seconds, 4.0);
}

TEST(SupervisorTest, SecondStopRequestSkipsTheGracePeriod) {
  std::atomic<int> stop{0};
  SupervisorOptions options;
  options.stop_signal = &stop;
  options.grace = Millis(20000);
  std::thread requester([&stop] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    stop.store(SIGINT);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    stop.store(SIGINT);
  });
  Supervised r = Supervise({Sh("worker 0", "trap '' TERM; sleep 30")}, options);
  requester.join();
  EXPECT_EQ(r.outcome.exit_code, 130);
  EXPECT_TRUE(r.Noticed("received SIGINT while stopping; killing now")) << r.AllNotices();
  EXPECT_LT(r.seconds, 5.0);
}

TEST(SupervisorTest, StartFailureStopsWhatWasStarted) {
  std::vector<SupervisedProcess> procs{Sh("scheduler", "sleep 30", false)};
  procs.push_back(SupervisedProcess{"worker 0", ProcessSpec{{"/nonexistent/train"}, EnvWith({})}, true});
  Supervised r = Supervise(std::move(procs));
  EXPECT_EQ(r.outcome.end, JobEnd::kStartFailed);
  EXPECT_EQ(r.outcome.exit_code, 127);
  EXPECT_TRUE(r.Noticed("cannot start worker 0")) << r.AllNotices();
  EXPECT_LT(r.seconds, 4.0);
}

TEST(SupervisorTest, DescribeDuration) {
  EXPECT_EQ(DescribeDuration(Millis(5000)), "5 s");
  EXPECT_EQ(DescribeDuration(Millis(250)), "250 ms");
  EXPECT_EQ(DescribeDuration(Millis(1500)), "1.5 s");
}

}  // namespace
}  // namespace syncline::deploy
