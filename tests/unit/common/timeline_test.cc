#include "common/timeline.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

namespace syncline {
namespace {

nlohmann::json Load(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);  // throws (failing the test) on invalid JSON
}

std::string TempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("syncline-timeline-" + std::to_string(getpid())) / name).string();
}

TEST(TimelineTest, KeepsOnlySpansOfTheRecordedSteps) {
  Timeline t({TempPath("steps.json"), 3, "worker 3", /*start_step=*/1, /*end_step=*/2});
  t.Span("before any step", "compute", "compute", 0, 1);
  for (int step = 0; step < 4; ++step) {
    t.BeginStep();
    t.Span("step " + std::to_string(step), "compute", "compute", 10 * step, 10 * step + 5);
  }
  EXPECT_EQ(t.num_spans(), 2u);
  ASSERT_TRUE(t.Write().ok());
  auto trace = Load(t.path());
  std::vector<std::string> names;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "X") {
      names.push_back(e["name"]);
      EXPECT_EQ(e["pid"], 3);
      EXPECT_EQ(e["dur"], 5);
    }
  EXPECT_EQ(names, (std::vector<std::string>{"step 1", "step 2"}));
}

TEST(TimelineTest, NamesItsRowsAndProcess) {
  Timeline t({TempPath("rows.json"), 0, "worker 0", 0, 10});
  t.BeginStep();
  t.Span("push", "chunk", "fc6.grad #0", 100, 200);
  t.Span("push", "chunk", "fc6.grad #1", 150, 250);
  t.Span("sum", "chunk", "fc6.grad #0", 200, 300);
  ASSERT_TRUE(t.Write().ok());
  auto trace = Load(t.path());
  std::map<int, std::string> rows;
  std::string process;
  int spans = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name") rows[e["tid"]] = e["args"]["name"];
    if (e["ph"] == "M" && e["name"] == "process_name") process = e["args"]["name"];
    if (e["ph"] == "X") ++spans;
  }
  EXPECT_EQ(process, "worker 0");
  EXPECT_EQ(spans, 3);
  ASSERT_EQ(rows.size(), 2u) << "one row per track";
  EXPECT_EQ(rows.begin()->second, "fc6.grad #0") << "rows in order of first appearance";
}

TEST(TimelineTest, AnUnwritablePathIsAClearError) {
  Timeline t({"/proc/no-such-dir/trace.json", 0, "w", 0, 1});
  Status st = t.Write();
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("/proc/no-such-dir/trace.json"), std::string::npos) << st.ToString();
}

}  // namespace
}  // namespace syncline
