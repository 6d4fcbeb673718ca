// Worker: which compression a declared tensor travels in, and the codec of
// each of its placements (issue 32; docs/decisions.md, Compression).
#include <algorithm>

#include "worker/worker.h"

namespace syncline {

Result<compression::Spec> Worker::ChooseCompression(const std::string& name, DType dtype, uint64_t num_elements,
                                                     const DeclareOptions& options) const {
  const bool job_wide = !options.compression.has_value();
  const std::string& text = job_wide ? settings_.compression : *options.compression;
  SYNCLINE_ASSIGN_OR_RETURN(compression::Spec form, compression::ParseSpec(text));
  const std::string what = "tensor '" + name + "' compressed as " + form.Name();
  if (form.kind == compression::Kind::kNone) return form;
  if (Status st = compression::CheckDType(form, dtype); !st.ok()) {
    if (job_wide) return compression::Spec{};  // the job's setting is for its fp32 tensors
    return st.WithContext(what);
  }
  if (num_elements * DTypeSize(dtype) < settings_.min_compress_bytes) return compression::Spec{};
  if (settings_.sync_mode == "ssp" || settings_.sync_mode == "async")
    return InvalidArgument(what + ": compressed tensors are summed in whole rounds (bsp or osp), and this job is " +
                           settings_.sync_mode);
  if ((form.kind == compression::Kind::kTopK || form.kind == compression::Kind::kRandomK) && form.ratio >= 0.5)
    return InvalidArgument(what + ": send a fraction below 0.5 (at half the values and more, the values and their "
                                  "indices take as many bytes as the tensor)");
  // A tensor whose full chunk would not shrink (a few values: the 8-byte
  // header) travels as it is, like one below the threshold.
  const uint64_t chunk_values = std::min<uint64_t>(num_elements, settings_.partition_bytes / sizeof(float));
  if (compression::CompressedBytes(form, chunk_values) >= chunk_values * sizeof(float)) return compression::Spec{};
  return form;
}

Result<bool> Worker::WouldCompress(DType dtype, uint64_t num_elements, const DeclareOptions& options) const {
  SYNCLINE_ASSIGN_OR_RETURN(compression::Spec form, ChooseCompression("(unnamed)", dtype, num_elements, options));
  return form.kind != compression::Kind::kNone;
}

void Worker::SetPlacement(Tensor& t, uint64_t partition, const proto::DeclareReply& reply) {
  Placement& p = t.by_partition[partition];
  p.chunks.assign(reply.chunks().begin(), reply.chunks().end());
  if (t.compression.kind == compression::Kind::kNone) return;
  if (!t.residual) t.residual = std::make_shared<Residual>(t.num_elements);
  std::vector<uint64_t> offsets, lengths;
  for (const auto& c : p.chunks) {
    offsets.push_back(c.offset_bytes());
    lengths.push_back(c.length_bytes());
  }
  p.codec = std::make_shared<ChunkCodec>(t.compression, offsets, lengths, t.residual);
}

}  // namespace syncline
