#include "deploy/supervisor.h"

#include <signal.h>

#include <algorithm>

namespace syncline::deploy {
namespace {

// How long stragglers get after SIGKILL before they are reported and left to
// init, and how long output is drained after everything is reaped (a
// grandchild that outlived its parent may hold the pipe open).
constexpr long long kReapAfterKillMs = 2000;
constexpr long long kFinalDrainMs = 1000;

int PollTimeoutMs(Millis interval, const Deadline* deadline) {
  long long ms = std::max<long long>(1, interval.count());
  if (deadline != nullptr) ms = std::min(ms, std::max<long long>(1, deadline->RemainingMs()));
  return static_cast<int>(ms);
}

}  // namespace

std::string DescribeDuration(Millis d) {
  long long ms = d.count();
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + " s";
  if (ms < 1000) return std::to_string(ms) + " ms";
  std::string tenths = std::to_string(ms / 100);
  return tenths.substr(0, tenths.size() - 1) + "." + tenths.back() + " s";
}

Supervisor::Supervisor(SupervisorOptions options, LineSink output, NoticeSink notices)
    : options_(options), notices_(std::move(notices)), relay_(std::move(output)) {}

void Supervisor::Notice(const std::string& text) {
  if (notices_) notices_("pslaunch: " + text);
}

bool Supervisor::StopRequested() {
  return options_.stop_signal != nullptr && options_.stop_signal->load() != 0;
}

bool Supervisor::AllReaped() const {
  return std::all_of(children_.begin(), children_.end(), [](const Child& c) { return c.process->reaped(); });
}

bool Supervisor::PrimariesDone() const {
  return std::all_of(children_.begin(), children_.end(),
                     [](const Child& c) { return !c.info.primary || c.process->reaped(); });
}

const Supervisor::Child* Supervisor::ReapEnded() {
  const Child* failed = nullptr;
  for (Child& c : children_) {
    if (c.process->reaped()) continue;
    std::optional<ExitStatus> status = c.process->Poll();
    if (status && !status->success() && failed == nullptr) failed = &c;
  }
  return failed;
}

JobOutcome Supervisor::Run(std::vector<SupervisedProcess> processes) {
  std::optional<Deadline> job_deadline;
  if (options_.timeout.count() > 0) job_deadline = Deadline::After(options_.timeout);

  for (SupervisedProcess& p : processes) {
    Result<std::unique_ptr<Process>> started = Process::Spawn(p.spec);
    if (!started.ok()) {
      std::string reason = "cannot start " + p.label + ": " + started.status().message();
      Notice(reason);
      StopAll();
      return Finish(JobEnd::kStartFailed, 127, reason);
    }
    Child child{std::move(p), std::move(started).value()};
    const std::string prefix = "[" + child.info.label + "] ";
    relay_.Add(child.process->TakeStdout(), prefix);
    relay_.Add(child.process->TakeStderr(), prefix);
    children_.push_back(std::move(child));
  }

  std::optional<Deadline> linger_deadline;  // set once every primary is done
  while (true) {
    const Deadline* next = job_deadline ? &*job_deadline : nullptr;
    if (linger_deadline && (!next || linger_deadline->at() < next->at())) next = &*linger_deadline;
    Status polled = relay_.PollOnce(PollTimeoutMs(options_.poll_interval, next));
    if (!polled.ok()) Notice("output relay: " + polled.ToString());

    if (StopRequested()) {
      int sig = options_.stop_signal->exchange(0);
      std::string reason = "received " + SignalName(sig) + "; stopping the job";
      Notice(reason);
      StopAll();
      return Finish(JobEnd::kStopped, 128 + sig, reason);
    }
    if (const Child* failed = ReapEnded()) {
      relay_.PollOnce(0).ok();  // its last words before the verdict
      std::string reason = failed->info.label + " " + failed->process->Poll()->Describe();
      int code = failed->process->Poll()->ShellCode();
      Notice(reason);
      // The others usually fail on their own moments later (the job was
      // aborted): let them, and relay why, before stopping what is left.
      const Deadline settle = Deadline::After(options_.settle);
      while (!AllReaped() && !settle.Expired() && !StopRequested()) {
        relay_.PollOnce(PollTimeoutMs(options_.poll_interval, &settle)).ok();
        ReapEnded();
      }
      StopAll();
      return Finish(JobEnd::kProcessFailed, code, reason);
    }
    if (AllReaped()) return Finish(JobEnd::kSucceeded, 0, "");
    if (!linger_deadline && PrimariesDone()) linger_deadline = Deadline::After(options_.grace);
    if (linger_deadline && linger_deadline->Expired()) {
      std::string names;
      for (const Child& c : children_)
        if (!c.process->reaped()) names += (names.empty() ? "" : ", ") + c.info.label;
      std::string reason = names + " still running " + DescribeDuration(options_.grace) +
                           " after the workers finished; stopping it";
      Notice(reason);
      StopAll();
      return Finish(JobEnd::kLingered, 1, reason);
    }
    if (job_deadline && job_deadline->Expired()) {
      std::string reason = "timeout: the job ran for " + DescribeDuration(options_.timeout) + "; stopping it";
      Notice(reason);
      StopAll();
      return Finish(JobEnd::kTimedOut, 124, reason);
    }
  }
}

void Supervisor::StopAll() {
  // Reaped children's groups too: a grandchild may have outlived its parent.
  // (The group id of a reaped leader stays reserved while the group has
  // members, so this cannot reach an unrelated process group in practice.)
  // SIGCONT after SIGTERM: a stopped process (SIGSTOP, a debugger, Ctrl-Z) keeps SIGTERM pending
  // until continued, so without it a frozen child would always cost the whole grace period.
  for (Child& c : children_) {
    c.process->SignalGroup(SIGTERM).ok();
    c.process->SignalGroup(SIGCONT).ok();
  }
  if (options_.stop_signal != nullptr) options_.stop_signal->store(0);
  Deadline grace = Deadline::After(options_.grace);
  while (!AllReaped() && !grace.Expired()) {
    if (StopRequested()) {
      Notice("received " + SignalName(options_.stop_signal->exchange(0)) + " while stopping; killing now");
      break;
    }
    relay_.PollOnce(PollTimeoutMs(options_.poll_interval, &grace)).ok();
    ReapEnded();
  }
  for (Child& c : children_) {
    if (!c.process->reaped())
      Notice(c.info.label + " still running " + DescribeDuration(options_.grace) + " after SIGTERM; sending SIGKILL");
    c.process->SignalGroup(SIGKILL).ok();
  }
  Deadline reap = Deadline::AfterMs(kReapAfterKillMs);
  while (!AllReaped() && !reap.Expired()) {
    relay_.PollOnce(PollTimeoutMs(Millis(10), &reap)).ok();
    ReapEnded();
  }
  for (const Child& c : children_)
    if (!c.process->reaped()) Notice(c.info.label + " did not die after SIGKILL; leaving it");
}

JobOutcome Supervisor::Finish(JobEnd end, int exit_code, std::string reason) {
  relay_.DrainAndClose(Deadline::AfterMs(kFinalDrainMs));
  return JobOutcome{end, exit_code, std::move(reason)};
}

}  // namespace syncline::deploy
