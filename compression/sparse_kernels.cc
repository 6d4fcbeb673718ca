// top-k's candidate pass and selection rounds, and the sparse forms' decode
// (kernels.h).
#include "compression/kernels.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>

#include "compression/x86_simd.h"

namespace syncline::compression::kernels {
namespace {

// The candidate passes read |values[i]|, or with a residual (error
// feedback's add fused in) store residual[i] + values[i] and read its
// magnitude: the same bits as a plain add before a plain pass.
template <bool kAddResidual>
size_t CandidatesPortable(const float* values, float* residual, size_t n, float threshold, uint32_t* out,
                          size_t capacity) {
  size_t found = 0;
  for (size_t i = 0; i < n; ++i) {
    float value = values[i];
    if constexpr (kAddResidual) residual[i] = value = residual[i] + value;
    if (std::fabs(value) >= threshold) {  // NaN compares false
      if (found < capacity) out[found] = static_cast<uint32_t>(i);
      ++found;
    }
  }
  return found;
}

// A vector loop's end: the portable loop on [i, n), its indices moved on by
// i, after the `found` candidates before i.
template <bool kAddResidual>
size_t FinishCandidates(const float* values, float* residual, size_t n, size_t i, float threshold, uint32_t* out,
                        size_t capacity, size_t found) {
  const size_t stored = std::min(found, capacity);
  const size_t rest = CandidatesPortable<kAddResidual>(values + i, kAddResidual ? residual + i : nullptr, n - i,
                                                       threshold, out + stored, capacity - stored);
  for (size_t j = stored; j < std::min(found + rest, capacity); ++j) out[j] += static_cast<uint32_t>(i);
  return found + rest;
}

// Where a vector's passing lanes no longer all fit: one at a time.
void StoreEachWhileRoom(uint32_t mask, size_t i, uint32_t* out, size_t found, size_t capacity) {
  for (uint32_t rest = mask; rest != 0 && found < capacity; rest &= rest - 1, ++found)
    out[found] = static_cast<uint32_t>(i + std::countr_zero(rest));
}

void MagnitudeBitsAtPortable(const float* values, const uint32_t* indices, size_t count, uint32_t* keys) {
  for (size_t j = 0; j < count; ++j) keys[j] = std::bit_cast<uint32_t>(values[indices[j]]) & 0x7fffffffu;
}

size_t KeepWhereKeyInPortable(const uint32_t* keys, const uint32_t* items, size_t size, uint32_t first,
                              uint32_t last, uint32_t* out) {
  size_t kept = 0;
  for (size_t i = 0; i < size; ++i) {  // written every time, kept when in range
    const uint32_t key = keys[i], item = items[i];
    out[kept] = item;
    kept += key >= first && key <= last;
  }
  return kept;
}

KeyRange RangeOfKeysPortable(const uint32_t* keys, size_t size) {
  KeyRange range{keys[0], keys[0]};
  for (size_t i = 1; i < size; ++i) {
    range.lo = std::min(range.lo, keys[i]);
    range.hi = std::max(range.hi, keys[i]);
  }
  return range;
}

#ifdef SYNCLINE_X86_SIMD
// For each 8-bit mask, the positions of its set bits, lowest first (the rest 0).
constexpr auto kSetBitPositions = [] {
  std::array<std::array<uint8_t, 8>, 256> table{};
  for (size_t mask = 0; mask < 256; ++mask) {
    size_t next = 0;
    for (uint8_t bit = 0; bit < 8; ++bit)
      if (mask >> bit & 1) table[mask][next++] = bit;
  }
  return table;
}();

// The lanes an 8-bit mask selects, as a permutation that packs them to the front.
[[maybe_unused]] __attribute__((target("avx2"))) inline __m256i PackingPermutation(uint32_t mask) {
  uint64_t positions;
  std::memcpy(&positions, kSetBitPositions[mask].data(), 8);
  return _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<int64_t>(positions)));
}

// Eight magnitudes compared at once into a bit mask; the indices of its set
// bits are packed to the front of a vector (a table lookup and a shuffle) and
// stored at out + found, and found moves on by their count: no branch per
// candidate, which would mispredict at a few percent of the values passing.
template <bool kAddResidual>
[[maybe_unused]] __attribute__((target("avx2,popcnt")))
size_t CandidatesAvx2(const float* values, float* residual, size_t n, float threshold, uint32_t* out,
                      size_t capacity) {
  const __m256 magnitude_bits = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 at_least = _mm256_set1_ps(threshold);
  size_t found = 0;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 value = _mm256_loadu_ps(values + i);
    if constexpr (kAddResidual) {
      value = _mm256_add_ps(_mm256_loadu_ps(residual + i), value);
      _mm256_storeu_ps(residual + i, value);
    }
    const __m256 magnitudes = _mm256_and_ps(value, magnitude_bits);
    const auto mask = static_cast<uint32_t>(_mm256_movemask_ps(_mm256_cmp_ps(magnitudes, at_least, _CMP_GE_OQ)));
    if (found + 8 <= capacity) {  // room for all eight: store them, keep the candidates
      const __m256i indices = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(i)), PackingPermutation(mask));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + found), indices);
    } else {
      StoreEachWhileRoom(mask, i, out, found, capacity);
    }
    found += std::popcount(mask);
  }
  return FinishCandidates<kAddResidual>(values, residual, n, i, threshold, out, capacity, found);
}

// Sixteen at once: the compare gives a mask register, and a register compress
// packs the passing lanes of a vector of indices to its front (about a
// quarter less time than AVX2's table and shuffle, measured on Zen 4).
template <bool kAddResidual>
[[maybe_unused]] __attribute__((target("avx512f,popcnt")))
size_t CandidatesAvx512(const float* values, float* residual, size_t n, float threshold, uint32_t* out,
                        size_t capacity) {
  const __m512 at_least = _mm512_set1_ps(threshold);
  const __m512i sixteen = _mm512_set1_epi32(16);
  __m512i indices = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  size_t found = 0;
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512 value = _mm512_loadu_ps(values + i);
    if constexpr (kAddResidual) {
      value = _mm512_add_ps(_mm512_loadu_ps(residual + i), value);
      _mm512_storeu_ps(residual + i, value);
    }
    const __mmask16 mask = _mm512_cmp_ps_mask(_mm512_abs_ps(value), at_least, _CMP_GE_OQ);
    const auto passing = static_cast<uint32_t>(std::popcount(static_cast<uint32_t>(mask)));
    if (found + 16 <= capacity) {  // room for all sixteen: store them, keep the candidates
      const __m512i packed = _mm512_maskz_compress_epi32(mask, indices);
      // Where at most 8 pass (nearly always: top-k's threshold lets a few
      // percent through), half the vector is stored, in less time.
      if (passing <= 8) [[likely]]
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + found), _mm512_castsi512_si256(packed));
      else
        _mm512_storeu_si512(out + found, packed);
    } else {
      StoreEachWhileRoom(mask, i, out, found, capacity);
    }
    found += passing;
    indices = _mm512_add_epi32(indices, sixteen);
  }
  return FinishCandidates<kAddResidual>(values, residual, n, i, threshold, out, capacity, found);
}

// A gather per 8 indices (about a fifth less time than one load each, on
// Zen 4, for candidates spread over an L2-resident chunk).
[[maybe_unused]] __attribute__((target("avx2")))
void MagnitudeBitsAtAvx2(const float* values, const uint32_t* indices, size_t count, uint32_t* keys) {
  const __m256i magnitude_bits = _mm256_set1_epi32(0x7fffffff);
  size_t j = 0;
  for (; j + 8 <= count; j += 8) {
    const __m256i at = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(indices + j));
    const __m256i bits = _mm256_i32gather_epi32(reinterpret_cast<const int*>(values), at, 4);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(keys + j), _mm256_and_si256(bits, magnitude_bits));
  }
  MagnitudeBitsAtPortable(values, indices + j, count - j, keys + j);
}

// first <= key <= last as two unsigned compares (a maximum and a minimum
// that leave the key as it is), per 8 keys; the items in range packed as in
// CandidatesAvx2. A store at kept <= i writes no item not yet read.
[[maybe_unused]] __attribute__((target("avx2,popcnt")))
size_t KeepWhereKeyInAvx2(const uint32_t* keys, const uint32_t* items, size_t size, uint32_t first, uint32_t last,
                          uint32_t* out) {
  const __m256i from = _mm256_set1_epi32(static_cast<int>(first)), to = _mm256_set1_epi32(static_cast<int>(last));
  size_t kept = 0;
  size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    const __m256i key = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(keys + i));
    const __m256i item = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(items + i));
    const __m256i in = _mm256_and_si256(_mm256_cmpeq_epi32(_mm256_max_epu32(key, from), key),
                                        _mm256_cmpeq_epi32(_mm256_min_epu32(key, to), key));
    const auto mask = static_cast<uint32_t>(_mm256_movemask_ps(_mm256_castsi256_ps(in)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + kept),
                        _mm256_permutevar8x32_epi32(item, PackingPermutation(mask)));
    kept += std::popcount(mask);
  }
  return kept + KeepWhereKeyInPortable(keys + i, items + i, size - i, first, last, out + kept);
}

[[maybe_unused]] __attribute__((target("avx512f,popcnt")))
size_t KeepWhereKeyInAvx512(const uint32_t* keys, const uint32_t* items, size_t size, uint32_t first, uint32_t last,
                            uint32_t* out) {
  const __m512i from = _mm512_set1_epi32(static_cast<int>(first)), to = _mm512_set1_epi32(static_cast<int>(last));
  size_t kept = 0;
  size_t i = 0;
  for (; i + 16 <= size; i += 16) {
    const __m512i key = _mm512_loadu_si512(keys + i);
    const __mmask16 in = _mm512_cmpge_epu32_mask(key, from) & _mm512_cmple_epu32_mask(key, to);
    _mm512_storeu_si512(out + kept, _mm512_maskz_compress_epi32(in, _mm512_loadu_si512(items + i)));
    kept += std::popcount(static_cast<uint32_t>(in));
  }
  return kept + KeepWhereKeyInPortable(keys + i, items + i, size - i, first, last, out + kept);
}

// Eight lanes' minimum and maximum, folded to one at the end (in registers:
// an array there made the compiler keep a running maximum in memory).
[[maybe_unused]] __attribute__((target("avx2")))
KeyRange RangeOfKeysAvx2(const uint32_t* keys, size_t size) {
  if (size < 8) return RangeOfKeysPortable(keys, size);
  __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(keys)), hi = lo;
  size_t i = 8;
  for (; i + 8 <= size; i += 8) {
    const __m256i key = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(keys + i));
    lo = _mm256_min_epu32(lo, key);
    hi = _mm256_max_epu32(hi, key);
  }
  lo = _mm256_min_epu32(lo, _mm256_permute2x128_si256(lo, lo, 1));
  hi = _mm256_max_epu32(hi, _mm256_permute2x128_si256(hi, hi, 1));
  lo = _mm256_min_epu32(lo, _mm256_shuffle_epi32(lo, 0x4e));
  hi = _mm256_max_epu32(hi, _mm256_shuffle_epi32(hi, 0x4e));
  lo = _mm256_min_epu32(lo, _mm256_shuffle_epi32(lo, 0xb1));
  hi = _mm256_max_epu32(hi, _mm256_shuffle_epi32(hi, 0xb1));
  KeyRange range{static_cast<uint32_t>(_mm256_cvtsi256_si32(lo)), static_cast<uint32_t>(_mm256_cvtsi256_si32(hi))};
  for (; i < size; ++i) {
    range.lo = std::min(range.lo, keys[i]);
    range.hi = std::max(range.hi, keys[i]);
  }
  return range;
}

#endif

}  // namespace

namespace {
template <bool kAddResidual>
size_t Candidates(const float* values, float* residual, size_t n, float threshold, uint32_t* out, size_t capacity,
                  CandidateLoop loop) {
#ifdef SYNCLINE_X86_SIMD
  const bool avx512 = loop == CandidateLoop::kBest || loop == CandidateLoop::kAvx512;
  if (avx512 && HasAvx512()) return CandidatesAvx512<kAddResidual>(values, residual, n, threshold, out, capacity);
  if (loop != CandidateLoop::kPortable && HasAvx2())
    return CandidatesAvx2<kAddResidual>(values, residual, n, threshold, out, capacity);
#else
  (void)loop;
#endif
  return CandidatesPortable<kAddResidual>(values, residual, n, threshold, out, capacity);
}
}  // namespace

size_t IndicesAtLeast(const float* values, size_t n, float threshold, uint32_t* out, size_t capacity,
                      CandidateLoop loop) {
  return Candidates<false>(values, nullptr, n, threshold, out, capacity, loop);
}

size_t AddAndIndicesAtLeast(const float* values, float* residual, size_t n, float threshold, uint32_t* out,
                            size_t capacity, CandidateLoop loop) {
  return Candidates<true>(values, residual, n, threshold, out, capacity, loop);
}

void MagnitudeBitsAt(const float* values, size_t n, const uint32_t* indices, size_t count, uint32_t* keys,
                     CandidateLoop loop) {
#ifdef SYNCLINE_X86_SIMD
  const bool signed_indices_reach = n <= (size_t{1} << 31);
  if (loop != CandidateLoop::kPortable && HasAvx2() && signed_indices_reach)
    return MagnitudeBitsAtAvx2(values, indices, count, keys);
#else
  (void)loop;
  (void)n;
#endif
  MagnitudeBitsAtPortable(values, indices, count, keys);
}

size_t KeepWhereKeyIn(const uint32_t* keys, const uint32_t* items, size_t size, uint32_t first, uint32_t last,
                      uint32_t* out, CandidateLoop loop) {
#ifdef SYNCLINE_X86_SIMD
  const bool avx512 = loop == CandidateLoop::kBest || loop == CandidateLoop::kAvx512;
  if (avx512 && HasAvx512()) return KeepWhereKeyInAvx512(keys, items, size, first, last, out);
  if (loop != CandidateLoop::kPortable && HasAvx2()) return KeepWhereKeyInAvx2(keys, items, size, first, last, out);
#else
  (void)loop;
#endif
  return KeepWhereKeyInPortable(keys, items, size, first, last, out);
}

KeyRange RangeOfKeys(const uint32_t* keys, size_t size, CandidateLoop loop) {
#ifdef SYNCLINE_X86_SIMD
  if (loop != CandidateLoop::kPortable && HasAvx2()) return RangeOfKeysAvx2(keys, size);
#else
  (void)loop;
#endif
  return RangeOfKeysPortable(keys, size);
}

void AddSparse(const uint32_t* indices, const float* values, size_t k, float factor, float* out) {
  for (size_t j = 0; j < k; ++j) out[indices[j]] += factor * values[j];
}

}  // namespace syncline::compression::kernels
