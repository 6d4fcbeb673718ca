#include "worker/chunk_codec.h"

#include <cstring>

namespace syncline {

ChunkCodec::ChunkCodec(compression::Spec form, const std::vector<uint64_t>& chunk_offsets,
                       const std::vector<uint64_t>& chunk_lengths, std::shared_ptr<Residual> residual)
    : form_(form), residual_(std::move(residual)) {
  for (size_t i = 0; i < chunk_offsets.size(); ++i)
    chunks_.push_back(Chunk{chunk_offsets[i] / sizeof(float), chunk_lengths[i] / sizeof(float)});
}

uint64_t ChunkCodec::WireBytes(size_t i) const { return compression::CompressedBytes(form_, chunks_[i].values); }

Result<Buffer> ChunkCodec::Encode(size_t i, const float* values, uint64_t seed) {
  const Chunk& c = chunks_[i];
  // Buffer::Zeros memory is aligned for any scalar, as Compress requires.
  Buffer out = Buffer::Zeros(WireBytes(i));
  MutexLock lock(residual_->mu_);
  if (c.first + c.values > residual_->values_.size())
    return Internal("chunk " + std::to_string(i) + " lies outside its tensor's residual");
  SYNCLINE_RETURN_IF_ERROR(compression::CompressWithResidual(form_, values, residual_->values_.data() + c.first, c.values,
                                                             seed, reinterpret_cast<std::byte*>(out.mutable_data())));
  return out;
}

Status ChunkCodec::Decode(size_t i, const Buffer& payload, float* out) const {
  const size_t n = chunks_[i].values;
  Buffer aligned = payload;
  // A transport may hand over a frame at any address; the decoders read 4-byte aligned chunks.
  if (reinterpret_cast<uintptr_t>(payload.data()) % alignof(float) != 0) aligned = Buffer::Copy(payload.data(), payload.size());
  return compression::Decompress(form_, reinterpret_cast<const std::byte*>(aligned.data()), aligned.size(), out, n);
}

}  // namespace syncline
