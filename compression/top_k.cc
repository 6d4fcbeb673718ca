#include "compression/top_k.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <functional>
#include <memory>

#include "compression/kernels.h"

namespace syncline::compression {
namespace {

constexpr int kBucketBits = 8;  // 256 buckets a round: its counts stay in L1
constexpr size_t kSmallSelection = 32;  // below this, nth_element beats a round

// The k of `candidates` (ascending indices of values that are not NaN, at
// least k of them) largest in magnitude, ascending, ties broken toward lower
// indices: those above the k-th largest magnitude, then the first ones equal
// to it.
std::vector<uint32_t> LargestAmong(const float* values, const uint32_t* candidates, size_t count, size_t k) {
  auto keys = std::make_unique_for_overwrite<uint32_t[]>(count);
  auto selection = std::make_unique_for_overwrite<uint32_t[]>(count);
  size_t above = 0;
  for (size_t j = 0; j < count; ++j) selection[j] = keys[j] = MagnitudeKey(values[candidates[j]]);
  const uint32_t kth = KthLargestKey(selection.get(), count, k);
  for (size_t j = 0; j < count; ++j) above += keys[j] > kth;
  size_t ties_left = k - above;
  std::vector<uint32_t> indices(k);
  size_t taken = 0;
  for (size_t j = 0; j < count && taken < k; ++j) {  // written every time, kept when taken
    const bool tie = keys[j] == kth;
    const bool take = keys[j] > kth || (tie && ties_left > 0);
    ties_left -= tie && take;
    indices[taken] = candidates[j];
    taken += take;
  }
  return indices;
}

}  // namespace

uint32_t KthLargestKey(uint32_t* keys, size_t size, size_t k) {
  for (;;) {
    if (size <= kSmallSelection) {
      std::nth_element(keys, keys + (k - 1), keys + size, std::greater<uint32_t>());
      return keys[k - 1];
    }
    uint32_t lo = keys[0], hi = keys[0];
    for (size_t j = 1; j < size; ++j) {
      lo = std::min(lo, keys[j]);
      hi = std::max(hi, keys[j]);
    }
    if (lo == hi) return lo;
    // Buckets of 2^shift keys from lo: (hi - lo) >> shift < 256.
    const int shift = std::max(0, static_cast<int>(std::bit_width(hi - lo)) - kBucketBits);
    // Four sets of counts, so that runs of equal buckets (most keys share a
    // few) do not wait on one counter's store.
    uint32_t counts[4][1 << kBucketBits] = {};
    size_t j = 0;
    for (; j + 4 <= size; j += 4)
      for (size_t lane = 0; lane < 4; ++lane) ++counts[lane][(keys[j + lane] - lo) >> shift];
    for (; j < size; ++j) ++counts[0][(keys[j] - lo) >> shift];
    uint32_t bucket = (hi - lo) >> shift;
    for (size_t larger = 0;; --bucket) {
      const size_t in = size_t{counts[0][bucket]} + counts[1][bucket] + counts[2][bucket] + counts[3][bucket];
      if (larger + in >= k) {
        k -= larger;
        break;
      }
      larger += in;
    }
    size_t kept = 0;
    for (j = 0; j < size; ++j) {  // written every time, kept when in the bucket
      const uint32_t key = keys[j];
      keys[kept] = key;
      kept += ((key - lo) >> shift) == bucket;
    }
    size = kept;
  }
}

// Where k is a small part of n, from a sample first: a threshold about 2k
// values pass, found among values evenly spread; one pass over n collects
// the indices that pass it (a vector compare per 16 or 8 values), and
// the exact selection runs among those. A sample that let fewer than k pass,
// or far more than 2k, falls back to all n.
std::vector<uint32_t> LargestIndices(const float* values, size_t n, size_t k) {
  // The sample: 1 value in 64, from 1024 to 4096 of them (its selection is
  // a fixed cost that small chunks feel). Its rank 2k S / n + 8 lets about 2k
  // pass: fewer than k would take the sample's k S / n-th largest landing 8
  // or more places too low, which 1024 values make rare (at 1%, k S / n is
  // about 10, and 18 more is over 5 standard deviations).
  const size_t sample_size = std::clamp<size_t>(n / 64, 1024, 4096);
  if (n >= 16 * sample_size && 8 * k <= n) {
    auto sample = std::make_unique_for_overwrite<uint32_t[]>(sample_size);
    const size_t stride = n / sample_size;
    for (size_t s = 0; s < sample_size; ++s) sample[s] = MagnitudeKey(values[s * stride]);
    const size_t rank = std::min(sample_size, 2 * k * sample_size / n + 8);
    const float loose = std::bit_cast<float>(KthLargestKey(sample.get(), sample_size, rank));
    const size_t capacity = 4 * k + 1024;
    auto candidates = std::make_unique_for_overwrite<uint32_t[]>(capacity);
    const size_t found = kernels::IndicesAtLeast(values, n, loose, candidates.get(), capacity);
    if (found >= k && found <= capacity) return LargestAmong(values, candidates.get(), found, k);
  }
  std::vector<uint32_t> candidates(n);  // every value that is not NaN
  candidates.resize(kernels::IndicesAtLeast(values, n, -INFINITY, candidates.data(), n));
  if (candidates.size() >= k) return LargestAmong(values, candidates.data(), candidates.size(), k);
  // Fewer than k values are not NaN: send them all, and fill with the first
  // indices not taken, still ascending.
  std::vector<bool> taken(n, false);
  for (uint32_t i : candidates) taken[i] = true;
  for (size_t i = 0; i < n && candidates.size() < k; ++i)
    if (!taken[i]) candidates.push_back(static_cast<uint32_t>(i));
  std::sort(candidates.begin(), candidates.end());
  return candidates;
}

}  // namespace syncline::compression
