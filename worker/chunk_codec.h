// ChunkCodec: how the chunks of one compressed tensor travel (issue 32). A
// push encodes its chunk together with that part of the tensor's residual
// (error feedback: what earlier pushes did not carry) into a fresh buffer, so
// the caller's tensor is read once and not held by the transport; the
// servers' compressed sum is decoded straight into place. One codec serves
// one placement of a tensor (one set of keys and chunk boundaries); the
// residual belongs to the tensor and is shared by all its placements, so a
// repartition keeps what was not sent yet.
//
// Thread-safety: every method may be called from any thread; encodes of one
// tensor run one at a time, in the order they are admitted.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "common/buffer.h"
#include "common/mutex.h"
#include "common/status.h"
#include "compression/compressor.h"

namespace syncline {

// What a compressed tensor's pushes have not carried yet, per value.
class Residual {
 public:
  explicit Residual(uint64_t num_values) : values_(num_values, 0.0f) {}

 private:
  friend class ChunkCodec;
  Mutex mu_;
  std::vector<float> values_ GUARDED_BY(mu_);
};

class ChunkCodec {
 public:
  // `form` is not kNone; chunks at these byte offsets and lengths of an fp32
  // tensor whose residual is `residual`.
  ChunkCodec(compression::Spec form, const std::vector<uint64_t>& chunk_offsets,
             const std::vector<uint64_t>& chunk_lengths, std::shared_ptr<Residual> residual);

  const compression::Spec& form() const { return form_; }
  // The bytes chunk `i` travels in, each way.
  uint64_t WireBytes(size_t i) const;
  // The compressed form of chunk `i` (`values`: its fp32 values) plus its
  // residual, in a fresh buffer; `seed` chooses randomk's indices.
  Result<Buffer> Encode(size_t i, const float* values, uint64_t seed);
  // Writes the decoded sum of chunk `i` (a compressed payload) into `out`; an
  // error naming what is wrong, with `out` untouched, if it does not decode.
  Status Decode(size_t i, const Buffer& payload, float* out) const;

 private:
  struct Chunk {
    size_t first = 0;   // index of its first value in the tensor
    size_t values = 0;
  };
  const compression::Spec form_;
  std::vector<Chunk> chunks_;
  const std::shared_ptr<Residual> residual_;
};

}  // namespace syncline
