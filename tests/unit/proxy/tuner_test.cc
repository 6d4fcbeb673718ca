// The tuner driven by simulated cost models: it must settle within 1.1x of
// the best grid point in at most 50 steps, decide the same way given the same
// measurements, and not move on noise.
#include "proxy/tuner.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <random>

namespace syncline {
namespace {

using Cost = std::function<double(const TunerPoint&)>;

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

TEST(TunerTest, SettlesNearTheBestGridPointWithinFiftySteps) {
  const struct { double partition_mib, credit; } optima[] = {{0.25, 4}, {1, 2}, {4, 16}, {0.5, 8}, {2, 1}};
  for (const auto& o : optima) {
    SCOPED_TRACE(std::to_string(o.partition_mib) + " MiB x " + std::to_string(o.credit));
    Cost cost = [&](const TunerPoint& p) { return Simulated(p, o.partition_mib, o.credit); };
    TunerRun run = Drive(cost, {1 << 20, 4});
    EXPECT_LE(run.steps, 50);
    EXPECT_LE(cost(run.settled_on), 1.1 * BestOfGrid(cost)) << run.settled_on.ToString();
  }
}

TEST(TunerTest, NoisyMeasurementsStillLandWithinTenPercent) {
  Cost cost = [](const TunerPoint& p) { return Simulated(p, 0.25, 8); };
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    TunerRun run = Drive(cost, {1 << 20, 4}, /*noise=*/0.05, seed);
    EXPECT_LE(run.steps, 50) << "seed " << seed;
    EXPECT_LE(cost(run.settled_on), 1.1 * BestOfGrid(cost)) << "seed " << seed << ": " << run.settled_on.ToString();
  }
}

TEST(TunerTest, SameMeasurementsSameDecisions) {
  Cost cost = [](const TunerPoint& p) { return Simulated(p, 2, 2); };
  TunerRun a = Drive(cost, {1 << 20, 4}, 0.05, 7), b = Drive(cost, {1 << 20, 4}, 0.05, 7);
  ASSERT_EQ(a.decisions.size(), b.decisions.size());
  for (size_t i = 0; i < a.decisions.size(); ++i) EXPECT_EQ(a.decisions[i], b.decisions[i]) << i;
}

TEST(TunerTest, AFlatCostStaysAtTheStart) {
  // Nothing is faster by the minimum gain: the tuner measures the neighbours
  // and comes back to where it started.
  TunerRun run = Drive([](const TunerPoint&) { return 100.0; }, {1 << 20, 4});
  EXPECT_EQ(run.settled_on, (TunerPoint{1 << 20, 4}));
  EXPECT_LE(run.steps, 50);
}

TEST(TunerTest, AStartOffTheGridSnapsToTheNearestPoint) {
  Tuner tuner(TunerOptions{}, {1000000, 3});
  EXPECT_EQ(tuner.current(), (TunerPoint{1 << 20, 4}));
}

}  // namespace
}  // namespace syncline
