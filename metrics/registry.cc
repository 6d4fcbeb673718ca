#include "metrics/registry.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <variant>

namespace syncline {
namespace {

std::string FormatValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", v);
}

void AppendEscaped(std::string& out, const std::string& text, bool quote) {
  for (char c : text) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else if (quote && c == '"')
      out += "\\\"";
    else
      out += c;
  }
}

// `name{a="x",b="y"} value`; `extra` is one more label (a histogram's le).
void AppendSample(std::string& out, const std::string& name, const MetricLabels& labels, double value,
                  const std::pair<std::string, std::string>* extra = nullptr) {
  out += name;
  if (!labels.empty() || extra) {
    out += '{';
    bool first = true;
    auto add = [&](const std::pair<std::string, std::string>& label) {
      if (!first) out += ',';
      first = false;
      out += label.first;
      out += "=\"";
      AppendEscaped(out, label.second, true);
      out += '"';
    };
    for (const auto& label : labels) add(label);
    if (extra) add(*extra);
    out += '}';
  }
  out += ' ';
  out += FormatValue(value);
  out += '\n';
}

void AppendHeader(std::string& out, const std::string& name, const std::string& help, const char* type) {
  out += "# HELP " + name + ' ';
  AppendEscaped(out, help, false);
  out += "\n# TYPE " + name + ' ' + type + '\n';
}

}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(new std::atomic<uint64_t>[bounds_.size() + 1]) {
  for (size_t i = 0; i <= bounds_.size(); ++i) counts_[i].store(0, std::memory_order_relaxed);
}

void Histogram::Observe(double value) {
  const size_t bucket = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  counts_[bucket].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(value, std::memory_order_relaxed);
}

Histogram::Snapshot Histogram::snapshot() const {
  Snapshot s;
  uint64_t running = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    running += counts_[i].load(std::memory_order_relaxed);
    s.cumulative.push_back(running);
  }
  s.count = running;
  s.sum = sum_.load(std::memory_order_relaxed);
  return s;
}

std::vector<double> ExponentialBuckets(double start, double factor, int count) {
  std::vector<double> bounds;
  for (int i = 0; i < count; ++i, start *= factor) bounds.push_back(start);
  return bounds;
}

MetricsRegistry::Family& MetricsRegistry::FamilyLocked(const std::string& name, const std::string& help,
                                                       Kind kind) {
  if (auto it = by_name_.find(name); it != by_name_.end()) {
    if (it->second->kind != kind) {
      std::fprintf(stderr, "syncline: metric %s registered as two different kinds\n", name.c_str());
      std::abort();
    }
    return *it->second;
  }
  families_.push_back(Family{name, help, kind, {}, nullptr});
  by_name_[name] = &families_.back();
  return families_.back();
}

MetricsRegistry::Series* MetricsRegistry::FindLocked(Family& family, const MetricLabels& labels) const {
  for (auto& s : family.series)
    if (s.labels == labels) return &s;
  return nullptr;
}

Counter& MetricsRegistry::AddCounter(const std::string& name, const std::string& help, MetricLabels labels) {
  MutexLock lock(mu_);
  Family& f = FamilyLocked(name, help, Kind::kCounter);
  if (Series* s = FindLocked(f, labels); s && s->counter) return *s->counter;
  Counter& c = counters_.emplace_back();
  f.series.push_back(Series{std::move(labels), &c, nullptr, nullptr});
  return c;
}

Gauge& MetricsRegistry::AddGauge(const std::string& name, const std::string& help, MetricLabels labels) {
  MutexLock lock(mu_);
  Family& f = FamilyLocked(name, help, Kind::kGauge);
  if (Series* s = FindLocked(f, labels); s && s->gauge) return *s->gauge;
  Gauge& g = gauges_.emplace_back();
  f.series.push_back(Series{std::move(labels), nullptr, &g, nullptr});
  return g;
}

Histogram& MetricsRegistry::AddHistogram(const std::string& name, const std::string& help,
                                         std::vector<double> upper_bounds, MetricLabels labels) {
  MutexLock lock(mu_);
  Family& f = FamilyLocked(name, help, Kind::kHistogram);
  if (Series* s = FindLocked(f, labels); s && s->histogram) return *s->histogram;
  std::sort(upper_bounds.begin(), upper_bounds.end());
  Histogram& h = histograms_.emplace_back(std::move(upper_bounds));
  f.series.push_back(Series{std::move(labels), nullptr, nullptr, &h});
  return h;
}

void MetricsRegistry::AddCollector(const std::string& name, const std::string& help, Collect collect,
                                   bool counter) {
  MutexLock lock(mu_);
  FamilyLocked(name, help, counter ? Kind::kCounter : Kind::kGauge).collect = std::move(collect);
}

void MetricsRegistry::RenderFamily(const Family& f, std::string& out) const {
  for (const Series& s : f.series) {
    if (s.counter) AppendSample(out, f.name, s.labels, s.counter->value());
    if (s.gauge) AppendSample(out, f.name, s.labels, s.gauge->value());
    if (!s.histogram) continue;
    const Histogram::Snapshot snap = s.histogram->snapshot();
    const auto& bounds = s.histogram->upper_bounds();
    for (size_t i = 0; i <= bounds.size(); ++i) {
      const std::pair<std::string, std::string> le{"le", i < bounds.size() ? FormatValue(bounds[i]) : "+Inf"};
      AppendSample(out, f.name + "_bucket", s.labels, static_cast<double>(snap.cumulative[i]), &le);
    }
    AppendSample(out, f.name + "_sum", s.labels, snap.sum);
    AppendSample(out, f.name + "_count", s.labels, static_cast<double>(snap.count));
  }
}

std::string MetricsRegistry::Render() const {
  // Collectors read other objects under their own locks, and those objects
  // register metrics under theirs: call collectors with mu_ released.
  struct Pending {
    std::string name, help;
    const char* type;
    Collect collect;
  };
  std::vector<std::variant<std::string, Pending>> parts;
  {
    MutexLock lock(mu_);
    for (const Family& f : families_) {
      const char* type = f.kind == Kind::kCounter ? "counter" : f.kind == Kind::kGauge ? "gauge" : "histogram";
      if (f.collect) {
        parts.emplace_back(Pending{f.name, f.help, type, f.collect});
        continue;
      }
      std::string text;
      AppendHeader(text, f.name, f.help, type);
      RenderFamily(f, text);
      parts.emplace_back(std::move(text));
    }
  }
  std::string out;
  for (auto& part : parts) {
    if (auto* text = std::get_if<std::string>(&part)) {
      out += *text;
      continue;
    }
    const Pending& p = std::get<Pending>(part);
    AppendHeader(out, p.name, p.help, p.type);
    for (const auto& [labels, value] : p.collect()) AppendSample(out, p.name, labels, value);
  }
  return out;
}

}  // namespace syncline
