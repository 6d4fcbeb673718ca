#include "server/round_clock.h"

#include <algorithm>

namespace syncline {

RoundClock::RoundClock(int num_workers) : pushed_(num_workers, 0), ahead_(num_workers) {}

std::string RoundClock::RecordPush(int rank, uint64_t round) {
  if (HasPushed(rank, round))
    return "worker rank " + std::to_string(rank) + " already pushed round " + std::to_string(round);
  if (round != pushed_[rank]) {
    ahead_[rank].insert(round);
    return "";
  }
  ++pushed_[rank];
  std::set<uint64_t>& ahead = ahead_[rank];
  while (!ahead.empty() && *ahead.begin() == pushed_[rank]) {
    ahead.erase(ahead.begin());
    ++pushed_[rank];
  }
  return "";
}

uint64_t RoundClock::RoundsPushedByAll() const { return *std::min_element(pushed_.begin(), pushed_.end()); }

bool RoundClock::HasPushed(int rank, uint64_t round) const {
  return round < pushed_[rank] || ahead_[rank].count(round) > 0;
}

}  // namespace syncline
