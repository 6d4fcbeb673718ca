// MetricsRegistry: the numbers one Syncline process exposes to Prometheus.
// Components register counters, gauges and histograms (each a family name
// plus a label set), update them lock-free on their hot paths, and the
// exporter renders everything in Prometheus's text format at scrape time.
// Values that already live elsewhere (queue depth, resident memory, a peer's
// heartbeat age) are read at scrape time through callbacks instead of being
// copied on every change.
//
//   MetricsRegistry metrics;
//   Counter& pushed = metrics.AddCounter("syncline_pushed_bytes_total", "Bytes of gradient pushed");
//   pushed.Add(n);
//   std::string text = metrics.Render();
//
// Each role object (Scheduler, Server, Worker) owns its registry; there is no
// process-wide one. A callback must stay valid as long as the registry is
// rendered: its owner stops the exporter before it goes.
//
// Thread-safety: every method may be called from any thread. Instruments are
// never moved or freed while the registry lives.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/mutex.h"

namespace syncline {

// name -> value pairs, in the order given.
using MetricLabels = std::vector<std::pair<std::string, std::string>>;

// Only goes up (by a non-negative amount).
class Counter {
 public:
  void Add(double amount = 1) { value_.fetch_add(amount, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

class Gauge {
 public:
  void Set(double value) { value_.store(value, std::memory_order_relaxed); }
  void Add(double amount) { value_.fetch_add(amount, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

// Counts observations into buckets with fixed upper bounds (ascending; the
// +Inf bucket is implicit), plus their sum and count.
class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void Observe(double value);

  struct Snapshot {
    std::vector<uint64_t> cumulative;  // per bound, then +Inf
    double sum = 0;
    uint64_t count = 0;
  };
  Snapshot snapshot() const;
  const std::vector<double>& upper_bounds() const { return bounds_; }

 private:
  const std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> counts_;  // bounds_.size() + 1, not cumulative
  std::atomic<double> sum_{0};
};

// Bucket bounds start, start*factor, ... (count of them).
std::vector<double> ExponentialBuckets(double start, double factor, int count);

class MetricsRegistry {
 public:
  // Series produced at scrape time: one value per label set.
  using Collect = std::function<std::vector<std::pair<MetricLabels, double>>()>;

  // The same name and labels again return the same instrument. A name is one
  // kind of metric: asking for it as another kind is a programming error
  // (aborts with the name).
  Counter& AddCounter(const std::string& name, const std::string& help, MetricLabels labels = {});
  Gauge& AddGauge(const std::string& name, const std::string& help, MetricLabels labels = {});
  Histogram& AddHistogram(const std::string& name, const std::string& help, std::vector<double> upper_bounds,
                          MetricLabels labels = {});
  // A gauge (or, with `counter`, a counter) whose series `collect` returns at
  // each scrape. Replaces an earlier collector of the same name.
  void AddCollector(const std::string& name, const std::string& help, Collect collect, bool counter = false);

  // Every family in the order first registered, in Prometheus's text
  // exposition format (version 0.0.4).
  std::string Render() const;

 private:
  enum class Kind { kCounter, kGauge, kHistogram };
  struct Series {
    MetricLabels labels;
    Counter* counter = nullptr;
    Gauge* gauge = nullptr;
    Histogram* histogram = nullptr;
  };
  struct Family {
    std::string name, help;
    Kind kind;
    std::vector<Series> series;
    Collect collect;
  };
  Family& FamilyLocked(const std::string& name, const std::string& help, Kind kind) REQUIRES(mu_);
  // Both take a family of families_, so mu_ must be held.
  Series* FindLocked(Family& family, const MetricLabels& labels) const REQUIRES(mu_);
  void RenderFamily(const Family& family, std::string& out) const REQUIRES(mu_);

  mutable Mutex mu_;
  std::deque<Family> families_ GUARDED_BY(mu_);  // in registration order
  std::map<std::string, Family*> by_name_ GUARDED_BY(mu_);
  std::deque<Counter> counters_ GUARDED_BY(mu_);  // stable addresses
  std::deque<Gauge> gauges_ GUARDED_BY(mu_);
  std::deque<Histogram> histograms_ GUARDED_BY(mu_);
};

}  // namespace syncline
