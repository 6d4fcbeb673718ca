#include "metrics/exporter.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

namespace syncline {
namespace {

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
  // (1 s each, 2 at a time: about 20 s).
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(60);
  auto res = client.Get("/metrics");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_NE(res->body.find("up_total 1"), std::string::npos);
  for (int fd : idle) close(fd);
}

}  // namespace
}  // namespace syncline
