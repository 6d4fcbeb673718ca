#include "compression/error_feedback.h"

namespace syncline::compression {

Status ErrorFeedback::Compress(const float* values, size_t n, uint64_t seed, std::byte* out) {
  if (residual_.empty() && n > 0) residual_.assign(n, 0.0f);
  if (residual_.size() != n)
    return InvalidArgument("error feedback of " + std::to_string(residual_.size()) + " values was given " +
                           std::to_string(n));
  return CompressWithResidual(spec_, values, residual_.data(), n, seed, out);
}

}  // namespace syncline::compression
