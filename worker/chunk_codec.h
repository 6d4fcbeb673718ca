// ChunkCodec: how the chunks of one compressed tensor travel (issue 32). A
// push encodes its chunk together with that chunk's residual (error
// feedback: what earlier pushes of the chunk did not carry) into a fresh
// buffer, so the caller's tensor is read once and not held by the
// transport; the servers' compressed sum is decoded straight into place.
// One codec serves one placement of a tensor (one set of keys).
//
// Thread-safety: every method may be called from any thread; pushes of one
// chunk encode one at a time, in the order they are admitted.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "common/buffer.h"
#include "common/mutex.h"
#include "common/status.h"
#include "compression/compressor.h"
#include "compression/error_feedback.h"

namespace syncline {

class ChunkCodec {
 public:
  // `form` is not kNone; one residual per chunk of the given byte lengths (fp32).
  ChunkCodec(compression::Spec form, const std::vector<uint64_t>& chunk_lengths);

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
    explicit Chunk(compression::Spec form, size_t values) : values(values), feedback(form) {}
    const size_t values;
    Mutex mu;
    compression::ErrorFeedback feedback GUARDED_BY(mu);
  };
  const compression::Spec form_;
  std::vector<std::unique_ptr<Chunk>> chunks_;
};

}  // namespace syncline
