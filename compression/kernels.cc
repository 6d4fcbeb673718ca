#include "compression/kernels.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "compression/x86_simd.h"
#include "summation/cpu_clones.h"
#include "summation/half.h"

// Reductions (int8's block maximum; onebit's mean in onebit_kernels.cc) run in kLanes partial
// results combined in a fixed order: the compiler may vectorize them without
// reassociating anything (-ffp-contract=off, no fast-math), so every CPU
// clone gives the same bits.
namespace syncline::compression::kernels {
namespace {

constexpr size_t kLanes = 16;
// int8: a block whose largest magnitude is below this (about 1.5e-36) is sent as zeros.
constexpr float kTinyBlock = 0x1p-119f;

SYNCLINE_CPU_CLONES
void ToFp16Portable(const float* __restrict values, size_t n, uint16_t* __restrict out) {
  for (size_t i = 0; i < n; ++i) out[i] = FloatToHalf(values[i]);
}

SYNCLINE_CPU_CLONES
void AddFp16Portable(const uint16_t* __restrict in, size_t n, float factor, float* __restrict out) {
  for (size_t i = 0; i < n; ++i) out[i] += factor * HalfToFloat(in[i]);
}

SYNCLINE_CPU_CLONES
void ToFp16FeedbackPortable(const float* __restrict values, float* __restrict residual, size_t n,
                            uint16_t* __restrict out) {
  for (size_t i = 0; i < n; ++i) {
    const float c = values[i] + residual[i];
    const uint16_t h = FloatToHalf(c);
    out[i] = h;
    residual[i] = c - HalfToFloat(h);
  }
}

#ifdef SYNCLINE_X86_SIMD
[[maybe_unused]] __attribute__((target("avx2,f16c")))
void ToFp16FeedbackF16c(const float* __restrict values, float* __restrict residual, size_t n,
                        uint16_t* __restrict out) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 c = _mm256_add_ps(_mm256_loadu_ps(values + i), _mm256_loadu_ps(residual + i));
    const __m128i h = _mm256_cvtps_ph(c, _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
    _mm256_storeu_ps(residual + i, _mm256_sub_ps(c, _mm256_cvtph_ps(h)));
  }
  ToFp16FeedbackPortable(values + i, residual + i, n - i, out + i);
}

[[maybe_unused]] __attribute__((target("avx2,f16c")))
void ToFp16F16c(const float* __restrict values, size_t n, uint16_t* __restrict out) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(values + i), _MM_FROUND_TO_NEAREST_INT));
  ToFp16Portable(values + i, n - i, out + i);
}

[[maybe_unused]] __attribute__((target("avx2,f16c")))
void AddFp16F16c(const uint16_t* __restrict in, size_t n, float factor, float* __restrict out) {
  const __m256 f = _mm256_set1_ps(factor);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 decoded = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i)));
    _mm256_storeu_ps(out + i, _mm256_add_ps(_mm256_loadu_ps(out + i), _mm256_mul_ps(f, decoded)));
  }
  AddFp16Portable(in + i, n - i, factor, out + i);
}

#endif

}  // namespace

void ToFp16(const float* values, size_t n, uint16_t* out) {
#ifdef SYNCLINE_X86_SIMD
  if (HasAvx2()) return ToFp16F16c(values, n, out);
#endif
  ToFp16Portable(values, n, out);
}

void ToFp16Feedback(const float* values, float* residual, size_t n, uint16_t* out) {
#ifdef SYNCLINE_X86_SIMD
  if (HasAvx2()) return ToFp16FeedbackF16c(values, residual, n, out);
#endif
  ToFp16FeedbackPortable(values, residual, n, out);
}

void AddFp16(const uint16_t* in, size_t n, float factor, float* out) {
#ifdef SYNCLINE_X86_SIMD
  if (HasAvx2()) return AddFp16F16c(in, n, factor, out);
#endif
  AddFp16Portable(in, n, factor, out);
}

SYNCLINE_CPU_CLONES
void ToBf16(const float* __restrict values, size_t n, uint16_t* __restrict out) {
  for (size_t i = 0; i < n; ++i) out[i] = FloatToBf16(values[i]);
}

SYNCLINE_CPU_CLONES
void ToBf16Feedback(const float* __restrict values, float* __restrict residual, size_t n, uint16_t* __restrict out) {
  for (size_t i = 0; i < n; ++i) {
    const float c = values[i] + residual[i];
    const uint16_t b = FloatToBf16(c);
    out[i] = b;
    residual[i] = c - Bf16ToFloat(b);
  }
}

SYNCLINE_CPU_CLONES
void AddBf16(const uint16_t* __restrict in, size_t n, float factor, float* __restrict out) {
  for (size_t i = 0; i < n; ++i) out[i] += factor * Bf16ToFloat(in[i]);
}

namespace {

// The largest |x| of values[0, n), and whether every value is finite. On the
// bits: |x| of a float orders as its bits do as an unsigned integer, and
// inf and NaN are the patterns from 0x7f800000 up, so one integer maximum
// (which vectorizes, unlike a float maximum that must respect NaN) gives both.
SYNCLINE_CPU_CLONES
float MaxAbs(const float* __restrict values, size_t n, bool* finite) {
  uint32_t lanes[kLanes] = {};
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (size_t j = 0; j < kLanes; ++j) {
      const uint32_t a = std::bit_cast<uint32_t>(values[i + j]) & 0x7fffffffu;
      lanes[j] = a > lanes[j] ? a : lanes[j];
    }
  uint32_t m = 0;
  for (size_t j = 0; j < kLanes; ++j) m = lanes[j] > m ? lanes[j] : m;
  for (; i < n; ++i) {
    const uint32_t a = std::bit_cast<uint32_t>(values[i]) & 0x7fffffffu;
    m = a > m ? a : m;
  }
  *finite = m < 0x7f800000u;
  return std::bit_cast<float>(m);
}

SYNCLINE_CPU_CLONES
void Quantize(const float* __restrict values, size_t n, float inverse, int8_t* __restrict q) {
  for (size_t i = 0; i < n; ++i) {
    const float v = values[i] * inverse;
    q[i] = static_cast<int8_t>(static_cast<int32_t>(v + std::copysign(0.5f, v)));
  }
}

SYNCLINE_CPU_CLONES
void AddDequantized(const int8_t* __restrict q, size_t n, float scale, float factor, float* __restrict out) {
  for (size_t i = 0; i < n; ++i) out[i] += factor * (static_cast<float>(q[i]) * scale);
}

}  // namespace

namespace {

// One int8 block of len values: its scale, and its bytes.
float QuantizeBlock(const float* values, size_t len, int8_t* q) {
  bool finite = true;
  const float max = MaxAbs(values, len, &finite);
  // A non-finite block is not quantized (inf or NaN times anything would
  // reach the float-to-int conversion, which is undefined outside its
  // range): its NaN scale decodes every value as NaN. Below kTinyBlock the
  // block is sent as zeros: 127 / max would overflow.
  if (!finite || max < kTinyBlock) {
    std::memset(q, 0, len);
    return finite ? 0.0f : NAN;
  }
  // |values| <= max, so |value * 127 / max| <= 127 (and a rounding): in range.
  Quantize(values, len, 127.0f / max, q);
  return max / 127.0f;
}

}  // namespace

void ToInt8(const float* values, size_t n, size_t block, float* scales, int8_t* q) {
  for (size_t start = 0, b = 0; start < n; start += block, ++b)
    scales[b] = QuantizeBlock(values + start, n - start < block ? n - start : block, q + start);
}

namespace {

// int8 with error feedback, one block: c = residual + values goes into
// residual while its largest magnitude is found (one pass), then c is
// quantized and what the receiver will decode is taken out of residual (a
// second pass). The same operations as adding values into residual, QuantizeBlock
// and AddDequantized(-1), so the same bits, in two passes instead of four calls;
// inlined into each clone of ToInt8Feedback.
[[gnu::always_inline]] inline float QuantizeBlockFeedback(const float* __restrict values, float* __restrict residual,
                                                          size_t len, int8_t* __restrict q) {
  uint32_t lanes[kLanes] = {};
  size_t i = 0;
  for (; i + kLanes <= len; i += kLanes)
    for (size_t j = 0; j < kLanes; ++j) {
      const float c = residual[i + j] + values[i + j];
      residual[i + j] = c;
      const uint32_t a = std::bit_cast<uint32_t>(c) & 0x7fffffffu;
      lanes[j] = a > lanes[j] ? a : lanes[j];
    }
  uint32_t most = 0;
  for (size_t j = 0; j < kLanes; ++j) most = lanes[j] > most ? lanes[j] : most;
  for (; i < len; ++i) {
    const float c = residual[i] + values[i];
    residual[i] = c;
    const uint32_t a = std::bit_cast<uint32_t>(c) & 0x7fffffffu;
    most = a > most ? a : most;
  }
  const float max = std::bit_cast<float>(most);
  if (most >= 0x7f800000u || max < kTinyBlock) {  // as QuantizeBlock: NaN scale, or zeros
    const float scale = most >= 0x7f800000u ? NAN : 0.0f;
    std::memset(q, 0, len);
    for (size_t k = 0; k < len; ++k) residual[k] += -1.0f * (0.0f * scale);
    return scale;
  }
  const float inverse = 127.0f / max, scale = max / 127.0f;
  for (size_t k = 0; k < len; ++k) {
    const float v = residual[k] * inverse;
    const auto quantized = static_cast<int8_t>(static_cast<int32_t>(v + std::copysign(0.5f, v)));
    q[k] = quantized;
    residual[k] += -1.0f * (static_cast<float>(quantized) * scale);
  }
  return scale;
}

}  // namespace

SYNCLINE_CPU_CLONES
void ToInt8Feedback(const float* values, float* residual, size_t n, size_t block, float* scales, int8_t* q) {
  for (size_t start = 0, b = 0; start < n; start += block, ++b)
    scales[b] = QuantizeBlockFeedback(values + start, residual + start, n - start < block ? n - start : block,
                                      q + start);
}

void AddInt8(const float* scales, const int8_t* q, size_t n, size_t block, float factor, float* out) {
  for (size_t start = 0, b = 0; start < n; start += block, ++b)
    AddDequantized(q + start, n - start < block ? n - start : block, scales[b], factor, out + start);
}

}  // namespace syncline::compression::kernels
