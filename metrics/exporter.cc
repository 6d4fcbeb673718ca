#include "metrics/exporter.h"

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "common/logging.h"
#include "common/mutex.h"

namespace syncline {
namespace {

// Serves connections on a few threads, and lets the library's accept loop
// take a new connection only when one of a few queue places is free: extra
// connections wait in the kernel's listen backlog, so a peer opening many
// idle connections cannot use up this process's file descriptors (the
// library's own pool queues every accepted socket).
class BoundedPool final : public httplib::TaskQueue {
 public:
  BoundedPool(size_t threads, size_t queue) : capacity_(queue) {
    for (size_t i = 0; i < threads; ++i) threads_.emplace_back([this] { Work(); });
  }

  void enqueue(std::function<void()> fn) override {
    MutexLock lock(mu_);
    space_.Wait(mu_, [this]() REQUIRES(mu_) { return jobs_.size() < capacity_ || shutdown_; });
    jobs_.push_back(std::move(fn));
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
  void Work() {
    for (;;) {
      std::function<void()> job;
      {
        MutexLock lock(mu_);
        ready_.Wait(mu_, [this]() REQUIRES(mu_) { return !jobs_.empty() || shutdown_; });
        if (jobs_.empty()) return;  // shut down, every queued connection served
        job = std::move(jobs_.front());
        jobs_.pop_front();
        space_.NotifyOne();
      }
      job();  // serves one connection, then closes it
    }
  }

  const size_t capacity_;
  Mutex mu_;
  CondVar ready_, space_;
  std::deque<std::function<void()>> jobs_ GUARDED_BY(mu_);
  bool shutdown_ GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

// Why host:port cannot be bound, asked of the kernel directly (the HTTP
// library only says that it failed).
std::string WhyBindFails(const std::string& host, int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) return "'" + host + "' is not an IPv4 address";
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return std::strerror(errno);
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  std::string why = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 ? "it failed"
                                                                                       : std::strerror(errno);
  close(fd);
  return why;
}

}  // namespace

Result<std::unique_ptr<MetricsExporter>> MetricsExporter::Start(const MetricsRegistry* registry,
                                                                 const std::string& host, int port) {
  std::unique_ptr<MetricsExporter> exporter(new MetricsExporter());
  auto& http = exporter->http_;
  http = std::make_unique<httplib::Server>();
  // Two scrapes at a time are plenty (the library's default is a pool of 8+
  // threads); connections close after each answer, and a client that sends
  // nothing within a second is dropped (a scraper sends its request at once),
  // so an idle connection neither holds a thread for long nor delays the
  // exporter's stop.
  http->new_task_queue = [] { return new BoundedPool(2, 4); };
  http->set_keep_alive_max_count(1);
  http->set_keep_alive_timeout(1);  // the wait for a request's first byte
  http->set_read_timeout(1, 0);
  http->set_write_timeout(1, 0);
  // SO_REUSEADDR only: the library's default adds SO_REUSEPORT, with which a
  // second process binds the same port silently and takes half the scrapes.
  http->set_socket_options([](socket_t sock) {
    const int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  http->Get("/metrics", [registry](const httplib::Request&, httplib::Response& res) {
    res.set_content(registry->Render(), "text/plain; version=0.0.4; charset=utf-8");
  });
  http->Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("Syncline metrics: /metrics\n", "text/plain");
  });
  if (port == 0) {
    exporter->port_ = http->bind_to_any_port(host);
    if (exporter->port_ <= 0)
      return Unavailable("cannot serve metrics on " + host + " (SYNCLINE_METRICS_HOST): " + WhyBindFails(host, 0));
  } else {
    if (!http->bind_to_port(host, port))
      return Unavailable("cannot serve metrics on " + host + ":" + std::to_string(port) +
                         " (SYNCLINE_METRICS_HOST, SYNCLINE_METRICS_PORT): " + WhyBindFails(host, port));
    exporter->port_ = port;
  }
  exporter->thread_ = std::thread([server = http.get(), done = &exporter->done_] {
    server->listen_after_bind();
    done->store(true);
  });
  SYNCLINE_LOG_INFO("serving Prometheus metrics at http://{}:{}/metrics", host, exporter->port_);
  return exporter;
}

Result<std::unique_ptr<MetricsExporter>> MetricsExporter::FromSettings(const Settings& settings,
                                                                        const MetricsRegistry* registry) {
  if (settings.metrics_port == 0) return std::unique_ptr<MetricsExporter>();
  return Start(registry, settings.metrics_host, settings.metrics_port);
}

MetricsExporter::~MetricsExporter() {
  // stop() does nothing until the server thread is listening: ask again
  // until the thread has seen it.
  while (thread_.joinable() && !done_.load()) {
    http_->stop();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  if (thread_.joinable()) thread_.join();
}

}  // namespace syncline
