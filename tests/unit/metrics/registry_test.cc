#include "metrics/registry.h"

#include <gtest/gtest.h>

#include <thread>

#include "metrics/process_metrics.h"

namespace syncline {
namespace {

bool Contains(const std::string& text, const std::string& line) { return text.find(line) != std::string::npos; }

TEST(MetricsRegistryTest, RendersCountersAndGaugesInTextFormat) {
  MetricsRegistry registry;
  registry.AddCounter("syncline_pushed_bytes_total", "Bytes pushed", {{"role", "worker"}}).Add(1536);
  registry.AddGauge("syncline_queued_chunks", "Chunks waiting").Set(3);
  const std::string text = registry.Render();
  EXPECT_EQ(text,
            "# HELP syncline_pushed_bytes_total Bytes pushed\n"
            "# TYPE syncline_pushed_bytes_total counter\n"
            "syncline_pushed_bytes_total{role=\"worker\"} 1536\n"
            "# HELP syncline_queued_chunks Chunks waiting\n"
            "# TYPE syncline_queued_chunks gauge\n"
            "syncline_queued_chunks 3\n");
}

TEST(MetricsRegistryTest, SameNameAndLabelsGiveTheSameInstrument) {
  MetricsRegistry registry;
  Counter& a = registry.AddCounter("syncline_errors_total", "Errors", {{"kind", "rejected"}});
  Counter& b = registry.AddCounter("syncline_errors_total", "Errors", {{"kind", "rejected"}});
  Counter& other = registry.AddCounter("syncline_errors_total", "Errors", {{"kind", "dropped"}});
  EXPECT_EQ(&a, &b);
  EXPECT_NE(&a, &other);
  a.Add();
  b.Add(2);
  other.Add();
  const std::string text = registry.Render();
  EXPECT_TRUE(Contains(text, "syncline_errors_total{kind=\"rejected\"} 3\n")) << text;
  EXPECT_TRUE(Contains(text, "syncline_errors_total{kind=\"dropped\"} 1\n")) << text;
  // One HELP/TYPE header for the family.
  EXPECT_EQ(text.find("# TYPE syncline_errors_total"), text.rfind("# TYPE syncline_errors_total"));
}

TEST(MetricsRegistryTest, HistogramBucketsAreCumulativeWithSumAndCount) {
  MetricsRegistry registry;
  Histogram& h = registry.AddHistogram("syncline_push_pull_seconds", "Latency", {0.001, 0.01, 0.1});
  for (double v : {0.0005, 0.001, 0.005, 0.05, 2.0}) h.Observe(v);
  const std::string text = registry.Render();
  EXPECT_TRUE(Contains(text, "# TYPE syncline_push_pull_seconds histogram\n")) << text;
  EXPECT_TRUE(Contains(text, "syncline_push_pull_seconds_bucket{le=\"0.001\"} 2\n")) << text;  // le is inclusive
  EXPECT_TRUE(Contains(text, "syncline_push_pull_seconds_bucket{le=\"0.01\"} 3\n")) << text;
  EXPECT_TRUE(Contains(text, "syncline_push_pull_seconds_bucket{le=\"0.1\"} 4\n")) << text;
  EXPECT_TRUE(Contains(text, "syncline_push_pull_seconds_bucket{le=\"+Inf\"} 5\n")) << text;
  EXPECT_TRUE(Contains(text, "syncline_push_pull_seconds_sum 2.0565\n")) << text;
  EXPECT_TRUE(Contains(text, "syncline_push_pull_seconds_count 5\n")) << text;
}

TEST(MetricsRegistryTest, EscapesLabelValuesAndHelp) {
  MetricsRegistry registry;
  registry.AddGauge("g", "line one\nback\\slash", {{"node", "say \"hi\"\\\n"}}).Set(1);
  const std::string text = registry.Render();
  EXPECT_TRUE(Contains(text, "# HELP g line one\\nback\\\\slash\n")) << text;
  EXPECT_TRUE(Contains(text, "g{node=\"say \\\"hi\\\"\\\\\\n\"} 1\n")) << text;
}

TEST(MetricsRegistryTest, CollectorsAreReadAtScrapeTime) {
  MetricsRegistry registry;
  double age = 0.5;
  registry.AddCollector("syncline_heartbeat_age_seconds", "Age", [&age] {
    return std::vector<std::pair<MetricLabels, double>>{{{{"node", "worker 0"}}, age}, {{{"node", "server 0"}}, 2}};
  });
  EXPECT_TRUE(Contains(registry.Render(), "syncline_heartbeat_age_seconds{node=\"worker 0\"} 0.5\n"));
  age = 7;
  const std::string text = registry.Render();
  EXPECT_TRUE(Contains(text, "syncline_heartbeat_age_seconds{node=\"worker 0\"} 7\n")) << text;
  EXPECT_TRUE(Contains(text, "syncline_heartbeat_age_seconds{node=\"server 0\"} 2\n")) << text;
}

TEST(MetricsRegistryTest, CollectorMayRegisterMetricsWithoutDeadlock) {
  MetricsRegistry registry;
  registry.AddCollector("outer", "Registers while collected", [&registry] {
    registry.AddCounter("inner_total", "Made by a collector").Add();
    return std::vector<std::pair<MetricLabels, double>>{{{}, 1}};
  });
  registry.Render();
  EXPECT_TRUE(Contains(registry.Render(), "inner_total 1\n"));
}

TEST(MetricsRegistryTest, CountsExactlyUnderConcurrentUpdates) {
  MetricsRegistry registry;
  Counter& c = registry.AddCounter("c_total", "c");
  Histogram& h = registry.AddHistogram("h", "h", {1.0});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) {
        c.Add(3);
        h.Observe(0.5);
        (void)registry.Render().size();
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(c.value(), 120000);
  EXPECT_EQ(h.snapshot().count, 40000u);
  EXPECT_EQ(h.snapshot().sum, 20000);
}

TEST(MetricsRegistryTest, ProcessMetricsReportThisProcess) {
  MetricsRegistry registry;
  AddProcessMetrics(registry);
  AddNodeInfo(registry, "server", 1);
  std::vector<char> ballast(64 << 20, 1);  // resident: touched
  const std::string text = registry.Render();
  EXPECT_TRUE(Contains(text, "syncline_node_info{role=\"server\",rank=\"1\"} 1\n")) << text;
  const size_t at = text.find("\nprocess_resident_memory_bytes ");
  ASSERT_NE(at, std::string::npos) << text;
  EXPECT_GT(std::stod(text.substr(at + 31)), 64.0 * (1 << 20));
  EXPECT_TRUE(Contains(text, "# TYPE process_cpu_seconds_total counter\n")) << text;
  const size_t start = text.find("\nprocess_start_time_seconds ");
  ASSERT_NE(start, std::string::npos);
  const double started = std::stod(text.substr(start + 28));
  const double now = static_cast<double>(time(nullptr));
  EXPECT_GT(started, now - 3600);
  EXPECT_LE(started, now + 1);
  EXPECT_GT(ballast[12345], 0);
}

}  // namespace
}  // namespace syncline
