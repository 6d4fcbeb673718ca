// onebit's kernels (kernels.h): the sign bits of a chunk and the mean of its
// magnitudes, their decode added into a sum, and both fused with error
// feedback. The bit packing and unpacking have AVX2 paths (a movemask per 8
// values to pack, a compare against the 8 bit positions to unpack); each
// gives the bits of the portable loop beside it.
#include <bit>
#include <cmath>

#include "compression/kernels.h"
#include "compression/x86_simd.h"
#include "summation/cpu_clones.h"

namespace syncline::compression::kernels {
namespace {

// The mean's partial sums: kLanes float lanes combined in a fixed order, so
// that every CPU clone gives the same bits (-ffp-contract=off, no fast-math).
constexpr size_t kLanes = 16;

SYNCLINE_CPU_CLONES
double SumAbs(const float* __restrict values, size_t n) {
  float lanes[kLanes] = {};
  size_t i = 0;
  // Float lanes lose a little over long chunks (about n / 16 ulps at worst);
  // a scale needs no more. They are combined in double.
  for (; i + kLanes <= n; i += kLanes)
    for (size_t j = 0; j < kLanes; ++j) lanes[j] += std::fabs(values[i + j]);
  double sum = 0;
  for (size_t j = 0; j < kLanes; ++j) sum += lanes[j];
  for (; i < n; ++i) sum += std::fabs(values[i]);
  return sum;
}

// onebit with error feedback, first pass: residual += values, and the sum of
// the new residual's magnitudes (the lanes and order of SumAbs: the same bits).
SYNCLINE_CPU_CLONES
double AddAndSumAbs(const float* __restrict values, float* __restrict residual, size_t n) {
  float lanes[kLanes] = {};
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (size_t j = 0; j < kLanes; ++j) {
      const float c = residual[i + j] + values[i + j];
      residual[i + j] = c;
      lanes[j] += std::fabs(c);
    }
  double sum = 0;
  for (size_t j = 0; j < kLanes; ++j) sum += lanes[j];
  for (; i < n; ++i) {
    const float c = residual[i] + values[i];
    residual[i] = c;
    sum += std::fabs(c);
  }
  return sum;
}

// The decoded value of one bit: +-scale's magnitude.
inline float Decoded(uint32_t magnitude, uint32_t sign) { return std::bit_cast<float>(magnitude | sign << 31); }
inline uint32_t SignOf(float x) { return std::bit_cast<uint32_t>(x) >> 31; }

// From value `first` on (a multiple of 8), as the AVX2 loops leave it.
SYNCLINE_CPU_CLONES
void SignBitsPortable(const float* __restrict values, size_t first, size_t n, uint8_t* __restrict bits) {
  for (size_t b = first / 8; 8 * b < n; ++b) {
    uint32_t byte = 0;
    for (size_t j = 0; j < 8 && 8 * b + j < n; ++j) byte |= SignOf(values[8 * b + j]) << j;
    bits[b] = static_cast<uint8_t>(byte);
  }
}

// Second pass: the sign bits of residual, and residual minus what they decode
// to (as SignBits, then AddOnebit with factor -1: the same bits).
SYNCLINE_CPU_CLONES
void SignBitsAndSubtractPortable(float scale, float* __restrict residual, size_t first, size_t n,
                                 uint8_t* __restrict bits) {
  const uint32_t magnitude = std::bit_cast<uint32_t>(scale) & 0x7fffffffu;
  const float minus_one = -1.0f;  // a multiplication, as AddOnebit's factor
  for (size_t b = first / 8; 8 * b < n; ++b) {
    uint32_t byte = 0;
    for (size_t j = 0; j < 8 && 8 * b + j < n; ++j) {
      const size_t i = 8 * b + j;
      const uint32_t sign = SignOf(residual[i]);
      residual[i] += minus_one * Decoded(magnitude, sign);
      byte |= sign << j;
    }
    bits[b] = static_cast<uint8_t>(byte);
  }
}

SYNCLINE_CPU_CLONES
void AddOnebitPortable(float scale, const uint8_t* __restrict bits, size_t first, size_t n, float factor,
                       float* __restrict out) {
  const uint32_t magnitude = std::bit_cast<uint32_t>(scale) & 0x7fffffffu;
  for (size_t i = first; i < n; ++i) out[i] += factor * Decoded(magnitude, (bits[i / 8] >> (i % 8)) & 1u);
}

#ifdef SYNCLINE_X86_SIMD
// Lane j of a byte's 8 values holds bit j.
[[maybe_unused]] __attribute__((target("avx2"))) inline __m256 DecodedByte(__m256i magnitude, uint8_t byte) {
  const __m256i positions = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
  const __m256i set = _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32(byte), positions), positions);
  return _mm256_castsi256_ps(_mm256_or_si256(magnitude, _mm256_slli_epi32(set, 31)));
}

[[maybe_unused]] __attribute__((target("avx2")))
void SignBitsAvx2(const float* __restrict values, size_t n, uint8_t* __restrict bits) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) bits[i / 8] = static_cast<uint8_t>(_mm256_movemask_ps(_mm256_loadu_ps(values + i)));
  SignBitsPortable(values, i, n, bits);
}

[[maybe_unused]] __attribute__((target("avx2")))
void SignBitsAndSubtractAvx2(float scale, float* __restrict residual, size_t n, uint8_t* __restrict bits) {
  const uint32_t magnitude = std::bit_cast<uint32_t>(scale) & 0x7fffffffu;
  const __m256i m = _mm256_set1_epi32(static_cast<int>(magnitude));
  const __m256 minus_one = _mm256_set1_ps(-1.0f);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 r = _mm256_loadu_ps(residual + i);
    const uint8_t byte = static_cast<uint8_t>(_mm256_movemask_ps(r));
    bits[i / 8] = byte;
    _mm256_storeu_ps(residual + i, _mm256_add_ps(r, _mm256_mul_ps(minus_one, DecodedByte(m, byte))));
  }
  SignBitsAndSubtractPortable(scale, residual, i, n, bits);
}

[[maybe_unused]] __attribute__((target("avx2")))
void AddOnebitAvx2(float scale, const uint8_t* __restrict bits, size_t n, float factor, float* __restrict out) {
  const uint32_t magnitude = std::bit_cast<uint32_t>(scale) & 0x7fffffffu;
  const __m256i m = _mm256_set1_epi32(static_cast<int>(magnitude));
  const __m256 f = _mm256_set1_ps(factor);
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, _mm256_add_ps(_mm256_loadu_ps(out + i), _mm256_mul_ps(f, DecodedByte(m, bits[i / 8]))));
  AddOnebitPortable(scale, bits, i, n, factor, out);
}
#endif

void SignBits(const float* values, size_t n, uint8_t* bits) {
#ifdef SYNCLINE_X86_SIMD
  if (HasAvx2()) return SignBitsAvx2(values, n, bits);
#endif
  SignBitsPortable(values, 0, n, bits);
}

void SignBitsAndSubtract(float scale, float* residual, size_t n, uint8_t* bits) {
#ifdef SYNCLINE_X86_SIMD
  if (HasAvx2()) return SignBitsAndSubtractAvx2(scale, residual, n, bits);
#endif
  SignBitsAndSubtractPortable(scale, residual, 0, n, bits);
}

// A scale from the sum of magnitudes: NaN where a value was not finite.
float MeanScale(double sum_abs, size_t n) {
  const double mean = sum_abs / static_cast<double>(n);
  return std::isfinite(mean) ? static_cast<float>(mean) : NAN;
}

}  // namespace

float ToOnebitFeedback(const float* values, float* residual, size_t n, uint8_t* bits) {
  if (n == 0) return 0;
  const float scale = MeanScale(AddAndSumAbs(values, residual, n), n);
  SignBitsAndSubtract(scale, residual, n, bits);
  return scale;
}

float ToOnebit(const float* values, size_t n, uint8_t* bits) {
  SignBits(values, n, bits);
  if (n == 0) return 0;
  return MeanScale(SumAbs(values, n), n);
}

void AddOnebit(float scale, const uint8_t* bits, size_t n, float factor, float* out) {
#ifdef SYNCLINE_X86_SIMD
  if (HasAvx2()) return AddOnebitAvx2(scale, bits, n, factor, out);
#endif
  AddOnebitPortable(scale, bits, 0, n, factor, out);
}

}  // namespace syncline::compression::kernels
