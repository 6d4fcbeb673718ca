// Helpers shared by the deploy tests: run a process to completion (bounded)
// and collect its stdout and stderr as text.
#pragma once

#include <signal.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "common/deadline.h"
#include "common/settings.h"
#include "deploy/output_relay.h"
#include "deploy/process.h"

namespace syncline::deploy::testing {

struct Captured {
  ExitStatus status;
  std::string out;
  std::string err;
  bool timed_out = false;
  std::string spawn_error;  // non-empty when the process could not start
};

inline Captured RunCaptured(const ProcessSpec& spec, Millis limit,
                            const std::function<void(Process&, const std::string& out)>& on_poll = {}) {
  Captured c;
  auto started = Process::Spawn(spec);
  if (!started.ok()) {
    c.spawn_error = started.status().ToString();
    return c;
  }
  Process& p = **started;
  OutputRelay out([&c](std::string_view l) { c.out.append(l); });
  OutputRelay err([&c](std::string_view l) { c.err.append(l); });
  out.Add(p.TakeStdout(), "");
  err.Add(p.TakeStderr(), "");
  Deadline deadline = Deadline::After(limit);
  while (!p.Poll() && !deadline.Expired()) {
    out.PollOnce(5).ok();
    err.PollOnce(5).ok();
    if (on_poll) on_poll(p, c.out);
  }
  if (!p.Poll()) {
    c.timed_out = true;
    p.SignalGroup(SIGKILL).ok();
    Deadline reap = Deadline::AfterMs(2000);
    while (!p.Poll() && !reap.Expired()) out.PollOnce(5).ok();
  }
  out.DrainAndClose(Deadline::AfterMs(2000));
  err.DrainAndClose(Deadline::AfterMs(2000));
  if (p.Poll()) c.status = *p.Poll();
  return c;
}

// The test's own environment with `extra` added (PATH etc. kept).
inline Environment EnvWith(std::vector<std::pair<std::string, std::string>> extra) {
  Environment env = ProcessEnvironment();
  for (auto& [k, v] : extra) env[k] = v;
  return env;
}

inline double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace syncline::deploy::testing
