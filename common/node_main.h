// RunNodeMain: the shared entry point of the node binaries (scheduler,
// server) and of programs that embed a worker: reads settings from the
// environment, sets up logging, turns SIGINT/SIGTERM into a callback, runs
// the body and maps its Status to an exit code (0 OK, 1 failure, printed).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "common/settings.h"

namespace syncline {

// Delivers SIGINT/SIGTERM to a callback on a dedicated thread (not in a
// signal handler), so the callback may lock and log. A signal that arrives
// before the callback is set is delivered when it is set.
class SignalWatcher {
 public:
  void OnSignal(std::function<void(int)> callback);
  void Deliver(int signal);

 private:
  Mutex mu_;
  std::function<void(int)> callback_ GUARDED_BY(mu_);
  int pending_ GUARDED_BY(mu_) = 0;
};

using NodeBody = std::function<Status(const Settings&, SignalWatcher&)>;

// Sets up this process's logging for a node of `role` ("worker 3" once a
// worker's rank is known) and logs the warnings Settings::FromEnvironment gave.
void InitNodeLogging(Role role, const Settings& settings, const std::vector<std::string>& warnings);

// What SIGINT/SIGTERM do to a node program.
enum class StopSignals {
  kToCallback,  // go to the SignalWatcher callback the body sets (a graceful stop)
  kExit,        // end the process at once, 128 + signal, as the default action would
};

// `role`: the role the settings must name (checked), used in log prefixes.
int RunNodeMain(Role role, const NodeBody& body, StopSignals stop_signals = StopSignals::kToCallback);

}  // namespace syncline
