#include "f16_ceiling.h"

#include <immintrin.h>

namespace syncline::bench {

bool HasConvertOnlyF16() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
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

}  // namespace syncline::bench
