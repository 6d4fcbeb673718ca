// Summation kernels: the element-wise loops the server runs on every pushed
// chunk. They run on the calling thread and touch nothing but their
// arguments, so any number of threads may call them at once on disjoint
// buffers. SummationEngine (engine.h) splits large inputs across threads;
// call these directly only for work you have already partitioned.
//
// Arithmetic: fp32 and fp64 add (and scale) in their own precision. fp16 and
// bf16 are widened to fp32, combined there and rounded once back to 16 bits
// (to nearest, ties to even; see half.h), which for addition equals the
// correctly rounded 16-bit sum. The code path is picked for the CPU at run
// time (AVX-512, AVX2/F16C or baseline x86-64; see kernels.cc), and every
// path, and every split of a buffer into pieces, gives the same bits for
// non-NaN results: the loops are element-wise and all paths perform the same
// IEEE operations. NaN stays NaN; which NaN payload survives is unspecified.
#pragma once

#include <cstddef>

#include "common/dtype.h"

namespace syncline::kernels {

// dst[i] += src[i] for i in [0, num_elements).
// REQUIRES: dst and src each hold num_elements elements of type t and do not
// overlap. Alignment is not required beyond the element size. A `t` that is
// not one of the DType enumerators (impossible for values that came through
// DTypeFromWire) leaves dst untouched.
void SumInto(DType t, void* dst, const void* src, size_t num_elements);

// data[i] *= factor for i in [0, num_elements), e.g. factor = 1/num_workers
// to average. fp64 multiplies by `factor` itself; the other types multiply in
// fp32 by float(factor), then round once to the element type.
// REQUIRES: data holds num_elements elements of type t.
void Scale(DType t, void* data, size_t num_elements, double factor);

}  // namespace syncline::kernels
