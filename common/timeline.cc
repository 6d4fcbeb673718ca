#include "common/timeline.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

namespace syncline {

Timeline::Timeline(Options options) : options_(std::move(options)) {}

int64_t Timeline::NowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void Timeline::BeginStep() {
  MutexLock lock(mu_);
  ++step_;
}

bool Timeline::RecordingLocked() const { return step_ >= options_.start_step && step_ <= options_.end_step; }

bool Timeline::recording() const {
  MutexLock lock(mu_);
  return RecordingLocked();
}

void Timeline::Span(const std::string& name, const char* category, const std::string& track, int64_t start_us,
                    int64_t end_us) {
  MutexLock lock(mu_);
  if (!RecordingLocked()) return;
  auto [it, added] = tracks_.emplace(track, static_cast<int>(tracks_.size()) + 1);
  events_.push_back(Event{name, category, it->second, start_us, std::max<int64_t>(0, end_us - start_us)});
}

size_t Timeline::num_spans() const {
  MutexLock lock(mu_);
  return events_.size();
}

Status Timeline::Write() const {
  nlohmann::json events = nlohmann::json::array();
  {
    MutexLock lock(mu_);
    events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", options_.pid},
                      {"args", {{"name", options_.process_name}}}});
    for (const auto& [track, tid] : tracks_) {
      events.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", options_.pid}, {"tid", tid},
                        {"args", {{"name", track}}}});
      // Rows in the order they first appeared.
      events.push_back({{"ph", "M"}, {"name", "thread_sort_index"}, {"pid", options_.pid}, {"tid", tid},
                        {"args", {{"sort_index", tid}}}});
    }
    for (const Event& e : events_) {
      events.push_back({{"ph", "X"}, {"name", e.name}, {"cat", e.category}, {"pid", options_.pid}, {"tid", e.track},
                        {"ts", e.start_us}, {"dur", e.duration_us}});
    }
  }
  std::error_code ec;
  const std::filesystem::path path(options_.path);
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);
  std::ofstream out(options_.path, std::ios::trunc);
  if (!out) return Unavailable("cannot write the trace to " + options_.path);
  out << nlohmann::json{{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}}.dump() << "\n";
  if (!out.flush()) return Unavailable("writing the trace to " + options_.path + " failed");
  return Status::Ok();
}

}  // namespace syncline
