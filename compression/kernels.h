// The loops behind compressor.h, on raw arrays and without framing: encode n
// fp32 values into one form's body, and add a decoded body, times a factor,
// into fp32 values. compressor.cc checks sizes and headers before calling
// them; call them directly only with arrays of the documented lengths.
//
// Element-wise loops carry SYNCLINE_CPU_CLONES (AVX-512, AVX2 or baseline,
// picked at load); the fp16 cast uses F16C where the CPU has it. Every path
// gives the same bits, so a chunk decodes alike on every host.
//
// Thread-safety: free functions that touch only their arguments.
#pragma once

#include <cstddef>
#include <cstdint>

namespace syncline::compression::kernels {

// 16-bit casts: out[i] = the value rounded to nearest even.
void ToFp16(const float* values, size_t n, uint16_t* out);
void ToBf16(const float* values, size_t n, uint16_t* out);
void AddFp16(const uint16_t* in, size_t n, float factor, float* out);
void AddBf16(const uint16_t* in, size_t n, float factor, float* out);

// int8 blocks: scales[b] = max |x| over block b (of `block` values) / 127, and
// q[i] = x[i] / scale rounded half away from zero (an all-zero block, or one
// whose largest magnitude is below 2^-119, has scale 0 and q 0; a non-finite
// value makes its block's scale NaN).
void ToInt8(const float* values, size_t n, size_t block, float* scales, int8_t* q);
void AddInt8(const float* scales, const int8_t* q, size_t n, size_t block, float factor, float* out);

// onebit: the mean of |x| (NaN if a value is not finite), and bit i % 8 of
// bits[i / 8] set where x[i] has its sign bit set (-0 too).
float ToOnebit(const float* values, size_t n, uint8_t* bits);
void AddOnebit(float scale, const uint8_t* bits, size_t n, float factor, float* out);

// Error feedback fused into the encoding: c = values[i] + residual[i] is
// encoded as the plain form would encode it, and residual[i] becomes
// c - decoded(c), in one pass (int8: two per block, in cache).
void ToFp16Feedback(const float* values, float* residual, size_t n, uint16_t* out);
void ToBf16Feedback(const float* values, float* residual, size_t n, uint16_t* out);
void ToInt8Feedback(const float* values, float* residual, size_t n, size_t block, float* scales, int8_t* q);
// onebit: two passes (the scale needs the whole chunk before any residual is
// known); returns the scale, as ToOnebit of values + residual would.
float ToOnebitFeedback(const float* values, float* residual, size_t n, uint8_t* bits);

// top-k's candidates: the indices i, ascending, with |values[i]| >= threshold
// (never a NaN), written to out while `capacity` lasts; returns how many there
// are (more than capacity: out holds the first `capacity`). out[found,
// capacity) may be overwritten. With AVX-512, one vector compare per 16
// values; with AVX2, per 8. `loop` names one for tests that compare them (a
// CPU without it runs the best one below it); kBest is the fastest it has.
enum class CandidateLoop { kPortable, kAvx2, kAvx512, kBest };
size_t IndicesAtLeast(const float* values, size_t n, float threshold, uint32_t* out, size_t capacity,
                      CandidateLoop loop = CandidateLoop::kBest);

// The same pass with error feedback's add fused in: residual[i] +=
// values[i] (the bits of a plain add), then the candidates among the sums.
size_t AddAndIndicesAtLeast(const float* values, float* residual, size_t n, float threshold, uint32_t* out,
                            size_t capacity, CandidateLoop loop = CandidateLoop::kBest);

// keys[j] = values[indices[j]]'s bits with the sign cleared, for count
// indices below n (top-k's candidates' magnitude keys; with AVX2, a gather
// per 8 where n is below 2^31: a gather's indices are signed).
void MagnitudeBitsAt(const float* values, size_t n, const uint32_t* indices, size_t count, uint32_t* keys,
                     CandidateLoop loop = CandidateLoop::kBest);

// top-k's selection rounds: items[i] for each i with first <= keys[i] <=
// last, in order, to out; returns how many. out has room for `size` entries
// (a vector store may write past the last one kept) and may be items or keys
// itself. The same loops as IndicesAtLeast (`loop`).
size_t KeepWhereKeyIn(const uint32_t* keys, const uint32_t* items, size_t size, uint32_t first, uint32_t last,
                      uint32_t* out, CandidateLoop loop = CandidateLoop::kBest);

// The smallest and largest of keys[0, size), size >= 1.
struct KeyRange {
  uint32_t lo, hi;
};
KeyRange RangeOfKeys(const uint32_t* keys, size_t size, CandidateLoop loop = CandidateLoop::kBest);

// Sparse: out[indices[j]] += factor * values[j].
void AddSparse(const uint32_t* indices, const float* values, size_t k, float factor, float* out);

}  // namespace syncline::compression::kernels
