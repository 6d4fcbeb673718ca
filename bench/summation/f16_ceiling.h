// A reference for the fp16 sum, which on x86 without AVX-512 FP16 is bound by
// its conversions rather than by memory: ConvertOnlyF16 is the sum's loop
// over the same bytes without its arithmetic. It widens 8 halves of dst and
// of src with F16C and narrows a blend of the two back (a blend is a
// shuffle, not an add, so nothing rounds). The sum cannot beat it by much.
// Needs AVX2 and F16C (HasConvertOnlyF16). ConvertOnlyF16x16 does the same
// 16 halves per instruction with AVX-512F: which of the two widths converts
// faster decides which fp16 loop the kernels should use on a CPU.
#pragma once

#include <cstddef>
#include <cstdint>

namespace syncline::bench {

bool HasConvertOnlyF16();
void ConvertOnlyF16(uint16_t* dst, const uint16_t* src, size_t n);
bool HasConvertOnlyF16x16();
void ConvertOnlyF16x16(uint16_t* dst, const uint16_t* src, size_t n);

}  // namespace syncline::bench
