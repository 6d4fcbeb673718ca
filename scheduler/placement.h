// KeyPlacement: cuts a declared tensor into chunks and places each chunk's
// key on the server with the fewest bytes so far (ties: lowest rank), so
// servers carry balanced byte loads whatever the mix of tensor sizes.
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "syncline.pb.h"

namespace syncline {

// A chunk key: tensor id in the high 32 bits, chunk index in the low 32.
inline uint64_t MakeKey(uint32_t tensor_id, uint32_t chunk_index) {
  return (uint64_t{tensor_id} << 32) | chunk_index;
}

class KeyPlacement {
 public:
  // `server_ids`: node ids of the servers, in rank order.
  explicit KeyPlacement(std::vector<int32_t> server_ids);

  // Chunks of `spec` (partition_bytes rounded down to whole elements) with
  // their keys and owning servers; an error naming the tensor and the
  // partition it needs when it would have more than kMaxChunksPerTensor.
  Result<std::vector<proto::ChunkPlacement>> Place(uint32_t tensor_id, const proto::TensorSpec& spec);
  // Bytes placed on each server so far, in rank order.
  const std::vector<uint64_t>& loads() const { return loads_; }

 private:
  std::vector<int32_t> server_ids_;
  std::vector<uint64_t> loads_;
};

}  // namespace syncline
