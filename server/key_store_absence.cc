// KeyStore: absent workers (finished, or waiting at a barrier) and the rounds
// and stale reads they leave orphaned.
#include <algorithm>

#include "server/key_store.h"

namespace syncline {

void KeyStore::SetAbsenceLocked(int rank, std::optional<Absence> why) {
  if (absent_.empty()) absent_.resize(contributors());
  if (absent_[rank].has_value() != why.has_value()) absent_count_ += why ? 1 : -1;
  absent_[rank] = why;
}

void KeyStore::MarkFinished(int rank) {
  if (rank < 0 || rank >= contributors()) return;
  MutexLock lock(absent_mu_);
  SetAbsenceLocked(rank, Absence{Absence::kFinished, 0});
}

void KeyStore::MarkAtBarrier(int rank, uint64_t sequence) {
  if (rank < 0 || rank >= contributors()) return;
  MutexLock lock(absent_mu_);
  if (!absent_.empty() && absent_[rank] && absent_[rank]->kind == Absence::kFinished) return;
  SetAbsenceLocked(rank, Absence{Absence::kAtBarrier, sequence});
}

void KeyStore::ClearBarrier(uint64_t sequence) {
  MutexLock lock(absent_mu_);
  for (int r = 0; r < static_cast<int>(absent_.size()); ++r)
    if (absent_[r] && absent_[r]->kind == Absence::kAtBarrier && absent_[r]->barrier_sequence == sequence)
      SetAbsenceLocked(r, std::nullopt);
}

void KeyStore::CheckOrphanedRounds(uint64_t key) {
  KeyState* state;
  {
    MutexLock lock(map_mu_);
    auto it = keys_.find(key);
    if (it == keys_.end()) return;
    state = it->second.get();
  }
  ReportIfStaleReadOrphaned(*state);
  for (const auto& [number, round] : state->rounds) ReportIfOrphaned(*state, number, round);
}

bool KeyStore::StillOrphaned(uint64_t key, uint64_t round, int rank, const Absence& why) const {
  if (rank < 0 || rank >= contributors()) return false;
  {
    MutexLock lock(absent_mu_);
    if (absent_.empty() || !absent_[rank] || absent_[rank]->kind != why.kind ||
        absent_[rank]->barrier_sequence != why.barrier_sequence)
      return false;
  }
  const KeyState* state;
  {
    MutexLock lock(map_mu_);
    auto it = keys_.find(key);
    if (it == keys_.end()) return false;
    state = it->second.get();
  }
  if (options_.ssp_staleness && state->clock &&
      state->clock->RoundsPushed(rank) < RoundClock::RoundsNeededToRead(round, *options_.ssp_staleness) &&
      std::any_of(state->stale_reads.begin(), state->stale_reads.end(),
                  [round](const auto& read) { return read.first == round; }))
    return true;
  auto it = state->rounds.find(round);
  return it != state->rounds.end() && !it->second.complete && it->second.pushes > 0 && !it->second.pushed[rank];
}

void KeyStore::ReportIfOrphaned(const KeyState& key, uint64_t number, const Round& round) {
  if (!options_.on_orphaned_round || absent_count_ == 0) return;
  if (round.complete || round.pushes == 0) return;
  int missing = -1;
  Absence why;
  {
    MutexLock lock(absent_mu_);
    for (int r = 0; r < static_cast<int>(absent_.size()) && missing < 0; ++r)
      if (absent_[r] && !round.pushed[r]) {
        missing = r;
        why = *absent_[r];
      }
  }
  if (missing >= 0) options_.on_orphaned_round(key.id, number, missing, why);
}

void KeyStore::ReportIfStaleReadOrphaned(const KeyState& key) {
  if (!options_.on_orphaned_round || absent_count_ == 0 || key.stale_reads.empty()) return;
  for (const auto& [number, pull] : key.stale_reads) {
    const uint64_t needed = RoundClock::RoundsNeededToRead(number, *options_.ssp_staleness);
    int missing = -1;
    Absence why;
    {
      MutexLock lock(absent_mu_);
      for (int r = 0; r < static_cast<int>(absent_.size()) && missing < 0; ++r)
        if (absent_[r] && key.clock->RoundsPushed(r) < needed) {
          missing = r;
          why = *absent_[r];
        }
    }
    if (missing >= 0) return options_.on_orphaned_round(key.id, number, missing, why);
  }
}

}  // namespace syncline
