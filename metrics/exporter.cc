#include "metrics/exporter.h"

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "common/logging.h"
#include "metrics/http_server.h"

namespace syncline {
namespace {

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
  // HttpLimits' defaults: two scrapes at a time, one request per connection,
  // which has 1 s to start and 2 s to end from its accept, 64 header lines
  // and 8 KiB at most.
  SYNCLINE_ASSIGN_OR_RETURN(exporter->http_, HttpServer::Create(HttpLimits{}));
  auto& http = exporter->http_;
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
  if (http_ == nullptr) return;
  // Ends the waits of the connections being served and closes the queued ones.
  http_->Shutdown();
  // stop() does nothing until the server thread is listening: ask again
  // until the thread has seen it.
  while (thread_.joinable() && !done_.load()) {
    http_->stop();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  if (thread_.joinable()) thread_.join();
}

}  // namespace syncline
