// HttpServer: cpp-httplib's server with the limits a port that anyone may
// reach needs (issue 28). The library's own knobs are per read (a client that
// sends a byte a second is never timed out) and, in the packaged 0.11, have no
// bound on the number of header lines; so this server reads and writes each
// connection itself, through a Stream that enforces:
//   - deadlines counted from the connection's accept: the first byte within
//     `first_byte`, the whole request within `request`, whatever the client
//     trickles; the answer is written within `answer`;
//   - at most `max_request_bytes` of request (line, headers and any body) and
//     `max_header_lines` header lines: a request over either gets a 400;
//   - Shutdown() ends every wait at once, so no client can delay a stop.
// Connections are served on `threads` threads; at most `queued` accepted
// connections wait for one (the rest wait in the kernel's listen backlog, so
// a peer opening many idle connections cannot use up descriptors). One
// request per connection.
//
// Internal to metrics/: MetricsExporter is its only user.
//
// Thread-safety: configure (the httplib setters) before listening; Shutdown()
// from any thread, then stop() until the listening thread returns, and
// destroy it after.
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>

#include "common/deadline.h"
#include "common/status.h"

namespace syncline {

struct HttpLimits {
  size_t threads = 2;  // a scrape at a time is plenty; the library's default is 8+
  size_t queued = 4;
  // Counted from the accept. A scraper sends its whole request at once.
  Clock::duration first_byte = std::chrono::seconds(1);
  Clock::duration request = std::chrono::seconds(2);
  // Counted from the answer's first byte. Long enough for a big page to a
  // slow scraper; short enough that a client that never reads frees its thread.
  Clock::duration answer = std::chrono::seconds(2);
  size_t max_request_bytes = 8192;
  size_t max_header_lines = 64;
};

class HttpServer final : public httplib::Server {
 public:
  // Fails only when the process is out of descriptors.
  static Result<std::unique_ptr<HttpServer>> Create(const HttpLimits& limits);
  ~HttpServer() override;
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Ends every connection's wait now and closes connections not yet served;
  // the caller then stops the listening loop (stop()).
  void Shutdown();

 private:
  HttpServer(const HttpLimits& limits, int stop_fd);

  // Called by the library's pool job for each accepted connection.
  bool process_and_close_socket(socket_t sock) override;

  const HttpLimits limits_;
  const int stop_fd_;  // an eventfd, readable (never read) once Shutdown() was called
  std::atomic<bool> stopping_{false};
};

}  // namespace syncline
