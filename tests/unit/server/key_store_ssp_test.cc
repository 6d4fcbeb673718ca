// KeyStore in ssp mode (bounded staleness k), driven directly: a pull of
// round r is answered once every worker has pushed round r - k, with the
// running value of every push so far; no worker ever reads more than k
// rounds ahead of the slowest, under any order of arrival; broadcasts
// (FLAG_WHOLE_ROUND) are summed as in sync mode; errors and absent workers
// as in sync mode.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <random>
#include <set>

#include "server/key_store.h"
#include "server/round_clock.h"
#include "tests/unit/server/key_store_testing.h"

namespace syncline {
namespace {

using namespace keystore_testing;

class KeyStoreSspTest : public KeyStoreTest {
 protected:
  void MakeStale(int workers, int staleness) {
    KeyStoreOptions options{workers, false, false, nullptr, nullptr};
    options.ssp_staleness = staleness;
    options.on_orphaned_round = [this](uint64_t, uint64_t round, int rank, Absence) {
      orphaned_.emplace_back(round, rank);
    };
    store_ = std::make_unique<KeyStore>(options, &engine_, &pool_);
  }
  // A push of `round` by `rank` asking for its pull, as workers send them.
  std::vector<Reply> PushPull(uint64_t round, int rank, const std::vector<float>& v, uint32_t flags = 0) {
    return DoPush(Push(round, rank, v, flags | proto::FLAG_PULL_AFTER_PUSH), rank);
  }
  std::vector<std::pair<uint64_t, int>> orphaned_;  // (round, rank)
};

TEST(RoundClockTest, CountsRoundsPushedWithoutAGapWhateverTheOrder) {
  RoundClock clock(2);
  EXPECT_EQ(clock.RecordPush(0, 1), "");  // ahead of a gap: not counted yet
  EXPECT_EQ(clock.RoundsPushed(0), 0u);
  EXPECT_TRUE(clock.HasPushed(0, 1));
  EXPECT_EQ(clock.RecordPush(0, 0), "");
  EXPECT_EQ(clock.RoundsPushed(0), 2u);
  EXPECT_EQ(clock.RoundsPushedByAll(), 0u);
  EXPECT_THAT(clock.RecordPush(0, 1), HasSubstr("worker rank 0 already pushed round 1"));
  EXPECT_EQ(clock.RecordPush(1, 0), "");
  EXPECT_EQ(clock.RoundsPushedByAll(), 1u);
  EXPECT_EQ(RoundClock::RoundsNeededToRead(0, 2), 0u);
  EXPECT_EQ(RoundClock::RoundsNeededToRead(2, 2), 1u);
  EXPECT_EQ(RoundClock::RoundsNeededToRead(5, 2), 4u);
  EXPECT_EQ(RoundClock::RoundsNeededToRead(0, 0), 1u);
}

TEST_F(KeyStoreSspTest, APullWaitsForEveryWorkersPushOfRoundRMinusKAndReturnsTheRunningValue) {
  MakeStale(2, /*staleness=*/2);
  // Rounds 0 and 1 need nothing from the others.
  auto out = PushPull(0, 0, {1, 0});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(ValuesOf<float>(out[0].message), (std::vector<float>{1, 0}));
  EXPECT_EQ(ValuesOf<float>(PushPull(1, 0, {1, 0})[0].message), (std::vector<float>{2, 0}));
  // Round 2 needs round 0 of rank 1: it waits.
  EXPECT_TRUE(PushPull(2, 0, {1, 0}).empty());
  out = OfOp(PushPull(0, 1, {0, 1}), proto::PULL_REPLY);
  ASSERT_EQ(out.size(), 2u) << "rank 1's own pull and rank 0's round 2";
  for (const Reply& r : out) {
    EXPECT_TRUE(ValidateMessage(r.message).ok());
    EXPECT_EQ(ValuesOf<float>(r.message), (std::vector<float>{3, 1}));
  }
  std::set<int32_t> to = {out[0].to, out[1].to};
  EXPECT_EQ(to, (std::set<int32_t>{NodeOf(0), NodeOf(1)}));
  EXPECT_EQ(out[0].to == NodeOf(0) ? out[0].message.header.round() : out[1].message.header.round(), 2u);
  // A plain PULL waits the same way: round 3 needs rank 1's round 1.
  EXPECT_TRUE(DoPull(Pull(3, 0), 0).empty());
  EXPECT_EQ(OfOp(PushPull(1, 1, {0, 1}), proto::PULL_REPLY).size(), 2u);
}

TEST_F(KeyStoreSspTest, StalenessZeroReadsEveryRoundComplete) {
  MakeStale(3, 0);
  for (int round = 0; round < 4; ++round) {
    EXPECT_TRUE(PushPull(round, 0, {1}).empty());
    EXPECT_TRUE(PushPull(round, 1, {1}).empty());
    auto out = OfOp(PushPull(round, 2, {1}), proto::PULL_REPLY);
    ASSERT_EQ(out.size(), 3u);
    EXPECT_EQ(ValuesOf<float>(out[0].message), (std::vector<float>{3.0f * (round + 1)}));
  }
}

// Workers push_pull one after another as in training (the next round once the
// last one's pull is back), each adding 1 to its own element, in a random
// order of arrival: every answer to a pull of round r shows every worker's
// pushes of rounds 0..r - k, and the fast ones do get ahead.
TEST_F(KeyStoreSspTest, NoWorkerEverReadsMoreThanKRoundsAheadOfTheSlowest) {
  constexpr int kWorkers = 3;
  constexpr uint64_t kRounds = 30;
  for (int staleness : {0, 1, 3}) {
    for (unsigned seed = 1; seed <= 20; ++seed) {
      SCOPED_TRACE("staleness " + std::to_string(staleness) + ", seed " + std::to_string(seed));
      MakeStale(kWorkers, staleness);
      std::mt19937 random(seed);
      std::vector<uint64_t> next_round(kWorkers, 0);
      std::vector<bool> waiting(kWorkers, false);
      uint64_t largest_lead = 0;
      auto check = [&](const std::vector<Reply>& replies) {
        for (const Reply& r : OfOp(replies, proto::PULL_REPLY)) {
          const int rank = r.to - kNodeBase;
          const uint64_t round = r.message.header.round();
          const std::vector<float> value = ValuesOf<float>(r.message);
          const uint64_t needed = RoundClock::RoundsNeededToRead(round, staleness);
          for (int w = 0; w < kWorkers; ++w) {
            EXPECT_GE(value[w], needed) << "rank " << rank << " read round " << round << " with only " << value[w]
                                        << " rounds of rank " << w;
            largest_lead = std::max<uint64_t>(largest_lead, round + 1 - std::min<uint64_t>(round + 1, value[w]));
          }
          waiting[rank] = false;
          ++next_round[rank];
        }
      };
      // Bounded: each turn one idle worker pushes, or nobody can (all done).
      for (int turn = 0; turn < 10 * kWorkers * int(kRounds); ++turn) {
        std::vector<int> idle;
        for (int w = 0; w < kWorkers; ++w)
          if (!waiting[w] && next_round[w] < kRounds) idle.push_back(w);
        if (idle.empty()) break;
        // Rank 0 is a straggler: it is picked a third as often when others can go.
        int rank = idle[random() % idle.size()];
        if (rank == 0 && idle.size() > 1 && random() % 3 != 0) rank = idle[1 + random() % (idle.size() - 1)];
        std::vector<float> one_hot(kWorkers, 0);
        one_hot[rank] = 1;
        waiting[rank] = true;
        check(PushPull(next_round[rank], rank, one_hot));
      }
      for (int w = 0; w < kWorkers; ++w) EXPECT_EQ(next_round[w], kRounds) << "worker " << w << " got stuck";
      EXPECT_LE(largest_lead, uint64_t(staleness)) << "a read missed more than k rounds of a worker";
      if (staleness > 0) {
        EXPECT_GT(largest_lead, 0u) << "nobody ran ahead: the bound was never exercised";
      }
    }
  }
}

TEST_F(KeyStoreSspTest, AnAveragedPushAddsItsShareAndTheRoundsOfOneWorkerCountInAnyOrder) {
  MakeStale(2, 1);
  DoPush(Push<float>(1, 0, {8, 8}, proto::FLAG_AVERAGE), 0);  // round 1 before round 0
  DoPush(Push<float>(0, 0, {2, 4}, proto::FLAG_AVERAGE), 0);
  EXPECT_TRUE(DoPull(Pull(1, 0), 0).empty()) << "rank 1 has not pushed round 0";
  auto out = OfOp(PushPull(0, 1, {2, 2}, proto::FLAG_AVERAGE), proto::PULL_REPLY);
  ASSERT_EQ(out.size(), 2u);
  for (const Reply& r : out) EXPECT_EQ(ValuesOf<float>(r.message), (std::vector<float>{6, 7}));  // (8+2+2)/2, (8+4+2)/2
  // Rank 0 has pushed rounds 0 and 1: a pull of its round 2 needs round 1 of rank 1.
  EXPECT_TRUE(DoPull(Pull(2, 0), 0).empty());
  ExpectError(DoPush(Push<float>(1, 0, {1, 1}), 0), 0, {"already pushed round 1"});
  EXPECT_EQ(OfOp(PushPull(1, 1, {0, 0}), proto::PULL_REPLY).size(), 2u);
}

// A broadcast's round is the root's tensor plus everyone's zeros, summed
// whole; the key's running value is another thing and stays as it was.
TEST_F(KeyStoreSspTest, AWholeRoundIsSummedAsInSyncModeBesideTheRunningValue) {
  MakeStale(2, 3);
  EXPECT_EQ(OfOp(PushPull(0, 0, {5}), proto::PULL_REPLY).size(), 1u);  // the running value: 5
  EXPECT_TRUE(PushPull(0, 0, {7}, proto::FLAG_WHOLE_ROUND).empty()) << "a whole round waits for every worker";
  auto out = OfOp(PushPull(0, 1, {0}, proto::FLAG_WHOLE_ROUND), proto::PULL_REPLY);
  ASSERT_EQ(out.size(), 2u);
  for (const Reply& r : out) EXPECT_EQ(ValuesOf<float>(r.message), (std::vector<float>{7}));
  EXPECT_EQ(ValuesOf<float>(PushPull(1, 0, {1})[0].message), (std::vector<float>{6}));
}

TEST_F(KeyStoreSspTest, RoundsFarAheadAreRefused) {
  MakeStale(2, 2);
  ExpectError(DoPush(Push<float>(kMaxRoundsAhead, 0, {1}), 0), 0, {"rounds beyond"});
  ExpectError(DoPull(Pull(kMaxRoundsAhead + 5, 1), 1), 1, {"rounds beyond"});
}

TEST_F(KeyStoreSspTest, APullWaitingForAWorkerThatFinishedIsReportedNamingIt) {
  MakeStale(2, 1);
  PushPull(0, 0, {1});
  PushPull(0, 1, {1});
  EXPECT_EQ(PushPull(1, 0, {1}).size(), 1u);  // answered: round 0 of rank 1 is enough
  EXPECT_TRUE(PushPull(2, 0, {1}).empty());  // needs rank 1's round 1
  store_->MarkFinished(0);  // rank 0 is not what the pull waits for
  store_->CheckOrphanedRounds(kKey);
  EXPECT_TRUE(orphaned_.empty());
  store_->MarkFinished(1);
  store_->CheckOrphanedRounds(kKey);
  ASSERT_EQ(orphaned_.size(), 1u);
  EXPECT_EQ(orphaned_[0], std::make_pair(uint64_t{2}, 1));
  EXPECT_TRUE(store_->StillOrphaned(kKey, 2, 1, Absence{Absence::kFinished, 0}));
}

}  // namespace
}  // namespace syncline
