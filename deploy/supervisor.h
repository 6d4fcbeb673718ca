// Supervisor: starts the processes of a job, relays their output, and decides
// how the job ends. The policy (what pslaunch promises its user):
//   - any process exiting non-zero or by a signal fails the job: it is named;
//     the others get `settle` to end by themselves (a job-wide abort reaches
//     every process, which then says why in its own words); then every group
//     left gets SIGTERM, then SIGKILL after `grace`, and the job's exit code is
//     that first process's (128 + signal when signalled);
//   - when every primary process (the workers) has exited 0, the others (the
//     scheduler and servers) have `grace` to exit by themselves; exiting 0 they
//     make the job succeed (0), still running they are stopped and it fails (1);
//   - after `timeout` (if set) everything is stopped: 124;
//   - a stop request (the launcher got SIGINT/SIGTERM) stops everything:
//     128 + that signal; another request while stopping skips the rest of the
//     grace period;
//   - a process that cannot be started stops the ones already started: 127.
// Every wait is bounded, so Run always returns.
//
// Thread-safety: none; Run is called once, by one thread. `stop_signal` may be
// written from a signal handler (std::atomic<int> is lock-free).
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "common/deadline.h"
#include "deploy/output_relay.h"
#include "deploy/process.h"

namespace syncline::deploy {

struct SupervisorOptions {
  // SIGTERM -> SIGKILL delay, and how long the non-primary processes may take
  // to exit after the primaries are done. Default 5 s.
  Millis grace{5000};
  // After a process failed, how long the others may take to end by
  // themselves before they are stopped. Default 1 s.
  Millis settle{1000};
  // Wall-clock limit of the whole job; zero = none.
  Millis timeout{0};
  // How often exits and stop requests are looked at while output is quiet.
  // Lower reacts sooner, higher wakes less. Default 50 ms.
  Millis poll_interval{50};
  // When non-null: a signal number stored here (by a signal handler) asks the
  // supervisor to stop the job. The supervisor resets it to 0 when it sees it.
  std::atomic<int>* stop_signal = nullptr;
};

struct SupervisedProcess {
  std::string label;  // "worker 1": names it in output prefixes and notices
  ProcessSpec spec;
  bool primary = false;
};

enum class JobEnd { kSucceeded, kProcessFailed, kLingered, kTimedOut, kStopped, kStartFailed };

struct JobOutcome {
  JobEnd end = JobEnd::kSucceeded;
  int exit_code = 0;   // what the launcher should exit with
  std::string reason;  // the notice that explained it; empty on success
};

// pslaunch's own messages ("pslaunch: worker 1 exited with status 3"), one
// line each, without the trailing newline.
using NoticeSink = std::function<void(const std::string& line)>;

class Supervisor {
 public:
  Supervisor(SupervisorOptions options, LineSink output, NoticeSink notices);

  // Starts `processes` in order, supervises them until the job ends, and
  // returns how it ended. When it returns, every process it started has been
  // reaped (or, stuck beyond SIGKILL, reported), and their output forwarded.
  JobOutcome Run(std::vector<SupervisedProcess> processes);

 private:
  struct Child {
    SupervisedProcess info;
    std::unique_ptr<Process> process;
  };

  // SIGTERM to every group, a grace period, SIGKILL to what is left, reap.
  void StopAll();
  // Reaps children that ended; returns the first failure among them, if any.
  const Child* ReapEnded();
  bool AllReaped() const;
  bool PrimariesDone() const;
  bool StopRequested();
  JobOutcome Finish(JobEnd end, int exit_code, std::string reason);
  void Notice(const std::string& text);

  SupervisorOptions options_;
  NoticeSink notices_;
  OutputRelay relay_;
  std::vector<Child> children_;
};

// "5 s", "1.5 s", "250 ms": durations in notices.
std::string DescribeDuration(Millis d);

}  // namespace syncline::deploy
