// MetricsExporter: serves one MetricsRegistry over HTTP for Prometheus to
// scrape (GET /metrics, text format 0.0.4), on a port of its own, until it is
// destroyed. cpp-httplib does the HTTP, under the limits of HttpServer
// (metrics/http_server.h): a port anyone may reach cannot keep its threads
// busy, nor delay the exporter's destruction.
//
//   auto exporter = MetricsExporter::Start(&registry, "0.0.0.0", 9100);
//   if (!exporter.ok()) return exporter.status();   // e.g. the port is in use
//
// Thread-safety: Start and the destructor from one thread; scrapes run on the
// exporter's own threads.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "common/settings.h"
#include "common/status.h"
#include "metrics/registry.h"

namespace syncline {

class HttpServer;

class MetricsExporter {
 public:
  // Binds host:port (0 = any free port) and starts serving `registry`, which
  // must outlive the exporter.
  static Result<std::unique_ptr<MetricsExporter>> Start(const MetricsRegistry* registry, const std::string& host,
                                                        int port);
  // From the settings: null (and OK) when metrics_port is 0 (off).
  static Result<std::unique_ptr<MetricsExporter>> FromSettings(const Settings& settings,
                                                               const MetricsRegistry* registry);
  // Stops serving and joins its threads: at once, whatever its clients do
  // (each connection's wait ends when the stop is signalled).
  ~MetricsExporter();

  int port() const { return port_; }

 private:
  MetricsExporter() = default;

  std::unique_ptr<HttpServer> http_;
  std::thread thread_;
  std::atomic<bool> done_{false};  // the server thread has returned
  int port_ = 0;
};

}  // namespace syncline
