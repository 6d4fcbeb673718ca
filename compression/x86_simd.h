// The compression kernels' hand-written x86 paths (F16C casts, AVX2 and
// AVX-512 top-k candidates): where they compile (SYNCLINE_X86_SIMD), and whether this CPU
// runs them. Each gives the same bits as the portable loop beside it. With
// SYNCLINE_NO_RUNTIME_DISPATCH the compile flags decide, which is how the
// sanitizer builds test the portable loops.
#pragma once

#if defined(__x86_64__) && defined(__linux__) && defined(__GNUC__)
#define SYNCLINE_X86_SIMD 1
#include <immintrin.h>

namespace syncline::compression::kernels {

// AVX2 with F16C and POPCNT (every CPU with AVX2 has both).
inline bool HasAvx2() {
#ifdef SYNCLINE_NO_RUNTIME_DISPATCH
#if defined(__AVX2__) && defined(__F16C__) && defined(__POPCNT__)
  return true;
#else
  return false;
#endif
#else
  static const bool has =
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c") && __builtin_cpu_supports("popcnt");
  return has;
#endif
}

// AVX-512 Foundation with POPCNT (top-k's candidate pass).
inline bool HasAvx512() {
#ifdef SYNCLINE_NO_RUNTIME_DISPATCH
#if defined(__AVX512F__) && defined(__POPCNT__)
  return true;
#else
  return false;
#endif
#else
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("popcnt");
  return has;
#endif
}

}  // namespace syncline::compression::kernels
#endif
