// Reading and writing element i of a tensor of any Syncline dtype as a
// double, for tests that check sums in every dtype.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/dtype.h"
#include "summation/half.h"

namespace syncline::testing {

inline void Store(DType dtype, void* data, size_t i, double v) {
  switch (dtype) {
    case DType::kFloat32: static_cast<float*>(data)[i] = float(v); break;
    case DType::kFloat64: static_cast<double*>(data)[i] = v; break;
    case DType::kFloat16: static_cast<uint16_t*>(data)[i] = FloatToHalf(float(v)); break;
    case DType::kBFloat16: static_cast<uint16_t*>(data)[i] = FloatToBf16(float(v)); break;
  }
}

inline double Load(DType dtype, const void* data, size_t i) {
  switch (dtype) {
    case DType::kFloat32: return static_cast<const float*>(data)[i];
    case DType::kFloat64: return static_cast<const double*>(data)[i];
    case DType::kFloat16: return HalfToFloat(static_cast<const uint16_t*>(data)[i]);
    case DType::kBFloat16: return Bf16ToFloat(static_cast<const uint16_t*>(data)[i]);
  }
  return 0;
}

}  // namespace syncline::testing
