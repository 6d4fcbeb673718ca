// Conversions between float and the two 16-bit float formats Syncline sums:
// IEEE 754 binary16 ("half", fp16) and bfloat16 (bf16), both held as their raw
// uint16_t bit patterns. The summation kernels use these same functions, so a
// value converted here and a value produced by a kernel round identically on
// every CPU. Also meant for tests and example programs that need to build or
// check fp16/bf16 payloads.
//
// Contracts shared by all four functions:
// - float -> 16-bit rounds to nearest, ties to even; magnitudes past the
//   largest finite value become +-inf; NaN stays NaN (quiet, sign and the top
//   payload bits kept); signed zeros keep their sign.
// - 16-bit -> float is exact (every half and bf16 value is a float), subnormal
//   halves included.
// - Branch-free and free of float subnormal arithmetic (except FloatToHalf of
//   a float subnormal, which yields +-0 either way), so loops over them
//   vectorize and give the same bits when flush-to-zero/DAZ modes are on.
#pragma once

#include <bit>
#include <cstdint>

namespace syncline {
namespace half_detail {
// All ones if `c`, else zero. The conversions compute every case and combine
// them with masks instead of branches or ?: on purpose: GCC will not
// if-convert a branch that guards a floating-point operation, and a loop with
// control flow in it does not vectorize.
inline uint32_t MaskIf(bool c) { return 0u - static_cast<uint32_t>(c); }
}  // namespace half_detail

// binary16 layout: 1 sign, 5 exponent (bias 15), 10 mantissa bits.
inline float HalfToFloat(uint16_t h) {
  using half_detail::MaskIf;
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t em = h & 0x7fffu;  // exponent and mantissa
  // inf or NaN: all-ones float exponent, mantissa moved up unchanged.
  const uint32_t special = 0x7f800000u | (em << 13);
  // Normal: move the fields up and re-bias the exponent from 15 to 127.
  const uint32_t normal = (em << 13) + (112u << 23);
  // Zero or subnormal: the value is em * 2^-24; int->float and the scaling
  // are exact and never produce a float subnormal.
  const uint32_t small =
      std::bit_cast<uint32_t>(static_cast<float>(static_cast<int32_t>(em)) * 0x1p-24f);
  const uint32_t is_special = MaskIf(em >= 0x7c00u);
  const uint32_t is_small = MaskIf(em < 0x0400u);
  const uint32_t bits =
      (special & is_special) | (small & is_small) | (normal & ~(is_special | is_small));
  return std::bit_cast<float>(bits | sign);
}

inline uint16_t FloatToHalf(float f) {
  using half_detail::MaskIf;
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t a = u & 0x7fffffffu;  // |f|
  // |f| >= 2^16, inf or NaN: past the half range whatever the rounding (values
  // in [65520, 65536) take the normal path and round up to inf there). NaN
  // keeps its top 10 payload bits and gets the quiet bit.
  const uint32_t special = 0x7c00u | (MaskIf(a > 0x7f800000u) & (0x0200u | ((a >> 13) & 0x3ffu)));
  // |f| < 2^-14: a half subnormal, zero, or the smallest normal after rounding
  // up. Floats in [0.5, 1) are spaced 2^-24 apart, exactly the half subnormal
  // step, so adding 0.5 makes the FPU round to nearest even; the bits above
  // 0.5 are the half's bits. (Masking bit 30 keeps the unused add finite for
  // large inputs.)
  const float tiny = std::bit_cast<float>(a & 0x3fffffffu) + 0.5f;
  const uint32_t small = std::bit_cast<uint32_t>(tiny) - 0x3f000000u;
  // Normal: re-bias the exponent (127 -> 15), then drop 13 mantissa bits,
  // rounding to nearest even. A carry out of the mantissa bumps the exponent,
  // which is how 65520 and up become inf (0x7c00).
  const uint32_t lsb = (a >> 13) & 1u;
  const uint32_t normal = (a - (112u << 23) + 0x0fffu + lsb) >> 13;
  const uint32_t is_special = MaskIf(a >= 0x47800000u);
  const uint32_t is_small = MaskIf(a < 0x38800000u);
  const uint32_t out =
      (special & is_special) | (small & is_small) | (normal & ~(is_special | is_small));
  return static_cast<uint16_t>(out | sign);
}

// bfloat16 is the top half of a float: same sign and 8-bit exponent, 7 mantissa bits.
inline float Bf16ToFloat(uint16_t b) {
  return std::bit_cast<float>(static_cast<uint32_t>(b) << 16);
}

inline uint16_t FloatToBf16(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  // NaN: truncate and force the quiet bit so a payload living only in the
  // dropped low bits cannot turn the NaN into inf.
  const uint32_t nan = (u >> 16) | 0x0040u;
  // Otherwise round to nearest even; a carry may reach the exponent (up to
  // inf), as it should. Unsigned wrap cannot happen below NaN's range.
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t is_nan = half_detail::MaskIf((u & 0x7fffffffu) > 0x7f800000u);
  return static_cast<uint16_t>((nan & is_nan) | (rounded & ~is_nan));
}

}  // namespace syncline
