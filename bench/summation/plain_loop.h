// The reference the summation kernels are compared against: the loop anyone
// would write first. It lives in its own translation unit, compiled with the
// build type's ordinary flags (RelWithDebInfo: -O2) and without __restrict or
// CPU clones, so the benchmark shows what the kernels' treatment buys.
#pragma once

#include <cstddef>

namespace syncline::bench {

void PlainSumF32(float* dst, const float* src, size_t n);

}  // namespace syncline::bench
