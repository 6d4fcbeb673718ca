// compression/kernels.h's top-k loops against plain loops, each of their
// paths (portable, AVX2, AVX-512, as far as this CPU has them): the candidate
// pass for every size around the 8- and 16-value vectors, capacities that end
// mid-vector, and the values a compare can get wrong (NaN, infinities, -0, the
// threshold itself), with error feedback's add fused in too; the selection rounds' packing, in place too, with ranges
// at the ends of 32 bits (where a signed compare would go wrong); and the
// range of keys.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <utility>
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

TEST(AddAndIndicesAtLeastTest, StoresThePlainSumsAndFindsTheirCandidates) {
  std::mt19937 gen(7);
  std::normal_distribution<float> dist;
  for (size_t n = 0; n <= 70; ++n) {
    std::vector<float> v(n), start(n), sum(n);
    for (size_t i = 0; i < n; ++i) v[i] = dist(gen), start[i] = 0.5f * dist(gen);
    if (n > 5) v[5] = NAN;
    if (n > 9) start[9] = INFINITY;
    if (n > 12) v[12] = -0.0f, start[12] = -0.0f;
    if (n > 17) v[17] = -0.75f, start[17] = -0.25f;  // a sum of exactly the threshold's magnitude: taken
    for (size_t i = 0; i < n; ++i) sum[i] = start[i] + v[i];
    for (float threshold : {1.0f, 0.0f, -INFINITY}) {
      const std::vector<uint32_t> want = Expected(sum, threshold);
      for (size_t capacity : {size_t{0}, size_t{9}, want.size(), want.size() + 16}) {
        for (CandidateLoop loop : {CandidateLoop::kPortable, CandidateLoop::kAvx2, CandidateLoop::kAvx512}) {
          const std::string where = "loop " + std::to_string(static_cast<int>(loop)) + ", n " + std::to_string(n) +
                                    ", threshold " + std::to_string(threshold) + ", capacity " +
                                    std::to_string(capacity);
          std::vector<float> residual = start;
          std::vector<uint32_t> out(capacity + 1, 0xdeadbeef);
          const size_t found = AddAndIndicesAtLeast(v.data(), residual.data(), n, threshold, out.data(), capacity, loop);
          ASSERT_EQ(found, want.size()) << where;
          for (size_t j = 0; j < std::min(found, capacity); ++j) ASSERT_EQ(out[j], want[j]) << where;
          ASSERT_EQ(out[capacity], 0xdeadbeefu) << "wrote past the capacity: " << where;
          for (size_t i = 0; i < n; ++i)
            ASSERT_EQ(std::bit_cast<uint32_t>(residual[i]), std::bit_cast<uint32_t>(sum[i])) << where << ", sum " << i;
        }
      }
    }
  }
}

constexpr CandidateLoop kEveryLoop[] = {CandidateLoop::kPortable, CandidateLoop::kAvx2, CandidateLoop::kAvx512};

TEST(KeepWhereKeyInTest, MatchesAPlainLoopInPlaceOrNot) {
  std::mt19937 gen(9);
  std::uniform_int_distribution<uint32_t> any, few(0, 9);
  for (size_t size = 0; size <= 70; ++size) {
    std::vector<uint32_t> keys(size), items(size);
    for (size_t i = 0; i < size; ++i) {
      // Keys at both ends of 32 bits and a few in the middle.
      const uint32_t pick = few(gen);
      keys[i] = pick < 3 ? pick : pick < 6 ? 0xfffffff0u + pick : pick < 8 ? 0x80000000u + pick : any(gen);
      items[i] = any(gen);
    }
    for (auto [first, last] : {std::pair<uint32_t, uint32_t>{0, 0xffffffffu}, {1, 4}, {0x7ffffff0u, 0x80000009u},
                               {0xfffffff5u, 0xffffffffu}, {5, 4}}) {
      std::vector<uint32_t> want;
      for (size_t i = 0; i < size; ++i)
        if (keys[i] >= first && keys[i] <= last) want.push_back(items[i]);
      for (CandidateLoop loop : kEveryLoop) {
        const std::string where = "loop " + std::to_string(static_cast<int>(loop)) + ", size " +
                                  std::to_string(size) + ", range " + std::to_string(first) + "-" + std::to_string(last);
        std::vector<uint32_t> out(size + 1, 0xdeadbeef);
        ASSERT_EQ(KeepWhereKeyIn(keys.data(), items.data(), size, first, last, out.data(), loop), want.size()) << where;
        ASSERT_TRUE(std::equal(want.begin(), want.end(), out.begin())) << where;
        ASSERT_EQ(out[size], 0xdeadbeefu) << "wrote past the size: " << where;
        std::vector<uint32_t> in_place = keys;  // the selection rounds' use: keys packed onto themselves
        std::vector<uint32_t> kept_keys;
        for (uint32_t key : keys)
          if (key >= first && key <= last) kept_keys.push_back(key);
        ASSERT_EQ(KeepWhereKeyIn(in_place.data(), in_place.data(), size, first, last, in_place.data(), loop),
                  kept_keys.size())
            << where;
        ASSERT_TRUE(std::equal(kept_keys.begin(), kept_keys.end(), in_place.begin())) << where;
      }
    }
  }
}

TEST(MagnitudeBitsAtTest, ClearsTheSignOfEachValueGathered) {
  std::mt19937 gen(3);
  std::normal_distribution<float> dist;
  std::vector<float> v(100);
  for (float& x : v) x = dist(gen);
  v[7] = -INFINITY, v[8] = -0.0f, v[9] = -std::numeric_limits<float>::denorm_min();
  for (size_t count = 0; count <= 40; ++count) {
    std::vector<uint32_t> indices(count);
    for (size_t j = 0; j < count; ++j) indices[j] = static_cast<uint32_t>((j * 37 + 7) % v.size());
    for (CandidateLoop loop : kEveryLoop) {
      // n past 2^31 (a chunk a gather's signed indices could not reach) takes the plain loop.
      for (size_t n : {v.size(), (size_t{1} << 31) + 1}) {
        std::vector<uint32_t> keys(count + 1, 0xdeadbeef);
        MagnitudeBitsAt(v.data(), n, indices.data(), count, keys.data(), loop);
        for (size_t j = 0; j < count; ++j)
          ASSERT_EQ(keys[j], std::bit_cast<uint32_t>(std::fabs(v[indices[j]]))) << "count " << count << ", " << j;
        ASSERT_EQ(keys[count], 0xdeadbeefu) << "wrote past the count: " << count;
      }
    }
  }
}

TEST(RangeOfKeysTest, FindsTheEndsForEverySize) {
  std::mt19937 gen(13);
  std::uniform_int_distribution<uint32_t> any;
  for (size_t size = 1; size <= 40; ++size) {
    std::vector<uint32_t> keys(size);
    for (uint32_t& key : keys) key = any(gen);
    for (size_t extreme = 0; extreme < size; extreme += 7) {  // the ends of 32 bits, in every lane and the tail
      std::vector<uint32_t> with = keys;
      with[extreme] = 0;
      with[size - 1 - extreme] = 0xffffffffu;
      for (const std::vector<uint32_t>* v : {&keys, &with}) {
        const auto [lo, hi] = std::minmax_element(v->begin(), v->end());
        for (CandidateLoop loop : kEveryLoop) {
          const KeyRange range = RangeOfKeys(v->data(), size, loop);
          ASSERT_EQ(range.lo, *lo) << "loop " << static_cast<int>(loop) << ", size " << size;
          ASSERT_EQ(range.hi, *hi) << "loop " << static_cast<int>(loop) << ", size " << size;
        }
      }
    }
  }
}

}  // namespace
}  // namespace syncline::compression::kernels
