// The metric families more than one role reports, named in one place so a
// worker's and a server's series line up in Prometheus (docs/metrics.md
// lists every family).
#pragma once

#include <functional>
#include <string>
#include <utility>

#include "metrics/registry.h"

namespace syncline {

// Gradient traffic of this node: a worker counts what it sends and receives,
// a server what it receives and answers.
struct TrafficCounters {
  Counter& pushed_bytes;
  Counter& pushed_chunks;
  Counter& pulled_bytes;
  Counter& pulled_chunks;

  static TrafficCounters Register(MetricsRegistry& registry);
};

// syncline_errors_total{kind=...}: messages rejected or dropped and
// operations failed, by kind.
Counter& ErrorCounter(MetricsRegistry& registry, const std::string& kind);

// syncline_dropped_messages_total{reason="malformed"|"unauthenticated"}: what
// a node's endpoint dropped on receipt; `counts` returns {malformed,
// unauthenticated} (from EndpointStats) at each scrape.
void AddDroppedMessages(MetricsRegistry& registry, std::function<std::pair<uint64_t, uint64_t>()> counts);

// syncline_rounds_completed_total: a worker's finished push_pulls, a
// server's completed (summed) rounds of a key.
Counter& RoundsCompleted(MetricsRegistry& registry);

}  // namespace syncline
