// The reference the summation kernels are compared against: the loop anyone
// would write first. It lives in its own translation unit, compiled at -O3
// like the kernels (so GCC vectorizes it for baseline x86-64) but without
// __restrict or CPU clones: the benchmark shows what dispatch and tuning buy
// over a fair, optimized loop.
#pragma once

#include <cstddef>

namespace syncline::bench {

void PlainSumF32(float* dst, const float* src, size_t n);

}  // namespace syncline::bench
