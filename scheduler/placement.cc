#include "scheduler/placement.h"

#include <algorithm>
#include <cstdint>

#include "common/dtype.h"
#include "transport/wire.h"

namespace syncline {

KeyPlacement::KeyPlacement(std::vector<int32_t> server_ids)
    : server_ids_(std::move(server_ids)), loads_(server_ids_.size(), 0) {}

Result<std::vector<proto::ChunkPlacement>> KeyPlacement::Place(uint32_t tensor_id, const proto::TensorSpec& spec) {
  if (server_ids_.empty()) return FailedPrecondition("no servers to place keys on");
  SYNCLINE_ASSIGN_OR_RETURN(DType dtype, DTypeFromWire(spec.dtype()));
  const uint64_t element = DTypeSize(dtype);
  const uint64_t chunk_bytes = spec.partition_bytes() / element * element;
  if (chunk_bytes == 0)
    return InvalidArgument("partition_bytes " + std::to_string(spec.partition_bytes()) + " is smaller than one " +
                           DTypeName(dtype) + " element");
  if (spec.num_elements() > UINT64_MAX / element)
    return InvalidArgument("tensor '" + spec.name() + "' of " + std::to_string(spec.num_elements()) + " " +
                           DTypeName(dtype) + " elements is too large to address");
  const uint64_t total = spec.num_elements() * element;
  const uint64_t count = (total + chunk_bytes - 1) / chunk_bytes;
  if (count > kMaxChunksPerTensor) {
    // Whole elements per chunk, as partitions are rounded down to them.
    const uint64_t per_chunk = (total + kMaxChunksPerTensor - 1) / kMaxChunksPerTensor;
    const uint64_t needed = (per_chunk + element - 1) / element * element;
    return InvalidArgument("tensor '" + spec.name() + "' of " + std::to_string(total) + " bytes would be cut into " +
                           std::to_string(count) + " chunks of " + std::to_string(chunk_bytes) +
                           " bytes; a tensor may have at most " + std::to_string(kMaxChunksPerTensor) +
                           " chunks: set SYNCLINE_PARTITION_BYTES (BYTEPS_PARTITION_BYTES) to at least " +
                           std::to_string(needed));
  }
  std::vector<proto::ChunkPlacement> chunks;
  chunks.reserve(count);
  for (uint64_t i = 0; i < count; ++i) {
    const uint64_t offset = i * chunk_bytes;
    const uint64_t length = std::min(chunk_bytes, total - offset);
    const size_t server = std::min_element(loads_.begin(), loads_.end()) - loads_.begin();
    loads_[server] += length;
    proto::ChunkPlacement c;
    c.set_key(MakeKey(tensor_id, static_cast<uint32_t>(i)));
    c.set_server_id(server_ids_[server]);
    c.set_offset_bytes(offset);
    c.set_length_bytes(length);
    chunks.push_back(std::move(c));
  }
  return chunks;
}

}  // namespace syncline
