// Reading the Chrome trace a worker writes at Shutdown (settings: trace), for
// tests of what it records.
#pragma once

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace syncline::testing {

// The trace of worker `rank` in `dir`; nullopt if there is no such file.
inline std::optional<nlohmann::json> ReadWorkerTrace(const std::string& dir, int rank) {
  std::ifstream in(dir + "/worker-" + std::to_string(rank) + ".json");
  if (!in.good()) return std::nullopt;
  return nlohmann::json::parse(in);
}

// The complete ("X") events of `trace`, by the name of their row (thread), in file order.
inline std::map<std::string, std::vector<nlohmann::json>> SpansByRow(const nlohmann::json& trace) {
  std::map<int, std::string> rows;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "thread_name") rows[e["tid"]] = e["args"]["name"];
  std::map<std::string, std::vector<nlohmann::json>> spans;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "X") spans[rows.at(e["tid"])].push_back(e);
  return spans;
}

}  // namespace syncline::testing
