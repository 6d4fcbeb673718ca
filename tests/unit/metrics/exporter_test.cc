#include "metrics/exporter.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <filesystem>
#include <optional>
#include <thread>

#include "common/deadline.h"
#include "common/mutex.h"

namespace syncline {
namespace {

using namespace std::chrono_literals;

// A client socket connected to 127.0.0.1:port (-1 on failure); `rcvbuf` > 0
// shrinks its receive buffer first. `wait` false: the connection is only
// started (the kernel finishes it when the listen backlog has room).
int ConnectTo(int port, int rcvbuf = 0, bool wait = true) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | (wait ? 0 : SOCK_NONBLOCK), 0);
  if (fd < 0) return -1;
  if (rcvbuf > 0) setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 && (wait || errno != EINPROGRESS)) {
    close(fd);
    return -1;
  }
  return fd;
}

bool SendAll(int fd, const std::string& text) {
  for (size_t sent = 0; sent < text.size();) {
    const ssize_t n = send(fd, text.data() + sent, text.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

// What the server sends on `fd` until it closes the connection (or resets
// it) or `deadline` passes.
std::string ReadAnswer(int fd, Deadline deadline) {
  std::string answer;
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(deadline.RemainingMs())) <= 0) return answer;
    char buf[4096];
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) return answer;
    answer.append(buf, static_cast<size_t>(n));
  }
}

// Sends one request of `headers` header lines of `header_bytes` bytes each
// (CRLF included, at least 16) on a fresh connection and returns the answer.
std::string RawRequest(int port, int headers, size_t header_bytes) {
  const int fd = ConnectTo(port);
  if (fd < 0) return "connect failed";
  std::string request = "GET /metrics HTTP/1.1\r\n";
  for (int i = 0; i < headers; ++i) {
    std::string line = "X-H" + std::to_string(1000 + i) + ": ";
    line += std::string(header_bytes - line.size() - 2, 'v') + "\r\n";
    request += line;
  }
  request += "\r\n";
  std::string answer = SendAll(fd, request) ? ReadAnswer(fd, Deadline::After(5s)) : "send failed";
  close(fd);
  return answer;
}

// The slow client of issue 28: sends a request line, then one header line
// every 0.5 s (never the empty line that ends the head), until the server
// answers or closes the connection, Stop() is called, or `lines` lines went.
class Trickler {
 public:
  Trickler(int port, int lines) : fd_(ConnectTo(port)), connected_at_(Clock::now()) {
    if (fd_ >= 0) thread_ = std::thread([this, lines] { Run(lines); });
  }
  ~Trickler() {
    Stop();
    if (thread_.joinable()) thread_.join();
    if (fd_ >= 0) close(fd_);
  }
  bool connected() const { return fd_ >= 0; }
  void Stop() {
    if (fd_ >= 0 && !stopped_.exchange(true)) shutdown(fd_, SHUT_RDWR);  // wakes Run's poll
  }
  // Waits until `n` header lines went out; false if the deadline came first.
  bool WaitForLines(int n, Deadline deadline) {
    MutexLock lock(mu_);
    return ready_.WaitUntil(mu_, deadline, [&]() REQUIRES(mu_) { return lines_sent_ >= n || dropped_after_; });
  }
  // How long after connecting the server answered or closed the connection;
  // nullopt if it had not by the deadline.
  std::optional<Clock::duration> WaitUntilDropped(Deadline deadline) {
    MutexLock lock(mu_);
    ready_.WaitUntil(mu_, deadline, [&]() REQUIRES(mu_) { return dropped_after_.has_value(); });
    return dropped_after_;
  }

 private:
  void Run(int lines) {
    bool open = SendAll(fd_, "GET /metrics HTTP/1.1\r\n");
    for (int i = 0; open && i < lines; ++i) {
      // The attacker's pacing, cut short by anything from the server.
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 500) != 0) break;
      open = SendAll(fd_, "X-Slow-" + std::to_string(i) + ": y\r\n");
      MutexLock lock(mu_);
      lines_sent_ = i + 1;
      ready_.NotifyAll();
    }
    if (stopped_.load()) return;
    // Ended by the server (or out of lines while it still waits: not dropped).
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, 0) == 0 && open) return;
    MutexLock lock(mu_);
    dropped_after_ = Clock::now() - connected_at_;
    ready_.NotifyAll();
  }

  const int fd_;
  const Clock::time_point connected_at_;
  std::atomic<bool> stopped_{false};
  std::thread thread_;
  Mutex mu_;
  CondVar ready_;
  int lines_sent_ GUARDED_BY(mu_) = 0;
  std::optional<Clock::duration> dropped_after_ GUARDED_BY(mu_);
};

TEST(MetricsExporterTest, ServesTheRegistryOverHttp) {
  MetricsRegistry registry;
  Counter& rounds = registry.AddCounter("syncline_rounds_completed_total", "Rounds");
  auto exporter = MetricsExporter::Start(&registry, "127.0.0.1", 0);
  ASSERT_TRUE(exporter.ok()) << exporter.status().ToString();
  const int port = (*exporter)->port();
  ASSERT_GT(port, 0);

  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(5);
  client.set_read_timeout(5);
  rounds.Add(41);
  auto res = client.Get("/metrics");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_NE(res->body.find("syncline_rounds_completed_total 41\n"), std::string::npos) << res->body;
  rounds.Add();
  res = client.Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_NE(res->body.find("syncline_rounds_completed_total 42\n"), std::string::npos) << res->body;
  EXPECT_EQ(client.Get("/nothing-here")->status, 404);
}

TEST(MetricsExporterTest, PortInUseIsAClearError) {
  MetricsRegistry registry;
  auto first = MetricsExporter::Start(&registry, "127.0.0.1", 0);
  ASSERT_TRUE(first.ok());
  auto second = MetricsExporter::Start(&registry, "127.0.0.1", (*first)->port());
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("Address already in use"), std::string::npos)
      << second.status().message();
  EXPECT_NE(second.status().message().find("SYNCLINE_METRICS_PORT"), std::string::npos);
}

TEST(MetricsExporterTest, BadHostIsAClearError) {
  MetricsRegistry registry;
  auto exporter = MetricsExporter::Start(&registry, "not-an-address", 9);
  ASSERT_FALSE(exporter.ok());
  EXPECT_NE(exporter.status().message().find("not-an-address"), std::string::npos) << exporter.status().message();
}

TEST(MetricsExporterTest, OffWhenThePortSettingIsZero) {
  MetricsRegistry registry;
  Settings settings;
  auto exporter = MetricsExporter::FromSettings(settings, &registry);
  ASSERT_TRUE(exporter.ok());
  EXPECT_EQ(exporter->get(), nullptr);
}

TEST(MetricsExporterTest, StopsPromptlyWithAClientConnected) {
  MetricsRegistry registry;
  auto exporter = MetricsExporter::Start(&registry, "127.0.0.1", 0);
  ASSERT_TRUE(exporter.ok());
  httplib::Client client("127.0.0.1", (*exporter)->port());
  client.set_keep_alive(true);
  ASSERT_TRUE(client.Get("/metrics"));
  const auto start = std::chrono::steady_clock::now();
  exporter->reset();
  // Far below the library's 5 s keep-alive: the connection was closed after its answer.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(1500));
}

TEST(MetricsExporterTest, ManyIdleConnectionsNeitherUseUpDescriptorsNorBlockScrapes) {
  MetricsRegistry registry;
  registry.AddCounter("up_total", "x").Add();
  auto exporter = MetricsExporter::Start(&registry, "127.0.0.1", 0);
  ASSERT_TRUE(exporter.ok());
  const int port = (*exporter)->port();
  auto open_fds = [] {
    int n = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
    return n;
  };
  const int before = open_fds();
  // 40 clients connect and send nothing (the test's own sockets: 40 fds).
  std::vector<int> idle;
  for (int i = 0; i < 40; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    idle.push_back(fd);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  // The exporter accepted only what it can serve soon (2 threads + 4 queued).
  EXPECT_LE(open_fds() - before, 40 + 8);
  // A real scrape still gets through once the idle ones ahead of it time out
  // (a second after they were accepted, 7 at a time: a few seconds).
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(60);
  auto res = client.Get("/metrics");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_NE(res->body.find("up_total 1"), std::string::npos);
  for (int fd : idle) close(fd);
}

// Issue 28: six clients trickling one header line every 0.5 s used to hold the
// exporter's two threads (the library's read timeout is per read) and its
// queue forever. Each request now has 2 s from its connection's accept.
TEST(MetricsExporterTest, TricklingClientsAreDroppedAndScrapesGetThrough) {
  MetricsRegistry registry;
  registry.AddCounter("up_total", "x").Add();
  auto exporter = MetricsExporter::Start(&registry, "127.0.0.1", 0);
  ASSERT_TRUE(exporter.ok());
  const int port = (*exporter)->port();
  std::vector<std::unique_ptr<Trickler>> slow;
  for (int i = 0; i < 6; ++i) {
    slow.push_back(std::make_unique<Trickler>(port, 16));  // 8 s of lines at most
    ASSERT_TRUE(slow.back()->connected());
  }
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(5);
  client.set_read_timeout(5);
  auto res = client.Get("/metrics");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_NE(res->body.find("up_total 1"), std::string::npos);
  for (auto& t : slow) {
    std::optional<Clock::duration> dropped = t->WaitUntilDropped(Deadline::After(6s));
    ASSERT_TRUE(dropped.has_value()) << "a trickling client is still being read";
    EXPECT_LT(*dropped, 4s);
  }
}

TEST(MetricsExporterTest, RefusesMoreThan64HeaderLines) {
  MetricsRegistry registry;
  registry.AddCounter("up_total", "x").Add();
  auto exporter = MetricsExporter::Start(&registry, "127.0.0.1", 0);
  ASSERT_TRUE(exporter.ok());
  const int port = (*exporter)->port();
  std::string answer = RawRequest(port, 64, 16);
  EXPECT_EQ(answer.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << answer.substr(0, 200);
  answer = RawRequest(port, 65, 16);
  // A 400, or a reset when the unread rest of the request is discarded.
  EXPECT_TRUE(answer.empty() || answer.rfind("HTTP/1.1 400", 0) == 0) << answer.substr(0, 200);
  EXPECT_EQ(answer.find("up_total"), std::string::npos);
  // The exporter still serves.
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(5);
  auto res = client.Get("/metrics");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200);
}

TEST(MetricsExporterTest, RefusesARequestHeadOver8KiB) {
  MetricsRegistry registry;
  registry.AddCounter("up_total", "x").Add();
  auto exporter = MetricsExporter::Start(&registry, "127.0.0.1", 0);
  ASSERT_TRUE(exporter.ok());
  const int port = (*exporter)->port();
  std::string answer = RawRequest(port, 12, 600);  // 7.2 kB
  EXPECT_EQ(answer.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << answer.substr(0, 200);
  answer = RawRequest(port, 15, 600);  // 9 kB, each line far below the library's 8 KiB per line
  EXPECT_TRUE(answer.empty() || answer.rfind("HTTP/1.1 400", 0) == 0) << answer.substr(0, 200);
  EXPECT_EQ(answer.find("up_total"), std::string::npos);
  answer = RawRequest(port, 1, 9000);  // one line over the limit
  EXPECT_TRUE(answer.empty() || answer.rfind("HTTP/1.1 400", 0) == 0) << answer.substr(0, 200);
}

// At job end the exporter must go, whatever its clients do: trickle, connect
// and send nothing, or ask for a big page and never read it, many at once.
TEST(MetricsExporterTest, StopsWithinTheGraceWhateverItsClientsDo) {
  MetricsRegistry registry;
  // About 4 MB of page, far more than a non-reading client's socket buffers hold.
  for (int i = 0; i < 2000; ++i) registry.AddCounter("big_" + std::to_string(i) + "_total", std::string(2000, 'h'));
  auto exporter = MetricsExporter::Start(&registry, "127.0.0.1", 0);
  ASSERT_TRUE(exporter.ok());
  const int port = (*exporter)->port();
  std::vector<std::unique_ptr<Trickler>> slow;
  for (int i = 0; i < 6; ++i) {
    slow.push_back(std::make_unique<Trickler>(port, 16));
    ASSERT_TRUE(slow.back()->connected());
  }
  std::vector<int> others;
  for (int i = 0; i < 4; ++i) {
    const int fd = ConnectTo(port, 4096);
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(SendAll(fd, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"));  // never reads the answer
    others.push_back(fd);
  }
  // More than the listen backlog holds: these connect as the exporter accepts.
  for (int i = 0; i < 30; ++i) {
    const int fd = ConnectTo(port, 0, /*wait=*/false);  // sends nothing
    ASSERT_GE(fd, 0);
    others.push_back(fd);
  }
  // The exporter's threads have been busy with them for a while.
  for (auto& t : slow) ASSERT_TRUE(t->WaitForLines(2, Deadline::After(5s)));
  const auto start = Clock::now();
  exporter->reset();
  EXPECT_LT(Clock::now() - start, 3s);
  for (int fd : others) close(fd);
}

}  // namespace
}  // namespace syncline
