// compression/kernels.h's top-k candidate pass against a plain loop, each of
// its loops (portable, AVX2, AVX-512, as far as this CPU has them): every size
// around the 8- and 16-value vectors, capacities that end mid-vector, and the
// values a compare can get wrong (NaN, infinities, -0, the threshold itself).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "compression/kernels.h"

namespace syncline::compression::kernels {
namespace {

std::vector<uint32_t> Expected(const std::vector<float>& v, float threshold) {
  std::vector<uint32_t> indices;
  for (uint32_t i = 0; i < v.size(); ++i)
    if (std::fabs(v[i]) >= threshold) indices.push_back(i);
  return indices;
}

TEST(IndicesAtLeastTest, MatchesAPlainLoopForEverySizeAndCapacity) {
  std::mt19937 gen(5);
  std::normal_distribution<float> dist;
  for (size_t n = 0; n <= 70; ++n) {
    std::vector<float> v(n);
    for (float& x : v) x = dist(gen);
    if (n > 5) v[5] = NAN;
    if (n > 9) v[9] = -INFINITY;
    if (n > 12) v[12] = -0.0f;
    if (n > 17) v[17] = -1.0f;  // exactly the threshold's magnitude: taken
    for (float threshold : {1.0f, 0.25f, 0.0f, -INFINITY, INFINITY}) {
      const std::vector<uint32_t> want = Expected(v, threshold);
      const size_t all = want.size();
      for (size_t capacity : {size_t{0}, size_t{1}, size_t{7}, size_t{8}, size_t{9}, size_t{15}, size_t{16}, size_t{17},
                              all - std::min<size_t>(all, 1), all, all + 8, all + 16}) {
        for (CandidateLoop loop : {CandidateLoop::kPortable, CandidateLoop::kAvx2, CandidateLoop::kAvx512}) {
          const std::string where = "loop " + std::to_string(static_cast<int>(loop)) + ", n " + std::to_string(n) +
                                    ", threshold " + std::to_string(threshold) + ", capacity " +
                                    std::to_string(capacity);
          std::vector<uint32_t> out(capacity + 1, 0xdeadbeef);  // one guard past the capacity
          const size_t found = IndicesAtLeast(v.data(), n, threshold, out.data(), capacity, loop);
          ASSERT_EQ(found, want.size()) << where;
          for (size_t j = 0; j < std::min(found, capacity); ++j) ASSERT_EQ(out[j], want[j]) << where;
          ASSERT_EQ(out[capacity], 0xdeadbeefu) << "wrote past the capacity: " << where;
        }
      }
    }
  }
}

}  // namespace
}  // namespace syncline::compression::kernels
