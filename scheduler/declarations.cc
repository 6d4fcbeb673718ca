// The scheduler's tensor declarations: every worker declares each tensor
// identically; the scheduler places its chunks on servers, tells each server
// its chunks, and once they have recorded them, tells the workers.
#include <algorithm>

#include "common/dtype.h"
#include "compression/compressor.h"
#include "scheduler/scheduler.h"
#include "transport/wire.h"

namespace syncline {

std::string Scheduler::DescribeSpec(const proto::TensorSpec& s) {
  auto dtype = DTypeFromWire(s.dtype());
  return std::string(dtype.ok() ? DTypeName(*dtype) : "?") + "[" + std::to_string(s.num_elements()) +
         "] in chunks of " + std::to_string(s.partition_bytes()) + " bytes" +
         (s.compression().empty() ? "" : ", compressed as " + s.compression());
}

namespace {

bool SameSpec(const proto::TensorSpec& a, const proto::TensorSpec& b) {
  return a.dtype() == b.dtype() && a.num_elements() == b.num_elements() && a.partition_bytes() == b.partition_bytes() &&
         a.compression() == b.compression();
}

// Why a tensor cannot travel in the compression it was declared with, or empty.
std::string RefuseCompression(const proto::TensorSpec& s) {
  if (s.compression().empty()) return "";
  auto spec = compression::ParseSpec(s.compression());
  if (!spec.ok()) return spec.status().message();
  auto dtype = DTypeFromWire(s.dtype());
  if (!dtype.ok()) return dtype.status().message();
  if (Status st = compression::CheckDType(*spec, *dtype); !st.ok()) return st.message();
  return "";
}

}  // namespace

void Scheduler::OnDeclare(const Message& m) {
  const int32_t sender = m.header.sender();
  auto node = nodes_.find(sender);
  if (!published_ || node == nodes_.end() || node->second.info.role() != proto::WORKER) return;
  const proto::TensorSpec& spec = m.header.declare().spec();
  auto [it, fresh] = tensors_.try_emplace(spec.name());
  TensorEntry& t = it->second;
  if (fresh) {
    if (std::string why = RefuseCompression(spec); !why.empty())
      return AbortJob("tensor '" + spec.name() + "' declared by " + Describe(sender) + ": " + why, sender);
    t.spec = spec;
    t.id = next_tensor_id_++;
    auto chunks = placement_->Place(t.id, spec);
    if (!chunks.ok())
      return AbortJob("tensor '" + spec.name() + "' declared by " + Describe(sender) + ": " + chunks.status().message(),
                      sender);
    if (total_chunks_ + chunks->size() > limits_.max_chunks)
      return AbortJob("tensor '" + spec.name() + "' declared by " + Describe(sender) + " (" + DescribeSpec(spec) +
                          ") would bring the job's chunks to " + std::to_string(total_chunks_ + chunks->size()) +
                          ", over the limit of " + std::to_string(limits_.max_chunks) +
                          ": use larger partitions (SYNCLINE_PARTITION_BYTES) or fewer tensors",
                      sender);
    // Servers and workers refuse frames above the job's largest chunk at the
    // socket (transport/factory.h: NodeTransportOptions): say so now, rather
    // than let the chunk's pushes vanish there.
    for (const proto::ChunkPlacement& c : *chunks)
      if (c.length_bytes() > settings_.LargestChunkBytes())
        return AbortJob("tensor '" + spec.name() + "' declared by " + Describe(sender) + " (" + DescribeSpec(spec) +
                            ") has chunks of " + std::to_string(c.length_bytes()) + " bytes, over this job's largest (" +
                            std::to_string(settings_.LargestChunkBytes()) +
                            " bytes): give every node the same SYNCLINE_PARTITION_BYTES",
                        sender);
    total_chunks_ += chunks->size();
    t.chunks = std::move(chunks).value();
  } else if (!SameSpec(t.spec, spec)) {
    return AbortJob("mismatched declaration of tensor '" + spec.name() + "': " + Describe(sender) + " declared " +
                        DescribeSpec(spec) + ", but " + Describe(*t.declared_by.begin()) + " declared " +
                        DescribeSpec(t.spec),
                    sender);
  }
  t.declared_by.insert(sender);
  if (t.declared_by.size() < static_cast<size_t>(settings_.num_workers)) {
    t.waiting_since.try_emplace(sender, Clock::now());
    return;
  }
  t.waiting_since.clear();
  PlaceDeclared(t);
}

void Scheduler::PlaceDeclared(TensorEntry& t) {
  if (!t.placements_sent) {
    // A server accepts requests only for keys placed on it: it learns them
    // before any worker can push to them.
    t.placements_sent = true;
    std::map<int32_t, proto::DeclareReply> by_server;
    for (const auto& c : t.chunks) *by_server[c.server_id()].add_chunks() = c;
    for (auto& [server, placement] : by_server) {
      placement.set_tensor_id(t.id);
      placement.set_name(t.spec.name());
      placement.set_compression(t.spec.compression());
      t.unacknowledged.insert(server);
      Message m = MakeMessage(proto::PLACEMENT, kSchedulerId);
      *m.header.mutable_declare_reply() = std::move(placement);
      SendTo(server, std::move(m));
    }
  }
  if (t.unacknowledged.empty()) ReplyDeclared(t);
}

void Scheduler::OnPlacementAck(const Message& m) {
  const int32_t sender = m.header.sender();
  for (auto& [name, t] : tensors_) {
    if (t.id != m.header.request_id()) continue;
    if (t.unacknowledged.erase(sender) && t.unacknowledged.empty()) ReplyDeclared(t);
    return;
  }
}

void Scheduler::ReplyDeclared(const TensorEntry& t) {
  for (int32_t id : t.declared_by) {
    Message reply = MakeMessage(proto::DECLARE_REPLY, kSchedulerId);
    proto::DeclareReply* body = reply.header.mutable_declare_reply();
    body->set_tensor_id(t.id);
    for (const auto& c : t.chunks) *body->add_chunks() = c;
    body->set_name(t.spec.name());
    SendTo(id, std::move(reply));
  }
}

std::string Scheduler::TensorOfKey(uint64_t key) const {
  for (const auto& [name, t] : tensors_)
    for (size_t i = 0; i < t.chunks.size(); ++i)
      if (t.chunks[i].key() == key)
        return " [tensor '" + name + "'" +
               (t.chunks.size() > 1 ? ", chunk " + std::to_string(i) + " of " + std::to_string(t.chunks.size()) : "") +
               "]";
  return " [key " + std::to_string(key) + "]";
}

}  // namespace syncline
