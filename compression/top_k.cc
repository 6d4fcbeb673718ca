#include "compression/top_k.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "compression/kernels.h"
#include "summation/kernels.h"

namespace syncline::compression {
namespace summation_kernels = ::syncline::kernels;
namespace {

constexpr int kBucketBits = 8;  // 256 buckets a round: its counts stay in L1
constexpr size_t kSmallSelection = 32;  // below this, nth_element beats a round

// The k of `candidates` (count ascending indices of values[0, n) that are not
// NaN, at least k of them) largest in magnitude, ascending, ties broken toward
// lower indices, to out[0, k): those above the k-th largest magnitude, then
// the first ones equal to it. keys and scratch have room for count.
void LargestAmong(const float* values, size_t n, const uint32_t* candidates, size_t count, size_t k, uint32_t* keys,
                  uint32_t* scratch, uint32_t* out) {
  // Gathered here rather than packed beside the indices in the candidate
  // pass: a second compress and store there cost more than twice this. No
  // candidate is a NaN, so a key is the value's bits without the sign.
  kernels::MagnitudeBitsAt(values, n, candidates, count, keys);
  const uint32_t kth = KthLargestKey(keys, count, k, scratch);
  // Usually exactly k are at least the k-th (no tie left out): one packing pass.
  if (kernels::KeepWhereKeyIn(keys, candidates, count, kth, UINT32_MAX, scratch) == k) {
    std::copy_n(scratch, k, out);
    return;
  }
  size_t above = 0;
  for (size_t j = 0; j < count; ++j) above += keys[j] > kth;
  size_t ties_left = k - above;
  size_t taken = 0;
  for (size_t j = 0; j < count && taken < k; ++j) {  // written every time, kept when taken
    const bool tie = keys[j] == kth;
    const bool take = keys[j] > kth || (tie && ties_left > 0);
    ties_left -= tie && take;
    out[taken] = candidates[j];
    taken += take;
  }
}

}  // namespace

uint32_t KthLargestKey(const uint32_t* keys, size_t size, size_t k, uint32_t* scratch) {
  for (;; keys = scratch) {  // the first round reads keys, the rest what it kept
    if (size <= kSmallSelection) {
      if (keys != scratch) std::copy_n(keys, size, scratch);
      std::nth_element(scratch, scratch + (k - 1), scratch + size, std::greater<uint32_t>());
      return scratch[k - 1];
    }
    const auto [lo, hi] = kernels::RangeOfKeys(keys, size);
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
    const uint32_t top = (hi - lo) >> shift;
    uint32_t bucket = top;
    for (size_t larger = 0;; --bucket) {
      const size_t in = size_t{counts[0][bucket]} + counts[1][bucket] + counts[2][bucket] + counts[3][bucket];
      if (larger + in >= k) {
        k -= larger;
        break;
      }
      larger += in;
    }
    // The bucket's keys: from lo + bucket 2^shift to the next bucket's first
    // (or hi, the top bucket's last key; the next bucket's first may not fit
    // in 32 bits).
    const uint32_t first = lo + (bucket << shift);
    const uint32_t last = bucket == top ? hi : first + ((uint32_t{1} << shift) - 1);
    size = kernels::KeepWhereKeyIn(keys, keys, size, first, last, scratch);
  }
}

namespace {

// LargestIndices of values, or with a residual, of residual + values (stored
// into residual as the pass over the chunk reads them).
//
// Where k is a small part of n, from a sample first: a threshold about 2k
// values pass, found among values evenly spread; one pass over n collects
// the indices that pass it (a vector compare per 16 or 8 values), and
// the exact selection runs among those. A sample that let fewer than k pass,
// or far more than 2k, falls back to all n.
void SelectLargest(const float* values, float* residual, size_t n, size_t k, uint32_t* out) {
  const float* selected = residual != nullptr ? residual : values;  // once the pass has added
  // The sample: 1 value in 64, from 1024 to 4096 of them (its selection is
  // a fixed cost that small chunks feel). Its rank 2k S / n + 8 lets about 2k
  // pass: fewer than k would take the sample's k S / n-th largest landing 8
  // or more places too low, which 1024 values make rare (at 1%, k S / n is
  // about 10, and 18 more is over 5 standard deviations).
  const size_t sample_size = std::clamp<size_t>(n / 64, 1024, 4096);
  if (n >= 16 * sample_size && 8 * k <= n) {
    // One allocation: the candidates and their keys, and room for the sample
    // and for the selection's keys kept.
    const size_t capacity = 4 * k + 1024;
    auto scratch = std::make_unique_for_overwrite<uint32_t[]>(2 * capacity + std::max(capacity, sample_size));
    uint32_t* candidates = scratch.get();
    uint32_t* keys = candidates + capacity;
    uint32_t* selection = keys + capacity;
    const size_t stride = n / sample_size;
    for (size_t s = 0; s < sample_size; ++s) {
      const size_t i = s * stride;
      selection[s] = MagnitudeKey(residual != nullptr ? residual[i] + values[i] : values[i]);
    }
    const size_t rank = std::min(sample_size, 2 * k * sample_size / n + 8);
    const float loose = std::bit_cast<float>(KthLargestKey(selection, sample_size, rank, selection));
    const size_t found = residual != nullptr
                             ? kernels::AddAndIndicesAtLeast(values, residual, n, loose, candidates, capacity)
                             : kernels::IndicesAtLeast(values, n, loose, candidates, capacity);
    if (found >= k && found <= capacity) return LargestAmong(selected, n, candidates, found, k, keys, selection, out);
  } else if (residual != nullptr) {
    summation_kernels::SumInto(DType::kFloat32, residual, values, n);
  }
  auto scratch = std::make_unique_for_overwrite<uint32_t[]>(3 * n);  // every value that is not NaN
  uint32_t* candidates = scratch.get();
  uint32_t* keys = candidates + n;
  const size_t found = kernels::IndicesAtLeast(selected, n, -INFINITY, candidates, n);
  if (found >= k) return LargestAmong(selected, n, candidates, found, k, keys, keys + n, out);
  // Fewer than k values are not NaN: send them all, and fill with the first
  // indices not taken (NaNs), still ascending.
  std::vector<bool> taken(n, false);
  for (size_t j = 0; j < found; ++j) taken[candidates[j]] = true;
  std::vector<uint32_t> sent(candidates, candidates + found);
  for (size_t i = 0; i < n && sent.size() < k; ++i)
    if (!taken[i]) sent.push_back(static_cast<uint32_t>(i));
  std::sort(sent.begin(), sent.end());
  std::copy(sent.begin(), sent.end(), out);
}

}  // namespace

void LargestIndices(const float* values, size_t n, size_t k, uint32_t* out) {
  SelectLargest(values, nullptr, n, k, out);
}

void LargestIndicesOfSum(const float* values, float* residual, size_t n, size_t k, uint32_t* out) {
  SelectLargest(values, residual, n, k, out);
}

}  // namespace syncline::compression
