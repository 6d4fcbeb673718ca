// ErrorFeedback: what one tensor's compression lost, carried into its next
// step (error feedback, as in 1-bit SGD and EF-SGD). Each Compress encodes
// the values plus the residual, then keeps as the new residual what the
// encoding did not carry, so over any number of steps
//
//   sum of the values = sum of what was decoded + the residual
//
// and nothing a lossy form drops is lost for good, only delayed. A worker
// keeps one per tensor chunk it pushes; a server one per chunk it sends back.
//
// Thread-safety: none; one owner calls it (one chunk's pushes are sequential).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "compression/compressor.h"

namespace syncline::compression {

class ErrorFeedback {
 public:
  explicit ErrorFeedback(Spec spec) : spec_(spec) {}

  // Compresses values[0, n) + residual into out (CompressedBytes(spec, n)
  // bytes, 4-byte aligned) and updates the residual. The first call fixes n;
  // a later call with another n is an InvalidArgument and changes nothing.
  Status Compress(const float* values, size_t n, uint64_t seed, std::byte* out);

  const Spec& spec() const { return spec_; }
  // What the chunks sent so far did not carry (empty before the first call).
  const std::vector<float>& residual() const { return residual_; }

 private:
  const Spec spec_;
  std::vector<float> residual_;
};

}  // namespace syncline::compression
