// Process: one child process started by pslaunch. It runs in its own process
// group (so a signal reaches everything it forked), its stdout and stderr come
// back through non-blocking pipes, its stdin is /dev/null (or a descriptor the
// spec names), and it sees exactly
// the environment it was given. Nothing here blocks without a bound.
//
// Thread-safety: none; a Process is owned and used by one thread.
#pragma once

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/settings.h"
#include "common/status.h"

namespace syncline::deploy {

// How a child ended.
struct ExitStatus {
  bool signaled = false;  // killed by `signal`, else exited with `code`
  int code = 0;
  int signal = 0;

  static ExitStatus FromWaitStatus(int wstatus);
  bool success() const { return !signaled && code == 0; }
  // The shell convention: the exit code, or 128 + signal.
  int ShellCode() const { return signaled ? 128 + signal : code; }
  // "exited with status 3" or "killed by signal 9 (SIGKILL)".
  std::string Describe() const;
};

struct ProcessSpec {
  // argv[0] is looked up in the launcher's own PATH when it has no '/'.
  std::vector<std::string> argv;
  // The child's complete environment (nothing else is inherited).
  Environment env;
  // The child's stdin: this descriptor of the launcher (e.g. a pipe's read
  // end, which may be close-on-exec); -1: /dev/null.
  int stdin_fd = -1;
};

class Process {
 public:
  // Starts the child. Fails (and leaves nothing running) when the pipes cannot
  // be made or the program cannot be executed (not found, not executable).
  static Result<std::unique_ptr<Process>> Spawn(const ProcessSpec& spec);

  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;
  // Kills the process group of a child that was never reaped, and reaps it
  // (waiting at most 2 s).
  ~Process();

  pid_t pid() const { return pid_; }
  // Read ends of the child's stdout/stderr (non-blocking, close-on-exec).
  // Ownership passes to whoever calls Take*; afterwards these return -1.
  int TakeStdout();
  int TakeStderr();

  // Sends `sig` to the child's whole process group. Signalling a group whose
  // members have all exited is not an error.
  Status SignalGroup(int sig);

  // Non-blocking: the exit status once the child has ended (and is reaped),
  // std::nullopt while it runs. Repeated calls return the same status.
  std::optional<ExitStatus> Poll();
  bool reaped() const { return exit_.has_value(); }

 private:
  Process(pid_t pid, int out_fd, int err_fd) : pid_(pid), out_fd_(out_fd), err_fd_(err_fd) {}

  pid_t pid_;
  int out_fd_;
  int err_fd_;
  std::optional<ExitStatus> exit_;
};

// "SIGTERM", "SIGKILL", ... or "signal N".
std::string SignalName(int sig);

}  // namespace syncline::deploy
