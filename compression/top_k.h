// top-k's selection, inside compression/: which k of n fp32 values a topk
// chunk sends (the largest in magnitude), and the radix selection it runs on
// magnitudes as integer keys. compressor.cc frames what this picks.
//
// Thread-safety: free functions that touch only their arguments.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

namespace syncline::compression {

// |x| as an integer that orders as the magnitude does (a float's bits without
// its sign: for values that are not NaN, larger magnitude = larger key); NaN
// has key 0, with the zeros, so that selections order it last.
inline uint32_t MagnitudeKey(float x) {
  const uint32_t bits = std::bit_cast<uint32_t>(x) & 0x7fffffffu;
  return bits > 0x7f800000u ? 0 : bits;  // above infinity's bits: a NaN
}

// The k-th largest of keys[0, size) (1 <= k <= size). A radix selection:
// each round counts the keys into 256 buckets spanning their range and keeps
// the one bucket that holds the k-th, so the work is a few passes over ever
// fewer keys, without a data-dependent branch per key. The keys kept go to
// scratch (room for `size`), which may be keys itself.
uint32_t KthLargestKey(const uint32_t* keys, size_t size, size_t k, uint32_t* scratch);

// topk's indices, ascending, to out[0, k): the k values (1 <= k <= n)
// largest in magnitude, ties broken toward lower indices; NaN is sent only
// when fewer than k values are not NaN, and then the first NaNs.
void LargestIndices(const float* values, size_t n, size_t k, uint32_t* out);

// The same with error feedback's add fused into the pass over the chunk:
// residual[i] += values[i] for every i (the bits of a plain add), then
// LargestIndices of the sums.
void LargestIndicesOfSum(const float* values, float* residual, size_t n, size_t k, uint32_t* out);

}  // namespace syncline::compression
