// RoundClock: which rounds each worker has pushed to one key, for the
// bounded-staleness (ssp) mode of a server's key store.
//
// A worker's rounds of a key are numbered from 0. The clock counts, per worker,
// the rounds pushed without a gap (rounds 0..n-1), remembering the few pushed
// out of order above that, so "every worker has pushed round r" is exact even
// when a worker's pushes arrive out of order. In ssp mode with staleness k a
// pull of round r may be answered once every worker has pushed round r - k
// (at once when r < k): so no worker reads more than k rounds ahead of the
// slowest.
//
// Thread-safety: none; the key store runs each key on one lane.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace syncline {

class RoundClock {
 public:
  explicit RoundClock(int num_workers);

  // Records the push of `round` by `rank`; an error text (nothing recorded)
  // if that rank pushed that round already.
  std::string RecordPush(int rank, uint64_t round);

  // Rounds 0..n-1 pushed by `rank` (none missing).
  uint64_t RoundsPushed(int rank) const { return pushed_[rank]; }
  // The smallest RoundsPushed over all workers.
  uint64_t RoundsPushedByAll() const;
  // Whether `rank` has pushed round `round`.
  bool HasPushed(int rank, uint64_t round) const;

  // How many rounds (0..n-1) every worker must have pushed before a pull of
  // `round` is answered under staleness `k`.
  static uint64_t RoundsNeededToRead(uint64_t round, int k) { return round >= uint64_t(k) ? round - k + 1 : 0; }

 private:
  std::vector<uint64_t> pushed_;              // by rank: rounds pushed without a gap
  std::vector<std::set<uint64_t>> ahead_;     // by rank: rounds pushed beyond a gap
};

}  // namespace syncline
