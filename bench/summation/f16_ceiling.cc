#include "f16_ceiling.h"

#include <cpuid.h>
#include <immintrin.h>

namespace syncline::bench {

bool HasConvertOnlyF16() {
  __builtin_cpu_init();
  // F16C from cpuid itself: clang 14's __builtin_cpu_supports does not know "f16c".
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
  return __builtin_cpu_supports("avx2") && f16c;
}

__attribute__((target("avx2,f16c"))) void ConvertOnlyF16(uint16_t* dst, const uint16_t* src, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 a = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(dst + i)));
    const __m256 b = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm256_cvtps_ph(_mm256_blend_ps(a, b, 0xaa), _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < n; ++i) dst[i] = (i % 2) ? src[i] : dst[i];  // same result as the blend
}

bool HasConvertOnlyF16x16() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f");
}

__attribute__((target("avx512f"))) void ConvertOnlyF16x16(uint16_t* dst, const uint16_t* src, size_t n) {
  constexpr __mmask16 kAll = 0xffff;  // maskz forms: see summation/kernels.cc on GCC 12's warning
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 a = _mm512_maskz_cvtph_ps(kAll, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(dst + i)));
    const __m512 b = _mm512_maskz_cvtph_ps(kAll, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i),
                        _mm512_maskz_cvtps_ph(kAll, _mm512_mask_blend_ps(0xaaaa, a, b), _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < n; ++i) dst[i] = (i % 2) ? src[i] : dst[i];  // same result as the blend
}

}  // namespace syncline::bench
