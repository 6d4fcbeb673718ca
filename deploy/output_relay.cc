#include "deploy/output_relay.h"

#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace syncline::deploy {

LineSink FdLineSink(int fd) {
  return [fd](std::string_view line) {
    size_t done = 0;
    Deadline give_up = Deadline::AfterMs(1000);
    while (done < line.size()) {
      ssize_t n = write(fd, line.data() + done, line.size() - done);
      if (n > 0) {
        done += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && !give_up.Expired()) {
        pollfd p{fd, POLLOUT, 0};
        poll(&p, 1, static_cast<int>(std::max<long long>(1, give_up.RemainingMs())));
        continue;
      }
      return;  // EPIPE, a closed fd, or unwritable for too long: drop the line.
    }
  };
}

OutputRelay::OutputRelay(LineSink sink, size_t max_line_bytes)
    : sink_(std::move(sink)), max_line_bytes_(std::max<size_t>(max_line_bytes, 1)) {}

OutputRelay::~OutputRelay() {
  for (Source& src : sources_) Close(src);
}

void OutputRelay::Add(int fd, std::string prefix) {
  if (fd < 0) return;
  int flags = fcntl(fd, F_GETFL);
  if (flags >= 0 && !(flags & O_NONBLOCK)) fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  sources_.push_back(Source{fd, std::move(prefix), {}});
}

size_t OutputRelay::open_sources() const {
  return static_cast<size_t>(
      std::count_if(sources_.begin(), sources_.end(), [](const Source& s) { return s.fd >= 0; }));
}

Status OutputRelay::PollOnce(int timeout_ms) {
  std::vector<pollfd> fds;
  std::vector<Source*> owners;
  for (Source& src : sources_) {
    if (src.fd < 0) continue;
    fds.push_back(pollfd{src.fd, POLLIN, 0});
    owners.push_back(&src);
  }
  int ready = poll(fds.empty() ? nullptr : fds.data(), fds.size(), std::max(timeout_ms, 0));
  if (ready < 0) {
    if (errno == EINTR) return Status::Ok();  // a signal: let the caller look at it
    return Internal(std::string("poll: ") + strerror(errno));
  }
  for (size_t i = 0; i < fds.size() && ready > 0; ++i) {
    if (fds[i].revents == 0) continue;
    --ready;
    Source& src = *owners[i];
    bool open = ReadAvailable(src);
    ForwardCompleteLines(src);
    if (!open || (fds[i].revents & (POLLERR | POLLNVAL))) Close(src);
  }
  return Status::Ok();
}

void OutputRelay::DrainAndClose(Deadline deadline) {
  while (open_sources() > 0 && !deadline.Expired()) {
    long long left = std::max<long long>(1, std::min<long long>(deadline.RemainingMs(), 50));
    if (!PollOnce(static_cast<int>(left)).ok()) break;
  }
  for (Source& src : sources_) Close(src);
}

bool OutputRelay::ReadAvailable(Source& src) {
  // Bounded per call so one chatty child cannot starve the others.
  char buf[16 * 1024];
  for (int round = 0; round < 8; ++round) {
    ssize_t n = read(src.fd, buf, sizeof(buf));
    if (n > 0) {
      src.pending.append(buf, static_cast<size_t>(n));
      if (static_cast<size_t>(n) < sizeof(buf)) return true;
      continue;
    }
    if (n == 0) return false;
    if (errno == EINTR) continue;
    return errno == EAGAIN || errno == EWOULDBLOCK;
  }
  return true;
}

void OutputRelay::ForwardCompleteLines(Source& src) {
  size_t start = 0;
  while (true) {
    size_t nl = src.pending.find('\n', start);
    if (nl == std::string::npos) break;
    std::string_view line(src.pending.data() + start, nl - start);
    // A line longer than the limit goes out in pieces, each its own line.
    while (line.size() > max_line_bytes_) {
      Emit(src, line.substr(0, max_line_bytes_));
      line.remove_prefix(max_line_bytes_);
    }
    Emit(src, line);
    start = nl + 1;
  }
  src.pending.erase(0, start);
  while (src.pending.size() >= max_line_bytes_) {
    Emit(src, std::string_view(src.pending).substr(0, max_line_bytes_));
    src.pending.erase(0, max_line_bytes_);
  }
}

void OutputRelay::Emit(const Source& src, std::string_view text) {
  std::string line;
  line.reserve(src.prefix.size() + text.size() + 1);
  line.append(src.prefix).append(text).push_back('\n');
  sink_(line);
}

void OutputRelay::Close(Source& src) {
  if (src.fd < 0) return;
  // Whatever is still readable belongs to the output too.
  ReadAvailable(src);
  ForwardCompleteLines(src);
  if (!src.pending.empty()) Emit(src, src.pending);
  src.pending.clear();
  close(src.fd);
  src.fd = -1;
}

}  // namespace syncline::deploy
