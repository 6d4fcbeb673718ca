// The worker's tensors as the job knows them: declaring one (checked against
// the scheduler's record, so workers that disagree fail at declaration),
// declaring it again under another partition size (the tuner's repartition),
// and looking them up.
#include <algorithm>

#include "transport/wire.h"
#include "worker/worker.h"

namespace syncline {

// A partition counts the bytes a chunk puts on the wire (as the credit does):
// a compressed tensor's chunks hold that many bytes once compressed, but at
// most 16 partitions of values, so that smaller partitions still give onebit
// and sparse forms smaller chunks (docs/decisions.md).
uint64_t Worker::ChunkBytes(const compression::Spec& form, uint64_t partition_bytes) const {
  constexpr uint64_t kMostPartitionsPerChunk = 16;
  const uint64_t largest = std::min(settings_.LargestChunkBytes(), kMostPartitionsPerChunk * partition_bytes);
  return compression::ChunkBytesForWireBytes(form, partition_bytes, largest);
}

Result<TensorId> Worker::Declare(const std::string& name, DType dtype, uint64_t num_elements,
                                 const DeclareOptions& options) {
  if (name.empty()) return InvalidArgument("a tensor needs a name");
  SYNCLINE_ASSIGN_OR_RETURN(compression::Spec form, ChooseCompression(name, dtype, num_elements, options));
  {
    MutexLock lock(mu_);
    if (auto it = by_name_.find(name); it != by_name_.end()) {
      const Tensor& t = tensors_[it->second];
      if (t.dtype == dtype && t.num_elements == num_elements && t.compression.Name() == form.Name()) return it->second;
      return InvalidArgument("tensor '" + name + "' was already declared as " + DTypeName(t.dtype) + "[" +
                             std::to_string(t.num_elements) + "]" +
                             (t.compression.kind == compression::Kind::kNone ? "" : " compressed as " + t.compression.Name()));
    }
  }
  proto::TensorSpec spec;
  spec.set_name(name);
  spec.set_dtype(DTypeToWire(dtype));
  spec.set_num_elements(num_elements);
  const uint64_t chunk_bytes = ChunkBytes(form, settings_.partition_bytes);
  spec.set_partition_bytes(chunk_bytes);
  if (form.kind != compression::Kind::kNone) spec.set_compression(form.Name());
  SYNCLINE_ASSIGN_OR_RETURN(proto::DeclareReply reply, client_.Declare(spec, DefaultDeadline()));
  MutexLock lock(mu_);
  if (reply.tensor_id() >= tensors_.size()) tensors_.resize(reply.tensor_id() + 1);
  Tensor& t = tensors_[reply.tensor_id()];
  t.name = name;
  t.dtype = dtype;
  t.num_elements = num_elements;
  t.compression = form;
  t.partition = chunk_bytes;
  SetPlacement(t, t.partition, reply);
  by_name_[name] = reply.tensor_id();
  return reply.tensor_id();
}

Status Worker::Repartition(TensorId id, uint64_t partition_bytes) {
  if (partition_bytes < 64) return InvalidArgument("a partition of " + std::to_string(partition_bytes) + " bytes is below 64");
  if (partition_bytes > settings_.LargestChunkBytes())
    return InvalidArgument("a partition of " + std::to_string(partition_bytes) + " bytes is above this job's largest (" +
                           std::to_string(settings_.LargestChunkBytes()) +
                           " bytes; servers refuse larger frames): raise SYNCLINE_PARTITION_BYTES on every node");
  proto::TensorSpec spec;
  uint64_t chunk_bytes;
  {
    MutexLock lock(mu_);
    if (id >= tensors_.size() || tensors_[id].name.empty())
      return InvalidArgument("tensor id " + std::to_string(id) + " was not declared");
    Tensor& t = tensors_[id];
    chunk_bytes = ChunkBytes(t.compression, partition_bytes);
    // A compressed tensor's chunks may be the same for several partitions
    // (onebit's and top-k's, 16 partitions of values, all reach the largest
    // chunk from 256 KiB partitions on).
    if (t.by_partition.count(chunk_bytes)) {
      t.partition = chunk_bytes;
      return Status::Ok();
    }
    // Another tensor for the scheduler, with keys of its own; the name says
    // which (a mismatch across workers then names both).
    spec.set_name(t.name + " @" + std::to_string(chunk_bytes) + "B");
    spec.set_dtype(DTypeToWire(t.dtype));
    spec.set_num_elements(t.num_elements);
    spec.set_partition_bytes(chunk_bytes);
    if (t.compression.kind != compression::Kind::kNone) spec.set_compression(t.compression.Name());
  }
  SYNCLINE_ASSIGN_OR_RETURN(proto::DeclareReply reply, client_.Declare(spec, DefaultDeadline()));
  MutexLock lock(mu_);
  Tensor& t = tensors_[id];
  SetPlacement(t, chunk_bytes, reply);
  t.partition = chunk_bytes;
  return Status::Ok();
}

std::vector<TensorId> Worker::TensorIds() const {
  MutexLock lock(mu_);
  std::vector<TensorId> ids;
  for (const auto& [name, id] : by_name_) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  return ids;
}

Result<uint64_t> Worker::TensorBytes(TensorId id) {
  MutexLock lock(mu_);
  if (id >= tensors_.size() || tensors_[id].name.empty())
    return InvalidArgument("tensor id " + std::to_string(id) + " was not declared");
  return tensors_[id].num_elements * DTypeSize(tensors_[id].dtype);
}

}  // namespace syncline
