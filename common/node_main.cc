#include "common/node_main.h"

#include <malloc.h>
#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <thread>

#include "common/logging.h"

namespace syncline {

void SignalWatcher::OnSignal(std::function<void(int)> callback) {
  int pending;
  std::function<void(int)> run;  // a copy: callback_ may be replaced once unlocked
  {
    MutexLock lock(mu_);
    callback_ = std::move(callback);
    pending = pending_;
    if (pending != 0) run = callback_;
  }
  if (run) run(pending);
}

void SignalWatcher::Deliver(int signal) {
  std::function<void(int)> callback;
  {
    MutexLock lock(mu_);
    pending_ = signal;
    callback = callback_;
  }
  if (callback) callback(signal);
}

namespace {

// libzmq mallocs every received frame. With glibc's defaults a frame of a
// megabyte or more is a fresh mmap (or heap that was just trimmed), so each
// received chunk pays a page fault per 4 KiB and the pages are zeroed again.
// Our own processes keep freed memory for reuse instead: blocks up to 32 MiB
// (glibc's maximum) come from the heap, and the heap is not given back while
// under 1 GiB free. Memory is not returned early, so resident memory stays
// near the peak (plus what each thread's arena keeps) instead of falling back.
// (Only node binaries do this; the library never changes a host process's
// allocator.)
void KeepFreedMemoryForReuse() {
#ifdef M_MMAP_THRESHOLD
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
}

}  // namespace

void InitNodeLogging(Role role, const Settings& settings, const std::vector<std::string>& warnings) {
  std::string name = RoleName(role);
  if (role == Role::kWorker && settings.worker_rank >= 0) name += " " + std::to_string(settings.worker_rank);
  InitLogging(name, settings.log_level);
  for (const auto& w : warnings) SYNCLINE_LOG_WARN("{}", w);
}

int RunNodeMain(Role role, const NodeBody& body, StopSignals stop_signals) {
  KeepFreedMemoryForReuse();
  std::vector<std::string> warnings;
  auto settings = Settings::FromEnvironment(ProcessEnvironment(), &warnings);
  if (!settings.ok()) {
    std::fprintf(stderr, "syncline %s: bad settings: %s\n", RoleName(role), settings.status().message().c_str());
    return 2;
  }
  if (settings->role != role) {
    std::fprintf(stderr, "syncline %s: SYNCLINE_ROLE (or DMLC_ROLE) says %s\n", RoleName(role),
                 RoleName(settings->role));
    return 2;
  }
  InitNodeLogging(role, *settings, warnings);

  // Block the stop signals in every thread; one thread waits for them.
  sigset_t stop_signals_set;
  sigemptyset(&stop_signals_set);
  sigaddset(&stop_signals_set, SIGINT);
  sigaddset(&stop_signals_set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals_set, nullptr);
  signal(SIGPIPE, SIG_IGN);
  SignalWatcher watcher;
  std::thread([&watcher, stop_set = stop_signals_set, exit = stop_signals == StopSignals::kExit] {
    int sig = 0;
    if (sigwait(&stop_set, &sig) != 0) return;
    if (!exit) return watcher.Deliver(sig);
    // A program with nothing to stop gracefully ends as the default action
    // would, rather than leave its launcher to wait out the grace period.
    SYNCLINE_LOG_WARN("stopped by signal {}", sig);
    spdlog::default_logger()->flush();
    std::_Exit(128 + sig);
  }).detach();

  Status status = body(*settings, watcher);
  if (!status.ok()) {
    SYNCLINE_LOG_ERROR("exiting: {}", status.ToString());
    spdlog::default_logger()->flush();
    return 1;
  }
  spdlog::default_logger()->flush();
  return 0;
}

}  // namespace syncline
