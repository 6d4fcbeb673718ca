// MetricsExporter: serves one MetricsRegistry over HTTP for Prometheus to
// scrape (GET /metrics, text format 0.0.4), on a port of its own, from one
// thread, until it is destroyed. cpp-httplib does the HTTP.
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

namespace httplib {
class Server;
}

namespace syncline {

class MetricsExporter {
 public:
  // Binds host:port (0 = any free port) and starts serving `registry`, which
  // must outlive the exporter.
  static Result<std::unique_ptr<MetricsExporter>> Start(const MetricsRegistry* registry, const std::string& host,
                                                        int port);
  // From the settings: null (and OK) when metrics_port is 0 (off).
  static Result<std::unique_ptr<MetricsExporter>> FromSettings(const Settings& settings,
                                                               const MetricsRegistry* registry);
  // Stops serving and joins its threads.
  ~MetricsExporter();

  int port() const { return port_; }

 private:
  MetricsExporter() = default;

  std::unique_ptr<httplib::Server> http_;
  std::thread thread_;
  std::atomic<bool> done_{false};  // the server thread has returned
  int port_ = 0;
};

}  // namespace syncline
