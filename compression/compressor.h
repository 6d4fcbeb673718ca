// Gradient compression: the forms a chunk of fp32 values can travel in, and
// the loops that encode and decode them. A compressed chunk describes itself
// (an 8-byte header: form, format version, element count), so a receiver
// checks it against what it expects before reading any value: a chunk that
// does not match is an InvalidArgument, never a crash or a wrong sum.
//
//   form        sends                                              bytes for n values (+ header)
//   fp16, bf16  each value rounded to 16 bits (nearest, ties even)  2n
//   int8        per block of kInt8Block values a scale (max|x|/127)  4 ceil(n/256) + n
//               and one signed byte per value
//   onebit      one sign bit per value and one scale (mean |x|)      4 + ceil(n/8)
//   topk:R      the k = ceil(R n) values largest in magnitude and    8k
//               their indices (ascending)
//   randomk:R   k = ceil(R n) values at evenly spread indices from    8 + 4k
//               a random offset, whose seed travels along
//
// A chunk's bytes are padded with zeros to a multiple of 4 (a whole number of
// fp32 words, as the wire checks a float32 message's length).
//
// The lossy forms are meant to run under error feedback (error_feedback.h),
// which carries what one step's compression lost into the next step.
// DecompressAdd adds a decoded chunk into an fp32 buffer without expanding it
// first, which is how a server sums compressed pushes (sparse ones too).
//
// Only fp32 values are compressed (CheckDType says why another dtype is
// refused). Non-finite values: the casts keep them; an int8 block or onebit
// chunk holding one decodes as NaN throughout, so a divergence is not hidden.
// An int8 block whose values are all below 2^-119 in magnitude decodes as zeros.
//
// Thread-safety: free functions that touch only their arguments.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/dtype.h"
#include "common/status.h"

namespace syncline::compression {

enum class Kind : uint8_t { kNone = 0, kFp16 = 1, kBf16 = 2, kInt8 = 3, kOnebit = 4, kTopK = 5, kRandomK = 6 };

struct Spec {
  Kind kind = Kind::kNone;
  double ratio = 0;  // topk and randomk: the fraction of values sent, in (0, 1]
  std::string Name() const;  // as ParseSpec reads it: "int8", "topk:0.01"
};

constexpr size_t kHeaderBytes = 8;
constexpr size_t kInt8Block = 256;

// "none", "fp16", "bf16", "int8", "onebit", "topk:R", "randomk:R" with R in (0, 1].
Result<Spec> ParseSpec(std::string_view text);

// Ok if `spec` compresses values of `dtype`; otherwise InvalidArgument saying why.
Status CheckDType(const Spec& spec, DType dtype);

// The values `spec` sends of n: n for the dense forms, k for topk and randomk.
size_t SentValues(const Spec& spec, size_t n);

// Bytes of the compressed form of n values, header and padding included.
size_t CompressedBytes(const Spec& spec, size_t n);

// The fp32 bytes of a chunk whose compressed form takes about `wire_bytes`
// (no more; whole 4 KiB), from wire_bytes up to `largest`: a compressed
// tensor's chunks are a partition on the wire, so that what a chunk costs
// per message and per round buys as many bytes as an uncompressed chunk
// (docs/decisions.md, Compression). wire_bytes itself for kNone.
uint64_t ChunkBytesForWireBytes(const Spec& spec, uint64_t wire_bytes, uint64_t largest);

// Chunks are 4-byte aligned (as the pool's buffers are); a receiver aligns a
// payload that arrived unaligned before decoding it.
//
// Encodes values[0, n) into out, which holds CompressedBytes(spec, n) bytes;
// `seed` chooses randomk's offset (the others ignore it). InvalidArgument for
// kNone or n of 2^32 and more.
Status Compress(const Spec& spec, const float* values, size_t n, uint64_t seed, std::byte* out);

// Compress of values + residual, leaving in residual what the chunk does not
// carry (residual[i] = values[i] + residual[i] - decoded[i]), fused into one
// pass where the form allows; error feedback (error_feedback.h) keeps the
// residual. As Compress otherwise; on an error the residual is unchanged.
Status CompressWithResidual(const Spec& spec, const float* values, float* residual, size_t n, uint64_t seed,
                            std::byte* out);

// out[i] += factor * decoded[i] for i in [0, n), where `in` (in_bytes long)
// holds a chunk Compress(spec, ..., n, ...) made. InvalidArgument, with `out`
// untouched, if it does not (or is not 4-byte aligned).
Status DecompressAdd(const Spec& spec, const std::byte* in, size_t in_bytes, float factor, float* out, size_t n);

// out[i] = decoded[i]; as DecompressAdd otherwise (it clears out first, a
// second pass over it).
Status Decompress(const Spec& spec, const std::byte* in, size_t in_bytes, float* out, size_t n);

}  // namespace syncline::compression
