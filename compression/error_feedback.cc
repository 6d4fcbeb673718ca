#include "compression/error_feedback.h"

#include <cstdint>

#include "summation/kernels.h"

namespace syncline::compression {

Status ErrorFeedback::Compress(const float* values, size_t n, uint64_t seed, std::byte* out) {
  if (residual_.empty() && n > 0) residual_.assign(n, 0.0f);
  if (residual_.size() != n)
    return InvalidArgument("error feedback of " + std::to_string(residual_.size()) + " values was given " +
                           std::to_string(n));
  // Compress's own refusals, checked before the residual changes.
  if (spec_.kind == Kind::kNone) return InvalidArgument("error feedback needs a compression, not none");
  if (reinterpret_cast<uintptr_t>(out) % 4 != 0) return InvalidArgument("a compressed chunk must be 4-byte aligned");
  // residual <- values + residual; send it; residual <- residual - decoded.
  kernels::SumInto(DType::kFloat32, residual_.data(), values, n);
  SYNCLINE_RETURN_IF_ERROR(compression::Compress(spec_, residual_.data(), n, seed, out));
  return DecompressAdd(spec_, out, CompressedBytes(spec_, n), -1.0f, residual_.data(), n);
}

}  // namespace syncline::compression
