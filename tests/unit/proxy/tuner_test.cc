// The tuner driven by simulated cost models: from the default settings it
// must settle within 1.1x of the best grid point in at most 30 steps, decide
// the same way given the same measurements, and not move on noise; settled,
// it must search again when the step time drifts by more than 10% for two
// windows, and not on noise or one slow window.
#include "proxy/tuner.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <random>

namespace syncline {
namespace {

using Cost = std::function<double(const TunerPoint&)>;

// Where a job with nothing set starts.
const TunerPoint kDefaults{Settings{}.partition_bytes, kDefaultCreditPartitions};

double L2(double x) { return std::log2(x); }

// Link-bound step: small chunks pay per-message overhead, small credit leaves
// the link idle, large credit and large chunks delay the urgent layers.
double Simulated(const TunerPoint& p, double best_partition_mib, double best_credit) {
  const double dp = L2(p.partition_bytes / (best_partition_mib * (1 << 20)));
  const double dc = L2(p.credit_partitions / best_credit);
  return 500 + 40 * dp * dp + 25 * dc * dc + 10 * std::abs(dp * dc);
}

struct TunerRun {
  std::vector<TunerPoint> decisions;
  TunerPoint settled_on;
  int steps = 0;
};

// Steps the tuner until it settles (or 200 steps): each step costs what the
// point in use costs, times `noise` (deterministic).
TunerRun Drive(const Cost& cost, TunerPoint start, double noise = 0, uint32_t seed = 1) {
  Tuner tuner(TunerOptions{}, start);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> jitter(-noise, noise);
  TunerRun run;
  TunerPoint in_use = tuner.current();
  while (!tuner.settled() && run.steps < 200) {
    ++run.steps;
    if (auto next = tuner.OnStep(cost(in_use) * (1 + jitter(rng)))) {
      in_use = *next;
      run.decisions.push_back(*next);
    }
  }
  run.settled_on = in_use;
  EXPECT_EQ(in_use, tuner.best()) << "the tuner must end on the point it chose";
  return run;
}

double BestOfGrid(const Cost& cost) {
  double best = std::numeric_limits<double>::max();
  TunerOptions grid;
  for (uint64_t p : grid.partitions)
    for (uint64_t c : grid.credits) best = std::min(best, cost({p, c}));
  return best;
}

TEST(TunerTest, SettlesNearTheBestGridPointWithinThirtySteps) {
  const struct { double partition_mib, credit; } optima[] = {{0.25, 4}, {1, 2}, {4, 16}, {0.5, 8}, {2, 1}};
  for (const auto& o : optima) {
    SCOPED_TRACE(std::to_string(o.partition_mib) + " MiB x " + std::to_string(o.credit));
    Cost cost = [&](const TunerPoint& p) { return Simulated(p, o.partition_mib, o.credit); };
    TunerRun run = Drive(cost, kDefaults);
    EXPECT_LE(run.steps, 30);
    EXPECT_LE(cost(run.settled_on), 1.1 * BestOfGrid(cost)) << run.settled_on.ToString();
  }
}

TEST(TunerTest, NoisyMeasurementsStillLandWithinTenPercent) {
  Cost cost = [](const TunerPoint& p) { return Simulated(p, 0.25, 8); };
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    TunerRun run = Drive(cost, kDefaults, /*noise=*/0.05, seed);
    EXPECT_LE(run.steps, 30) << "seed " << seed;
    EXPECT_LE(cost(run.settled_on), 1.1 * BestOfGrid(cost)) << "seed " << seed << ": " << run.settled_on.ToString();
  }
}

TEST(TunerTest, SameMeasurementsSameDecisions) {
  Cost cost = [](const TunerPoint& p) { return Simulated(p, 2, 2); };
  TunerRun a = Drive(cost, kDefaults, 0.05, 7), b = Drive(cost, kDefaults, 0.05, 7);
  ASSERT_EQ(a.decisions.size(), b.decisions.size());
  for (size_t i = 0; i < a.decisions.size(); ++i) EXPECT_EQ(a.decisions[i], b.decisions[i]) << i;
}

TEST(TunerTest, AFlatCostStaysAtTheStart) {
  // Nothing is faster by the minimum gain: the tuner measures the neighbours
  // and comes back to where it started.
  TunerRun run = Drive([](const TunerPoint&) { return 100.0; }, kDefaults);
  EXPECT_EQ(run.settled_on, kDefaults);
  EXPECT_LE(run.steps, 30);
}

// Steps a settled tuner `steps` times at the point it uses, with step times
// from `cost` (times `noise`); follows its switches. Returns the point in use.
TunerPoint Keep(Tuner& tuner, TunerPoint in_use, const Cost& cost, int steps, double noise = 0, uint32_t seed = 1) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> jitter(-noise, noise);
  for (int i = 0; i < steps; ++i)
    if (auto next = tuner.OnStep(cost(in_use) * (1 + jitter(rng)))) in_use = *next;
  return in_use;
}

// Settles `tuner` on `cost` from its start; returns the point in use.
TunerPoint SettleOn(Tuner& tuner, const Cost& cost) {
  TunerPoint in_use = tuner.current();
  for (int i = 0; i < 200 && !tuner.settled(); ++i)
    if (auto next = tuner.OnStep(cost(in_use))) in_use = *next;
  EXPECT_TRUE(tuner.settled());
  return in_use;
}

TEST(TunerTest, ADriftBeyondTenPercentStartsASearchThatFindsTheNewBest) {
  // The job changes under the tuner: every step is 30% slower and the best
  // point moved from 256 KiB x 8 to 2 MiB x 2 (say, a new model phase).
  Cost before = [](const TunerPoint& p) { return Simulated(p, 0.25, 8); };
  Cost after = [](const TunerPoint& p) { return 1.3 * Simulated(p, 2, 2); };
  Tuner tuner(TunerOptions{}, kDefaults);
  TunerPoint in_use = SettleOn(tuner, before);
  in_use = Keep(tuner, in_use, before, 10);  // the watch's baseline window
  EXPECT_EQ(tuner.retunes(), 0);
  // Two windows of 10 steps in a row beyond 10%: the search begins at the second's end.
  in_use = Keep(tuner, in_use, after, 19);
  EXPECT_EQ(tuner.retunes(), 0) << "one drifted window is not enough";
  in_use = Keep(tuner, in_use, after, 1);
  EXPECT_EQ(tuner.retunes(), 1);
  EXPECT_FALSE(tuner.settled());
  EXPECT_NE(tuner.last_decision().find("drifted"), std::string::npos) << tuner.last_decision();
  for (int i = 0; i < 200 && !tuner.settled(); ++i)
    if (auto next = tuner.OnStep(after(in_use))) in_use = *next;
  ASSERT_TRUE(tuner.settled());
  EXPECT_LE(after(in_use), 1.1 * BestOfGrid(after)) << in_use.ToString();
  // The new conditions are the new baseline: no search after search.
  Keep(tuner, in_use, after, 200);
  EXPECT_EQ(tuner.retunes(), 1);
}

TEST(TunerTest, AFasterJobAlsoStartsASearch) {
  Cost cost = [](const TunerPoint& p) { return Simulated(p, 1, 4); };
  Tuner tuner(TunerOptions{}, kDefaults);
  TunerPoint in_use = Keep(tuner, SettleOn(tuner, cost), cost, 10);
  Keep(tuner, in_use, [&](const TunerPoint& p) { return 0.7 * cost(p); }, 20);
  EXPECT_EQ(tuner.retunes(), 1) << "a faster link may want other partitions too";
}

TEST(TunerTest, NoiseAndABriefSlowdownDoNotStartASearch) {
  Cost cost = [](const TunerPoint& p) { return Simulated(p, 0.5, 4); };
  for (uint32_t seed = 1; seed <= 10; ++seed) {
    Tuner tuner(TunerOptions{}, kDefaults);
    TunerPoint in_use = SettleOn(tuner, cost);
    // +-8% on every step for 500 steps: window medians stay within 10%.
    in_use = Keep(tuner, in_use, cost, 500, 0.08, seed);
    // One window (a checkpoint, say) 50% slower, then back.
    in_use = Keep(tuner, in_use, [&](const TunerPoint& p) { return 1.5 * cost(p); }, 10);
    in_use = Keep(tuner, in_use, cost, 100, 0.08, seed + 100);
    EXPECT_EQ(tuner.retunes(), 0) << "seed " << seed;
    EXPECT_TRUE(tuner.settled());
  }
}

TEST(TunerTest, AStartOffTheGridSnapsToTheNearestPoint) {
  Tuner tuner(TunerOptions{}, {1000000, 3});
  EXPECT_EQ(tuner.current(), (TunerPoint{1 << 20, 4}));
}

}  // namespace
}  // namespace syncline
