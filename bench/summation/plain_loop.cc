#include "plain_loop.h"

namespace syncline::bench {

void PlainSumF32(float* dst, const float* src, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] += src[i];
}

}  // namespace syncline::bench
