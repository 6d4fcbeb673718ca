#include "metrics/common_metrics.h"

namespace syncline {

TrafficCounters TrafficCounters::Register(MetricsRegistry& r) {
  return TrafficCounters{
      r.AddCounter("syncline_pushed_bytes_total", "Bytes of gradient chunks pushed (worker: sent; server: received)"),
      r.AddCounter("syncline_pushed_chunks_total", "Gradient chunks pushed (worker: sent; server: received)"),
      r.AddCounter("syncline_pulled_bytes_total", "Bytes of summed chunks pulled (worker: received; server: sent)"),
      r.AddCounter("syncline_pulled_chunks_total", "Summed chunks pulled (worker: received; server: sent)"),
  };
}

Counter& ErrorCounter(MetricsRegistry& registry, const std::string& kind) {
  return registry.AddCounter("syncline_errors_total",
                             "Messages rejected or dropped, and operations that failed, by kind", {{"kind", kind}});
}

Counter& RoundsCompleted(MetricsRegistry& registry) {
  return registry.AddCounter("syncline_rounds_completed_total",
                             "Worker: push_pulls finished; server: rounds of a key whose sum was complete");
}

void AddDroppedMessages(MetricsRegistry& registry, std::function<std::pair<uint64_t, uint64_t>()> counts) {
  registry.AddCollector(
      "syncline_dropped_messages_total", "Messages this node's endpoint dropped on receipt, by reason",
      [counts = std::move(counts)] {
        const auto [malformed, unauthenticated] = counts();
        return std::vector<std::pair<MetricLabels, double>>{{{{"reason", "malformed"}}, double(malformed)},
                                                            {{{"reason", "unauthenticated"}}, double(unauthenticated)}};
      },
      /*counter=*/true);
}

}  // namespace syncline
