#include "proxy/tuner.h"

#include <algorithm>
#include <cmath>

namespace syncline {
namespace {

size_t Nearest(const std::vector<uint64_t>& grid, uint64_t value) {
  size_t best = 0;
  for (size_t i = 1; i < grid.size(); ++i) {
    const double d = std::abs(std::log2(double(grid[i]) / double(value)));
    if (d < std::abs(std::log2(double(grid[best]) / double(value)))) best = i;
  }
  return best;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

std::string TunerPoint::ToString() const {
  return std::to_string(partition_bytes / 1024) + " KiB partitions, credit " + std::to_string(credit_partitions) +
         " partitions";
}

Tuner::Tuner(TunerOptions options, TunerPoint start) : options_(std::move(options)) {
  current_ = {Nearest(options_.partitions, std::max<uint64_t>(1, start.partition_bytes)),
              Nearest(options_.credits, std::max<uint64_t>(1, start.credit_partitions))};
  best_ = current_;
}

std::optional<Tuner::Index> Tuner::Neighbour(Index from, int direction) const {
  const bool credits = phase_ != 1;
  const size_t size = credits ? options_.credits.size() : options_.partitions.size();
  size_t& at = credits ? from.second : from.first;
  if (direction < 0 ? at == 0 : at + 1 >= size) return std::nullopt;
  at = direction < 0 ? at - 1 : at + 1;
  if (scores_.count(from)) return std::nullopt;
  return from;
}

void Tuner::PlanPhase() {
  planned_.clear();
  for (int direction : {-1, +1})
    if (auto p = Neighbour(best_, direction)) planned_.push_back(*p);
}

void Tuner::WalkOn(Index from) {
  if (phase_ != 0 && phase_ != 1) return;
  planned_.clear();  // the other side of `from` was slower, or is now the far side
  const bool credits = phase_ == 0;
  const size_t at = credits ? current_.second : current_.first, was = credits ? from.second : from.first;
  if (at == was) return;
  if (auto p = Neighbour(current_, at > was ? +1 : -1)) planned_.push_back(*p);
}

std::optional<Tuner::Index> Tuner::NextCandidate() {
  while (static_cast<int>(scores_.size()) < options_.max_points) {
    while (!planned_.empty()) {
      Index next = planned_.front();
      planned_.erase(planned_.begin());
      if (!scores_.count(next)) return next;
    }
    if (++phase_ > 2) return std::nullopt;
    PlanPhase();
  }
  return std::nullopt;
}

std::optional<TunerPoint> Tuner::OnStep(double ms) {
  last_decision_.clear();
  if (settled_) {
    (void)Watch(ms);  // a new search measures the point in use first: nothing to switch yet
    return std::nullopt;
  }
  if (++steps_at_point_ <= options_.settle_steps) return std::nullopt;
  samples_.push_back(ms);
  if (static_cast<int>(samples_.size()) < options_.measure_steps) return std::nullopt;
  const double score = Median(samples_);
  scores_[current_] = score;
  samples_.clear();
  steps_at_point_ = 0;
  if (!have_best_ || score < scores_[best_] * (1 - options_.min_gain)) {
    const Index from = best_;
    best_ = current_;
    if (have_best_) WalkOn(from);
    have_best_ = true;
  }
  last_decision_ = "measured " + PointAt(current_).ToString() + ": " + std::to_string(score) + " ms per step";
  std::optional<Index> next = NextCandidate();
  if (!next) {
    settled_ = true;
    last_decision_ += "; settled on " + PointAt(best_).ToString() + " (" + std::to_string(scores_[best_]) +
                      " ms) after " + std::to_string(scores_.size()) + " points";
    next = best_;
    watched_.clear();
    baseline_ms_ = 0;
    drifted_windows_ = 0;
  } else {
    last_decision_ += "; next " + PointAt(*next).ToString();
  }
  if (*next == current_) return std::nullopt;
  current_ = *next;
  return PointAt(current_);
}

bool Tuner::Watch(double ms) {
  watched_.push_back(ms);
  if (static_cast<int>(watched_.size()) < options_.watch_steps) return false;
  const double median = Median(watched_);
  watched_.clear();
  if (baseline_ms_ == 0) {
    baseline_ms_ = median;
    last_decision_ = "watching: " + std::to_string(median) + " ms per step on " + PointAt(current_).ToString();
    return false;
  }
  if (std::abs(median / baseline_ms_ - 1) <= options_.drift) {
    drifted_windows_ = 0;
    return false;
  }
  if (++drifted_windows_ < options_.drift_windows) return false;
  last_decision_ = "step time drifted from " + std::to_string(baseline_ms_) + " to " + std::to_string(median) +
                   " ms; tuning again from " + PointAt(current_).ToString();
  BeginSearch();
  ++retunes_;
  return true;
}

void Tuner::BeginSearch() {
  settled_ = false;
  have_best_ = false;
  best_ = current_;
  scores_.clear();
  samples_.clear();
  planned_.clear();
  phase_ = -1;
  steps_at_point_ = 0;
}

}  // namespace syncline
