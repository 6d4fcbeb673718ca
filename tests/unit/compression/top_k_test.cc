// compression/top_k.h: the radix selection against a full sort, for keys
// spread over the whole range, crowded into a few values and into a narrow
// range (as magnitudes above a threshold are); and the magnitude keys' order.
#include "compression/top_k.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <vector>

namespace syncline::compression {
namespace {

uint32_t KthLargestBySort(std::vector<uint32_t> keys, size_t k) {
  std::sort(keys.begin(), keys.end(), std::greater<uint32_t>());
  return keys[k - 1];
}

void ExpectEverySelectionRight(const std::vector<uint32_t>& keys, const char* what) {
  const size_t size = keys.size();
  for (size_t k : {size_t{1}, size_t{2}, size / 100 + 1, size / 3 + 1, size / 2 + 1, size - 1, size}) {
    if (k == 0 || k > size) continue;
    std::vector<uint32_t> in_place = keys, scratch(size);
    EXPECT_EQ(KthLargestKey(in_place.data(), size, k, in_place.data()), KthLargestBySort(keys, k))
        << what << ", " << size << " keys, k " << k << ", in place";
    EXPECT_EQ(KthLargestKey(keys.data(), size, k, scratch.data()), KthLargestBySort(keys, k))
        << what << ", " << size << " keys, k " << k << ", into scratch";
  }
}

TEST(KthLargestKeyTest, MatchesASortWhateverTheKeysAre) {
  std::mt19937 gen(11);
  for (size_t size : {size_t{1}, size_t{5}, size_t{32}, size_t{33}, size_t{100}, size_t{1000}, size_t{20000}}) {
    std::vector<uint32_t> spread(size), crowded(size), narrow(size), magnitudes(size);
    std::uniform_int_distribution<uint32_t> any, three(0, 2), near(0, 300);
    std::normal_distribution<float> normal;
    for (size_t j = 0; j < size; ++j) {
      spread[j] = any(gen);
      crowded[j] = 0x3f800000u + three(gen);       // three distinct keys, many of each
      narrow[j] = 0x40000000u + near(gen) * 7919u;  // a range a few buckets wide at the first round
      magnitudes[j] = MagnitudeKey(normal(gen));
    }
    ExpectEverySelectionRight(spread, "spread over 32 bits");
    ExpectEverySelectionRight(crowded, "three values");
    ExpectEverySelectionRight(narrow, "a narrow range");
    ExpectEverySelectionRight(magnitudes, "normal magnitudes");
    ExpectEverySelectionRight(std::vector<uint32_t>(size, 7), "all equal");
  }
  std::vector<uint32_t> extremes = {0, 0xffffffffu, 0, 0xffffffffu, 1, 0xfffffffeu};
  extremes.resize(40, 5);  // past the small-selection cut
  ExpectEverySelectionRight(extremes, "the whole range's ends");
}

TEST(MagnitudeKeyTest, OrdersAsMagnitudesDoWithNaNLast) {
  const float inf = std::numeric_limits<float>::infinity();
  const float denormal = std::numeric_limits<float>::denorm_min();
  const std::vector<float> ascending = {0.0f, denormal, 1e-30f, 0.5f, 1.0f, 3e38f, inf};
  for (size_t j = 1; j < ascending.size(); ++j) {
    EXPECT_LT(MagnitudeKey(ascending[j - 1]), MagnitudeKey(ascending[j])) << ascending[j];
    EXPECT_EQ(MagnitudeKey(-ascending[j]), MagnitudeKey(ascending[j]));
  }
  EXPECT_EQ(MagnitudeKey(-0.0f), MagnitudeKey(0.0f));
  EXPECT_EQ(MagnitudeKey(NAN), 0u);
  EXPECT_EQ(MagnitudeKey(-NAN), 0u);
}

}  // namespace
}  // namespace syncline::compression
