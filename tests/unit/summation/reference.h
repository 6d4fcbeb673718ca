// Test-only references for the summation tests, written independently of
// summation/half.h: slow, obviously-correct rounding by search over the
// representable values, and typed element access to raw buffers.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "common/dtype.h"
#include "summation/half.h"

namespace syncline::testing {

// Value of a half bit pattern, decoded from the IEEE definition.
inline double RefHalfValue(uint16_t h) {
  const int exp = (h >> 10) & 0x1f;
  const int mant = h & 0x3ff;
  const double sign = (h & 0x8000) ? -1.0 : 1.0;
  if (exp == 0x1f) return mant ? std::nan("") : sign * INFINITY;
  if (exp == 0) return sign * std::ldexp(mant, -24);
  return sign * std::ldexp(1024 + mant, exp - 25);
}

// Rounds the magnitude `mag` (>= 0, not NaN) to the nearest of the patterns
// 0..max_finite, whose values `value(p)` increase with p. `overflow` is where
// the pattern after max_finite (inf) would sit with an unbounded exponent: the
// far end of the last rounding interval. Ties go to the even pattern.
template <typename ValueFn>
uint16_t RefRoundMagnitude(double mag, uint32_t max_finite, double overflow, ValueFn value) {
  if (std::isinf(mag)) return static_cast<uint16_t>(max_finite + 1);
  // Largest pattern whose value is <= mag (binary search over patterns).
  uint32_t lo = 0, hi = max_finite;
  if (mag >= value(max_finite)) {
    lo = max_finite;
  } else {
    while (lo < hi) {
      const uint32_t mid = (lo + hi + 1) / 2;
      if (value(mid) <= mag) lo = mid; else hi = mid - 1;
    }
  }
  const double below = value(lo);
  const double above = lo == max_finite ? overflow : value(lo + 1);
  if (mag == below) return static_cast<uint16_t>(lo);
  const double d_below = mag - below, d_above = above - mag;
  if (d_below < d_above) return static_cast<uint16_t>(lo);
  if (d_above < d_below) return static_cast<uint16_t>(lo + 1);
  return static_cast<uint16_t>((lo & 1) ? lo + 1 : lo);  // lo + 1 past max_finite is inf
}

// Correctly rounded half of a double (exact inputs only: no double rounding).
inline uint16_t RefDoubleToHalf(double x) {
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  if (std::isnan(x)) return 0x7e00 | sign;
  const double mag = std::fabs(x);
  return sign | RefRoundMagnitude(mag, 0x7bff, 65536.0,
                                  [](uint32_t p) { return RefHalfValue(static_cast<uint16_t>(p)); });
}

// Correctly rounded bf16 of a double; bf16 values are floats with 16 zero low bits.
inline uint16_t RefDoubleToBf16(double x) {
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  if (std::isnan(x)) return 0x7fc0 | sign;
  auto value = [](uint32_t p) { return static_cast<double>(std::bit_cast<float>(p << 16)); };
  return sign | RefRoundMagnitude(std::fabs(x), 0x7f7f, std::ldexp(1.0, 128), value);
}

// Raw buffers of any dtype, read and written as doubles.
inline void StoreAs(DType t, void* base, size_t i, double v) {
  switch (t) {
    case DType::kFloat32: static_cast<float*>(base)[i] = static_cast<float>(v); break;
    case DType::kFloat64: static_cast<double*>(base)[i] = v; break;
    case DType::kFloat16: static_cast<uint16_t*>(base)[i] = RefDoubleToHalf(v); break;
    case DType::kBFloat16: static_cast<uint16_t*>(base)[i] = RefDoubleToBf16(v); break;
  }
}

inline double LoadAs(DType t, const void* base, size_t i) {
  switch (t) {
    case DType::kFloat32: return static_cast<const float*>(base)[i];
    case DType::kFloat64: return static_cast<const double*>(base)[i];
    case DType::kFloat16: return RefHalfValue(static_cast<const uint16_t*>(base)[i]);
    case DType::kBFloat16: return std::bit_cast<float>(uint32_t{static_cast<const uint16_t*>(base)[i]} << 16);
  }
  return 0;
}

constexpr DType kAllDTypes[] = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16};

}  // namespace syncline::testing
