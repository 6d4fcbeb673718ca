#include "metrics/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"

namespace syncline {
namespace {

// When the connection that this pool thread serves was accepted. The
// library's job passes only the socket; BoundedPool sets this just before it
// runs the job, on the thread that runs it.
thread_local Clock::time_point t_accepted_at{};

// Serves connections on a few threads, and lets the library's accept loop
// take a new connection only when one of a few queue places is free: extra
// connections wait in the kernel's listen backlog (the library's own pool
// queues every accepted socket). Every job ends within HttpLimits' deadlines,
// so a wait for a place ends too.
class BoundedPool final : public httplib::TaskQueue {
 public:
  BoundedPool(size_t threads, size_t queue) : capacity_(queue) {
    for (size_t i = 0; i < threads; ++i) threads_.emplace_back([this] { Work(); });
  }

  // Runs on the accept loop's thread, right after the accept.
  void enqueue(std::function<void()> fn) override {
    Job job{std::move(fn), Clock::now()};
    MutexLock lock(mu_);
    space_.Wait(mu_, [this]() REQUIRES(mu_) { return jobs_.size() < capacity_ || shutdown_; });
    jobs_.push_back(std::move(job));
    ready_.NotifyOne();
  }

  void shutdown() override {
    {
      MutexLock lock(mu_);
      shutdown_ = true;
    }
    ready_.NotifyAll();
    space_.NotifyAll();
    for (auto& t : threads_) t.join();
  }

 private:
  struct Job {
    std::function<void()> serve;  // serves one connection, then closes it
    Clock::time_point accepted;
  };

  void Work() {
    for (;;) {
      Job job;
      {
        MutexLock lock(mu_);
        ready_.Wait(mu_, [this]() REQUIRES(mu_) { return !jobs_.empty() || shutdown_; });
        if (jobs_.empty()) return;  // shut down, every queued connection served (or closed)
        job = std::move(jobs_.front());
        jobs_.pop_front();
        space_.NotifyOne();
      }
      t_accepted_at = job.accepted;
      job.serve();
    }
  }

  const size_t capacity_;
  Mutex mu_;
  CondVar ready_, space_;
  std::deque<Job> jobs_ GUARDED_BY(mu_);
  bool shutdown_ GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

void AddressOf(int sock, bool peer, std::string& ip, int& port) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  auto* sa = reinterpret_cast<sockaddr*>(&addr);
  ip.clear();
  port = 0;
  if ((peer ? getpeername(sock, sa, &len) : getsockname(sock, sa, &len)) != 0) return;
  char text[INET6_ADDRSTRLEN] = "";
  if (addr.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&addr);
    inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text));
    port = ntohs(in->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&addr);
    inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof(text));
    port = ntohs(in6->sin6_port);
  }
  ip = text;
}

// One accepted connection, read and written under HttpLimits. The socket is
// used without blocking; every wait is a poll() bounded by the deadline that
// applies and ended early by the server's stop descriptor. Used by one
// thread.
class LimitedStream final : public httplib::Stream {
 public:
  LimitedStream(int sock, int stop_fd, const HttpLimits& limits, Clock::time_point accepted)
      : sock_(sock), stop_fd_(stop_fd), limits_(limits), accepted_(accepted) {}

  bool is_readable() const override { return begin_ < end_ || Wait(POLLIN, ReadDeadline()); }
  bool is_writable() const override { return Wait(POLLOUT, answer_by_.value_or(Clock::now() + limits_.answer)); }

  // Hands out what has arrived; -1 once the request is over a limit or its
  // deadline, or the server stops.
  ssize_t read(char* ptr, size_t size) override {
    if (refused_) return -1;
    if (begin_ == end_) {
      const ssize_t got = Fill();
      if (got <= 0) return got;
    }
    const size_t n = std::min(size, end_ - begin_);
    for (size_t i = 0; i < n; ++i) {
      if (!Count(buf_[begin_ + i])) {
        refused_ = true;
        return -1;
      }
    }
    std::memcpy(ptr, buf_ + begin_, n);
    begin_ += n;
    return static_cast<ssize_t>(n);
  }

  // All of it, or -1 (the library ignores a short write of the head).
  ssize_t write(const char* ptr, size_t size) override {
    if (!answer_by_) answer_by_ = Clock::now() + limits_.answer;
    size_t sent = 0;
    while (sent < size) {
      const ssize_t n = send(sock_, ptr + sent, size - sent, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n >= 0) {
        sent += static_cast<size_t>(n);
      } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
        if (!Wait(POLLOUT, *answer_by_)) return -1;
      } else if (errno != EINTR) {
        return -1;
      }
    }
    return static_cast<ssize_t>(size);
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override { AddressOf(sock_, true, ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { AddressOf(sock_, false, ip, port); }
  socket_t socket() const override { return sock_; }

 private:
  Clock::time_point ReadDeadline() const {
    return accepted_ + (request_bytes_ == 0 ? limits_.first_byte : limits_.request);
  }

  // Waits until the socket is ready for `events` (or has an error, which the
  // next call reports); false at the deadline or when the server stops.
  bool Wait(short events, Clock::time_point deadline) const {
    pollfd fds[2] = {{sock_, events, 0}, {stop_fd_, POLLIN, 0}};
    for (;;) {
      const auto left = std::chrono::ceil<Millis>(deadline - Clock::now()).count();
      if (left <= 0) return false;
      const int ready = poll(fds, 2, static_cast<int>(left));
      if (ready < 0 && errno != EINTR) return false;
      if (fds[1].revents != 0) return false;
      if (ready > 0 && fds[0].revents != 0) return true;
    }
  }

  // Reads what has arrived into the (empty) buffer: the byte count, 0 at the
  // end of the stream, -1 on an error, the deadline or a stop.
  ssize_t Fill() {
    for (;;) {
      const ssize_t n = recv(sock_, buf_, sizeof(buf_), MSG_DONTWAIT);
      if (n >= 0) {
        begin_ = 0;
        end_ = static_cast<size_t>(n);
        return n;
      }
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        if (!Wait(POLLIN, ReadDeadline())) return -1;
      } else if (errno != EINTR) {
        return -1;
      }
    }
  }

  // Counts one byte handed to the library; false once the request is over a
  // limit. The head ends with an empty line ("\r\n", as the library reads it).
  bool Count(char c) {
    if (++request_bytes_ > limits_.max_request_bytes) return false;
    if (head_done_) return true;
    if (c != '\n') {
      ++line_bytes_;
      prev_ = c;
      return true;
    }
    const bool empty_line = line_bytes_ == 1 && prev_ == '\r';
    line_bytes_ = 0;
    ++lines_;
    if (lines_ > 1 && empty_line) {
      head_done_ = true;
      return true;
    }
    return lines_ <= 1 + limits_.max_header_lines;  // the request line, then the headers
  }

  const int sock_;
  const int stop_fd_;
  const HttpLimits& limits_;
  const Clock::time_point accepted_;
  std::optional<Clock::time_point> answer_by_;
  char buf_[4096];
  size_t begin_ = 0, end_ = 0;  // what buf_ holds that the library has not taken
  size_t request_bytes_ = 0;    // taken by the library
  size_t lines_ = 0, line_bytes_ = 0;
  char prev_ = 0;
  bool head_done_ = false;
  bool refused_ = false;
};

}  // namespace

Result<std::unique_ptr<HttpServer>> HttpServer::Create(const HttpLimits& limits) {
  const int stop_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (stop_fd < 0) return Unavailable(std::string("eventfd failed: ") + std::strerror(errno));
  return std::unique_ptr<HttpServer>(new HttpServer(limits, stop_fd));
}

HttpServer::HttpServer(const HttpLimits& limits, int stop_fd) : limits_(limits), stop_fd_(stop_fd) {
  new_task_queue = [threads = limits.threads, queued = limits.queued] { return new BoundedPool(threads, queued); };
  set_payload_max_length(limits.max_request_bytes);
}

HttpServer::~HttpServer() { close(stop_fd_); }

void HttpServer::Shutdown() {
  stopping_.store(true);
  const uint64_t one = 1;
  const ssize_t unused = ::write(stop_fd_, &one, sizeof(one));
  (void)unused;
}

bool HttpServer::process_and_close_socket(socket_t sock) {
  bool ok = false;
  if (!stopping_.load()) {
    const Clock::time_point accepted = t_accepted_at == Clock::time_point{} ? Clock::now() : t_accepted_at;
    LimitedStream stream(sock, stop_fd_, limits_, accepted);
    bool connection_closed = false;
    ok = process_request(stream, /*close_connection=*/true, connection_closed, nullptr);
  }
  shutdown(sock, SHUT_RDWR);
  close(sock);
  return ok;
}

}  // namespace syncline
