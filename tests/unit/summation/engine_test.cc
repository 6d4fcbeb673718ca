// summation/engine.h: the parallel path gives the serial kernel's bits.
#include "summation/engine.h"

#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "reference.h"
#include "summation/kernels.h"

namespace syncline {
namespace {

using testing::kAllDTypes;
using testing::StoreAs;

// Finite random values (NaN payload propagation is not part of the contract).
std::vector<uint8_t> RandomBuffer(DType t, size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> val(0.0, 100.0);
  std::vector<uint8_t> buf(n * DTypeSize(t));
  for (size_t i = 0; i < n; ++i) StoreAs(t, buf.data(), i, val(rng));
  return buf;
}

TEST(SummationEngineTest, ResolvesThreadCount) {
  EXPECT_GE(SummationEngine(0).num_threads(), 1);
  EXPECT_EQ(SummationEngine(3, 4096).num_threads(), 3);
  EXPECT_EQ(SummationEngine(3, 4096).parallel_threshold_bytes(), 4096u);
}

TEST(SummationEngineTest, ParallelSumIsBitIdenticalToSerialKernel) {
  const size_t n = (size_t{1} << 20) + 3;
  for (DType t : kAllDTypes) {
    const size_t es = DTypeSize(t);
    const auto dst = RandomBuffer(t, n + 1, 1);
    const auto src = RandomBuffer(t, n, 2);
    // Offset 1: dst not cache-line aligned, so slices start with a short head.
    for (size_t offset : {size_t{0}, size_t{1}}) {
      const size_t count = n - offset;
      std::vector<uint8_t> want = dst;
      kernels::SumInto(t, want.data() + offset * es, src.data(), count);
      for (int threads : {1, 2, 3, 8}) {
        for (size_t threshold : {size_t{0}, size_t{1} << 20}) {
          SummationEngine engine(threads, threshold);
          std::vector<uint8_t> got = dst;
          engine.SumInto(t, got.data() + offset * es, src.data(), count);
          ASSERT_EQ(0, std::memcmp(got.data(), want.data(), got.size()))
              << DTypeName(t) << " threads=" << threads << " threshold=" << threshold
              << " offset=" << offset;
        }
      }
    }
  }
}

TEST(SummationEngineTest, ParallelScaleIsBitIdenticalToSerialKernel) {
  const size_t n = (size_t{1} << 20) + 3;
  SummationEngine engine(2, 0);
  for (DType t : kAllDTypes) {
    const auto data = RandomBuffer(t, n, 3);
    std::vector<uint8_t> want = data, got = data;
    kernels::Scale(t, want.data(), n, 0.1);
    engine.Scale(t, got.data(), n, 0.1);
    ASSERT_EQ(0, std::memcmp(got.data(), want.data(), got.size())) << DTypeName(t);
  }
}

TEST(SummationEngineTest, SmallAndEmptyInputs) {
  SummationEngine engine(2, 0);
  for (DType t : kAllDTypes) {
    for (size_t n : {size_t{0}, size_t{1}, size_t{17}, size_t{5000}}) {
      auto dst = RandomBuffer(t, n, 4);
      const auto src = RandomBuffer(t, n, 5);
      auto want = dst;
      kernels::SumInto(t, want.data(), src.data(), n);
      engine.SumInto(t, dst.data(), src.data(), n);
      ASSERT_EQ(dst, want) << DTypeName(t) << " n=" << n;
    }
  }
}

TEST(SummationEngineTest, ConcurrentCallersOnDisjointBuffers) {
  SummationEngine engine(2, 64 * 1024);
  const size_t n = 300000;  // above the threshold: every call takes the parallel path
  constexpr int kCallers = 4;
  std::vector<std::vector<float>> dst(kCallers, std::vector<float>(n, 1.0f));
  const std::vector<float> src(n, 0.5f);
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c) {
    callers.emplace_back([&, c] {
      for (int rep = 0; rep < 20; ++rep) engine.SumInto(DType::kFloat32, dst[c].data(), src.data(), n);
    });
  }
  for (auto& th : callers) th.join();
  for (int c = 0; c < kCallers; ++c) {
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(dst[c][i], 11.0f) << "caller " << c << " i=" << i;
  }
}

}  // namespace
}  // namespace syncline
