#include "summation/kernels.h"

#include <cstdint>

#include "summation/cpu_clones.h"
#include "summation/half.h"

// Runtime CPU dispatch, two ways:
// - Plain loops (fp32, fp64, bf16) carry SYNCLINE_CPU_CLONES: GCC/clang
//   compile each three times and an ifunc resolver picks one when the program
//   loads. x86-64-v4 is AVX-512 F/BW/DQ/VL (BW matters for 16-bit lanes), v3
//   is AVX2 + FMA + F16C. The compiler vectorizes them (-O3 on this library).
// - fp16 also has loops written with the F16C conversion instructions (8 or
//   16 halves per instruction), chosen once by CPUID: the compiler does not
//   vectorize _Float16 conversions (GCC 12), and the portable bit-level
//   conversion is compute-bound at about a third of memory bandwidth.
//   F16C rounds exactly like half.h (nearest even, FTZ/DAZ do not apply to
//   values that came from halves), so every path gives the same bits.
// - bf16 sums also have an AVX-512 BF16 loop (vcvtne2ps2bf16 rounds 32 sums
//   to nearest even in one instruction). That instruction flushes subnormal
//   results to zero, unlike FloatToBf16, so a block of 32 with any subnormal
//   sum is redone by the plain loop: every path still gives the same bits
//   for non-NaN results (as kernels.h promises; NaN payloads may differ).
// SYNCLINE_NO_RUNTIME_DISPATCH turns both off and selects by the compile
// flags instead (-march=...); the tests use it to check each path on its own.
// The library is built with -ffp-contract=off so no clone fuses operations.
#if defined(__x86_64__) && defined(__linux__) && defined(__GNUC__)
#define SYNCLINE_X86_SIMD 1
#include <immintrin.h>
#endif

namespace syncline::kernels {
namespace {

SYNCLINE_CPU_CLONES
void SumF32(float* __restrict dst, const float* __restrict src, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] += src[i];
}

SYNCLINE_CPU_CLONES
void SumF64(double* __restrict dst, const double* __restrict src, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] += src[i];
}

// Portable fp16; also the tail of the F16C loops.
SYNCLINE_CPU_CLONES
void SumF16Portable(uint16_t* __restrict dst, const uint16_t* __restrict src, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = FloatToHalf(HalfToFloat(dst[i]) + HalfToFloat(src[i]));
}

SYNCLINE_CPU_CLONES
void SumBf16(uint16_t* __restrict dst, const uint16_t* __restrict src, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = FloatToBf16(Bf16ToFloat(dst[i]) + Bf16ToFloat(src[i]));
}

SYNCLINE_CPU_CLONES
void ScaleF32(float* __restrict data, size_t n, float factor) {
  for (size_t i = 0; i < n; ++i) data[i] *= factor;
}

SYNCLINE_CPU_CLONES
void ScaleF64(double* __restrict data, size_t n, double factor) {
  for (size_t i = 0; i < n; ++i) data[i] *= factor;
}

SYNCLINE_CPU_CLONES
void ScaleF16Portable(uint16_t* __restrict data, size_t n, float factor) {
  for (size_t i = 0; i < n; ++i) data[i] = FloatToHalf(HalfToFloat(data[i]) * factor);
}

SYNCLINE_CPU_CLONES
void ScaleBf16(uint16_t* __restrict data, size_t n, float factor) {
  for (size_t i = 0; i < n; ++i) data[i] = FloatToBf16(Bf16ToFloat(data[i]) * factor);
}

#ifdef SYNCLINE_X86_SIMD
// Rounding immediate for vcvtps2ph: nearest even, regardless of MXCSR.
constexpr int kRne = _MM_FROUND_TO_NEAREST_INT;
constexpr __mmask16 kAll = 0xffff;

[[maybe_unused]] __attribute__((target("avx2,f16c")))
void SumF16Avx2(uint16_t* __restrict dst, const uint16_t* __restrict src, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 a = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(dst + i)));
    const __m256 b = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm256_cvtps_ph(_mm256_add_ps(a, b), kRne));
  }
  SumF16Portable(dst + i, src + i, n - i);
}

[[maybe_unused]] __attribute__((target("avx2,f16c")))
void ScaleF16Avx2(uint16_t* __restrict data, size_t n, float factor) {
  const __m256 f = _mm256_set1_ps(factor);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 a = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(data + i)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(data + i), _mm256_cvtps_ph(_mm256_mul_ps(a, f), kRne));
  }
  ScaleF16Portable(data + i, n - i, factor);
}

// (The maskz forms with an all-ones mask compile to the plain instructions;
// the unmasked intrinsics trip a false -Wmaybe-uninitialized in GCC 12.)
[[maybe_unused]] __attribute__((target("avx512f")))
void SumF16Avx512(uint16_t* __restrict dst, const uint16_t* __restrict src, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 a = _mm512_maskz_cvtph_ps(kAll, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(dst + i)));
    const __m512 b = _mm512_maskz_cvtph_ps(kAll, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i),
                        _mm512_maskz_cvtps_ph(kAll, _mm512_add_ps(a, b), kRne));
  }
  SumF16Avx2(dst + i, src + i, n - i);  // AVX-512F machines all have AVX2 and F16C
}

[[maybe_unused]] __attribute__((target("avx512f")))
void ScaleF16Avx512(uint16_t* __restrict data, size_t n, float factor) {
  const __m512 f = _mm512_set1_ps(factor);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 a = _mm512_maskz_cvtph_ps(kAll, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(data + i)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(data + i),
                        _mm512_maskz_cvtps_ph(kAll, _mm512_mul_ps(a, f), kRne));
  }
  ScaleF16Avx2(data + i, n - i, factor);
}

// 32 bf16 per step. Each 32-bit lane of a load holds two neighbours: the low
// one widens by a shift, the high one by masking off the low. The two vectors
// of sums are rounded together, then interleaved back into element order.
[[maybe_unused]] __attribute__((target("avx512f,avx512bw,avx512dq,avx512bf16")))
void SumBf16Avx512Bf16(uint16_t* __restrict dst, const uint16_t* __restrict src, size_t n) {
  const __m512i high_half = _mm512_set1_epi32(static_cast<int>(0xffff0000u));
  // Word k of the rounded vector is element 2k (k < 16) or element 2(k-16)+1.
  alignas(64) static constexpr uint16_t kInterleave[32] = {0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,
                                                             21, 6, 22, 7, 23, 8, 24, 9, 25, 10, 26,
                                                             11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  const __m512i interleave = _mm512_load_si512(kInterleave);
  constexpr int kDenormal = 0x20;  // vfpclassps category
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512i a = _mm512_loadu_si512(dst + i);
    const __m512i b = _mm512_loadu_si512(src + i);
    const __m512 even = _mm512_add_ps(_mm512_castsi512_ps(_mm512_maskz_slli_epi32(kAll, a, 16)),
                                      _mm512_castsi512_ps(_mm512_maskz_slli_epi32(kAll, b, 16)));
    const __m512 odd = _mm512_add_ps(_mm512_castsi512_ps(_mm512_and_si512(a, high_half)),
                                     _mm512_castsi512_ps(_mm512_and_si512(b, high_half)));
    if (_mm512_kortestz(_mm512_fpclass_ps_mask(even, kDenormal), _mm512_fpclass_ps_mask(odd, kDenormal)) == 0) {
      SumBf16(dst + i, src + i, 32);  // a subnormal sum: round it the IEEE way
      continue;
    }
    const __m512i rounded = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(odd, even));
    _mm512_storeu_si512(dst + i, _mm512_permutexvar_epi16(interleave, rounded));
  }
  SumBf16(dst + i, src + i, n - i);
}
#endif  // SYNCLINE_X86_SIMD

// The 16-bit loops this CPU runs, chosen once by CPUID (or, without runtime
// dispatch, by the compile flags). fp32/fp64 dispatch through their clones.
struct Loops {
  void (*f16_sum)(uint16_t* __restrict, const uint16_t* __restrict, size_t) = SumF16Portable;
  void (*f16_scale)(uint16_t* __restrict, size_t, float) = ScaleF16Portable;
  void (*bf16_sum)(uint16_t* __restrict, const uint16_t* __restrict, size_t) = SumBf16;
};

Loops ChooseLoops() {
  Loops loops;
#if defined(SYNCLINE_X86_SIMD) && !defined(SYNCLINE_NO_RUNTIME_DISPATCH)
  __builtin_cpu_init();
  // Both fp16 loops give the same bits; only speed differs. On the AMD EPYC
  // (Zen 4) of the development VM the 16-wide conversions are slower per
  // element than the 8-wide ones, and the AVX2 loop sums about 1.1x faster
  // than the AVX-512 one in cache (syncline-bench-summation measures both
  // widths). This picks AVX2 on every AMD CPU, Zen 5 (not measured) too;
  // other CPUs keep the AVX-512 loop.
  const bool wide_conversions_pay = !__builtin_cpu_is("amd");
  if (__builtin_cpu_supports("avx512f") && wide_conversions_pay) {
    loops.f16_sum = SumF16Avx512, loops.f16_scale = ScaleF16Avx512;
  } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c")) {
    loops.f16_sum = SumF16Avx2, loops.f16_scale = ScaleF16Avx2;
  }
  if (__builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512bf16"))
    loops.bf16_sum = SumBf16Avx512Bf16;
#elif defined(SYNCLINE_X86_SIMD)
#if defined(__AVX512F__)
  loops.f16_sum = SumF16Avx512, loops.f16_scale = ScaleF16Avx512;
#elif defined(__AVX2__) && defined(__F16C__)
  loops.f16_sum = SumF16Avx2, loops.f16_scale = ScaleF16Avx2;
#endif
#if defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512BF16__)
  loops.bf16_sum = SumBf16Avx512Bf16;
#endif
#endif
  return loops;
}

const Loops& Best() {
  static const Loops loops = ChooseLoops();  // thread-safe one-time init
  return loops;
}

}  // namespace

void SumInto(DType t, void* dst, const void* src, size_t num_elements) {
  switch (t) {
    case DType::kFloat32:
      SumF32(static_cast<float*>(dst), static_cast<const float*>(src), num_elements);
      return;
    case DType::kFloat64:
      SumF64(static_cast<double*>(dst), static_cast<const double*>(src), num_elements);
      return;
    case DType::kFloat16:
      Best().f16_sum(static_cast<uint16_t*>(dst), static_cast<const uint16_t*>(src), num_elements);
      return;
    case DType::kBFloat16:
      Best().bf16_sum(static_cast<uint16_t*>(dst), static_cast<const uint16_t*>(src), num_elements);
      return;
  }
  // Not a DType enumerator: documented as a no-op (callers validate dtypes on receipt).
}

void Scale(DType t, void* data, size_t num_elements, double factor) {
  const float f32 = static_cast<float>(factor);
  switch (t) {
    case DType::kFloat32:
      ScaleF32(static_cast<float*>(data), num_elements, f32);
      return;
    case DType::kFloat64:
      ScaleF64(static_cast<double*>(data), num_elements, factor);
      return;
    case DType::kFloat16:
      Best().f16_scale(static_cast<uint16_t*>(data), num_elements, f32);
      return;
    case DType::kBFloat16:
      ScaleBf16(static_cast<uint16_t*>(data), num_elements, f32);
      return;
  }
}

}  // namespace syncline::kernels
