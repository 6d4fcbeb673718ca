#include "deploy/process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

namespace syncline::deploy {
namespace {

std::string ErrnoText(int err) { return std::string(strerror(err)); }

void CloseIfOpen(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

// Owns the spawn attributes and file actions so every exit path frees them.
class SpawnSetup {
 public:
  SpawnSetup() {
    posix_spawnattr_init(&attr_);
    posix_spawn_file_actions_init(&actions_);
  }
  ~SpawnSetup() {
    posix_spawnattr_destroy(&attr_);
    posix_spawn_file_actions_destroy(&actions_);
  }
  SpawnSetup(const SpawnSetup&) = delete;
  SpawnSetup& operator=(const SpawnSetup&) = delete;

  // Own process group, no blocked signals, every handler back to default
  // (a SIG_IGN of the launcher, e.g. for SIGPIPE, must not leak into children).
  Status Configure(int in, int out_w, int err_w) {
    sigset_t empty, all;
    sigemptyset(&empty);
    sigfillset(&all);
    sigdelset(&all, SIGKILL);
    sigdelset(&all, SIGSTOP);
    int rc = posix_spawnattr_setflags(&attr_, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                                  POSIX_SPAWN_SETSIGDEF);
    if (rc == 0) rc = posix_spawnattr_setpgroup(&attr_, 0);
    if (rc == 0) rc = posix_spawnattr_setsigmask(&attr_, &empty);
    if (rc == 0) rc = posix_spawnattr_setsigdefault(&attr_, &all);
    if (rc == 0)
      rc = in >= 0 ? posix_spawn_file_actions_adddup2(&actions_, in, STDIN_FILENO)
                   : posix_spawn_file_actions_addopen(&actions_, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    if (rc == 0) rc = posix_spawn_file_actions_adddup2(&actions_, out_w, STDOUT_FILENO);
    if (rc == 0) rc = posix_spawn_file_actions_adddup2(&actions_, err_w, STDERR_FILENO);
    if (rc != 0) return Internal("preparing posix_spawn: " + ErrnoText(rc));
    return Status::Ok();
  }

  const posix_spawnattr_t* attr() const { return &attr_; }
  const posix_spawn_file_actions_t* actions() const { return &actions_; }

 private:
  posix_spawnattr_t attr_;
  posix_spawn_file_actions_t actions_;
};

// A pipe whose both ends are close-on-exec (so no other child inherits them;
// posix_spawn's dup2 clears the flag on the child's copy) and whose read end
// is non-blocking.
Status MakeOutputPipe(int& read_end, int& write_end) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return Unavailable("pipe2: " + ErrnoText(errno));
  read_end = fds[0];
  write_end = fds[1];
  int flags = fcntl(read_end, F_GETFL);
  if (flags < 0 || fcntl(read_end, F_SETFL, flags | O_NONBLOCK) != 0) {
    int err = errno;
    CloseIfOpen(read_end);
    CloseIfOpen(write_end);
    return Internal("fcntl(O_NONBLOCK): " + ErrnoText(err));
  }
  return Status::Ok();
}

}  // namespace

ExitStatus ExitStatus::FromWaitStatus(int wstatus) {
  ExitStatus s;
  if (WIFSIGNALED(wstatus)) {
    s.signaled = true;
    s.signal = WTERMSIG(wstatus);
  } else if (WIFEXITED(wstatus)) {
    s.code = WEXITSTATUS(wstatus);
  }
  return s;
}

std::string ExitStatus::Describe() const {
  if (signaled) return "killed by signal " + std::to_string(signal) + " (" + SignalName(signal) + ")";
  return "exited with status " + std::to_string(code);
}

std::string SignalName(int sig) {
  switch (sig) {
    case SIGHUP: return "SIGHUP";
    case SIGINT: return "SIGINT";
    case SIGQUIT: return "SIGQUIT";
    case SIGILL: return "SIGILL";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGKILL: return "SIGKILL";
    case SIGSEGV: return "SIGSEGV";
    case SIGPIPE: return "SIGPIPE";
    case SIGALRM: return "SIGALRM";
    case SIGTERM: return "SIGTERM";
    case SIGUSR1: return "SIGUSR1";
    case SIGUSR2: return "SIGUSR2";
  }
  return "signal " + std::to_string(sig);
}

Result<std::unique_ptr<Process>> Process::Spawn(const ProcessSpec& spec) {
  if (spec.argv.empty() || spec.argv[0].empty()) return InvalidArgument("empty command line");

  std::vector<char*> argv;
  for (const auto& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<std::string> env_strings;
  env_strings.reserve(spec.env.size());
  for (const auto& [name, value] : spec.env) env_strings.push_back(name + "=" + value);
  std::vector<char*> envp;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);

  int out_r = -1, out_w = -1, err_r = -1, err_w = -1;
  Status st = MakeOutputPipe(out_r, out_w);
  if (st.ok()) st = MakeOutputPipe(err_r, err_w);
  SpawnSetup setup;
  if (st.ok()) st = setup.Configure(spec.stdin_fd, out_w, err_w);
  pid_t pid = -1;
  if (st.ok()) {
    // glibc reports a failed exec (ENOENT, EACCES, ...) as posix_spawnp's result.
    int rc = posix_spawnp(&pid, argv[0], setup.actions(), setup.attr(), argv.data(), envp.data());
    if (rc != 0) st = Unavailable("cannot execute '" + spec.argv[0] + "': " + ErrnoText(rc));
  }
  // The child holds its own copies of the write ends; ours must go, or the
  // read ends would never see end-of-file.
  CloseIfOpen(out_w);
  CloseIfOpen(err_w);
  if (!st.ok()) {
    CloseIfOpen(out_r);
    CloseIfOpen(err_r);
    return st;
  }
  return std::unique_ptr<Process>(new Process(pid, out_r, err_r));
}

Process::~Process() {
  if (!exit_) {
    killpg(pid_, SIGKILL);
    // SIGKILL cannot be caught, but a process stuck in the kernel (D state)
    // may take its time: bounded, after which it is left to init.
    for (int i = 0; i < 400 && !Poll(); ++i) usleep(5000);
  }
  CloseIfOpen(out_fd_);
  CloseIfOpen(err_fd_);
}

int Process::TakeStdout() {
  int fd = out_fd_;
  out_fd_ = -1;
  return fd;
}

int Process::TakeStderr() {
  int fd = err_fd_;
  err_fd_ = -1;
  return fd;
}

Status Process::SignalGroup(int sig) {
  if (killpg(pid_, sig) == 0 || errno == ESRCH) return Status::Ok();
  return Internal("killpg(" + std::to_string(pid_) + ", " + SignalName(sig) + "): " + ErrnoText(errno));
}

std::optional<ExitStatus> Process::Poll() {
  if (exit_) return exit_;
  int wstatus = 0;
  pid_t r;
  do {
    r = waitpid(pid_, &wstatus, WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r == pid_) {
    exit_ = ExitStatus::FromWaitStatus(wstatus);
  } else if (r < 0 && errno == ECHILD) {
    // Reaped elsewhere (should not happen); report it as ended rather than hang.
    exit_ = ExitStatus{false, 255, 0};
  }
  return exit_;
}

}  // namespace syncline::deploy
