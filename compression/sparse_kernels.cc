// top-k's candidate pass and the sparse forms' decode (kernels.h).
#include "compression/kernels.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>

#include "compression/x86_simd.h"

namespace syncline::compression::kernels {
namespace {

size_t IndicesAtLeastPortable(const float* values, size_t n, float threshold, uint32_t* out, size_t capacity) {
  size_t found = 0;
  for (size_t i = 0; i < n; ++i) {
    if (std::fabs(values[i]) >= threshold) {  // NaN compares false
      if (found < capacity) out[found] = static_cast<uint32_t>(i);
      ++found;
    }
  }
  return found;
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

// Eight magnitudes compared at once into a bit mask; the indices of its set
// bits are packed to the front of a vector (a table lookup and a shuffle) and
// stored at out + found, and found moves on by their count: no branch per
// candidate, which would mispredict at a few percent of the values passing.
[[maybe_unused]] __attribute__((target("avx2,popcnt")))
size_t IndicesAtLeastAvx2(const float* values, size_t n, float threshold, uint32_t* out, size_t capacity) {
  const __m256 magnitude_bits = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 at_least = _mm256_set1_ps(threshold);
  size_t found = 0;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 magnitudes = _mm256_and_ps(_mm256_loadu_ps(values + i), magnitude_bits);
    const auto mask = static_cast<uint32_t>(_mm256_movemask_ps(_mm256_cmp_ps(magnitudes, at_least, _CMP_GE_OQ)));
    if (found + 8 <= capacity) {  // room for all eight: store them, keep the candidates
      uint64_t positions;
      std::memcpy(&positions, kSetBitPositions[mask].data(), 8);
      const __m256i offsets = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<int64_t>(positions)));
      const __m256i indices = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(i)), offsets);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + found), indices);
    } else {
      size_t at = found;
      for (uint32_t rest = mask; rest != 0; rest &= rest - 1, ++at)
        if (at < capacity) out[at] = static_cast<uint32_t>(i + std::countr_zero(rest));
    }
    found += std::popcount(mask);
  }
  const size_t stored = std::min(found, capacity);
  const size_t rest = IndicesAtLeastPortable(values + i, n - i, threshold, out + stored, capacity - stored);
  for (size_t j = stored; j < std::min(found + rest, capacity); ++j) out[j] += static_cast<uint32_t>(i);
  return found + rest;
}

// Sixteen at once: the compare gives a mask register, and a register compress
// packs the passing lanes of a vector of indices to its front (about a
// quarter less time than AVX2's table and shuffle, measured on Zen 4).
[[maybe_unused]] __attribute__((target("avx512f,popcnt")))
size_t IndicesAtLeastAvx512(const float* values, size_t n, float threshold, uint32_t* out, size_t capacity) {
  const __m512 at_least = _mm512_set1_ps(threshold);
  const __m512i sixteen = _mm512_set1_epi32(16);
  __m512i indices = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  size_t found = 0;
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __mmask16 mask = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_loadu_ps(values + i)), at_least, _CMP_GE_OQ);
    if (found + 16 <= capacity) {  // room for all sixteen: store them, keep the candidates
      _mm512_storeu_si512(out + found, _mm512_maskz_compress_epi32(mask, indices));
    } else {
      size_t at = found;
      for (uint32_t rest = mask; rest != 0; rest &= rest - 1, ++at)
        if (at < capacity) out[at] = static_cast<uint32_t>(i + std::countr_zero(rest));
    }
    found += std::popcount(static_cast<uint32_t>(mask));
    indices = _mm512_add_epi32(indices, sixteen);
  }
  const size_t stored = std::min(found, capacity);
  const size_t rest = IndicesAtLeastPortable(values + i, n - i, threshold, out + stored, capacity - stored);
  for (size_t j = stored; j < std::min(found + rest, capacity); ++j) out[j] += static_cast<uint32_t>(i);
  return found + rest;
}

#endif

}  // namespace

size_t IndicesAtLeast(const float* values, size_t n, float threshold, uint32_t* out, size_t capacity,
                      CandidateLoop loop) {
#ifdef SYNCLINE_X86_SIMD
  const bool avx512 = loop == CandidateLoop::kBest || loop == CandidateLoop::kAvx512;
  if (avx512 && HasAvx512()) return IndicesAtLeastAvx512(values, n, threshold, out, capacity);
  if (loop != CandidateLoop::kPortable && HasAvx2()) return IndicesAtLeastAvx2(values, n, threshold, out, capacity);
#else
  (void)loop;
#endif
  return IndicesAtLeastPortable(values, n, threshold, out, capacity);
}

void AddSparse(const uint32_t* indices, const float* values, size_t k, float factor, float* out) {
  for (size_t j = 0; j < k; ++j) out[indices[j]] += factor * values[j];
}

}  // namespace syncline::compression::kernels
