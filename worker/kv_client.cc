#include "worker/kv_client.h"

#include "common/log_limiter.h"
#include "common/logging.h"
#include "transport/wire.h"
#include "worker/operation.h"

namespace syncline {

KvClient::KvClient(Endpoint* endpoint, const SchedulerClient* control, int request_timeout_ms, Release release,
                   MetricsRegistry& metrics)
    : endpoint_(endpoint),
      control_(control),
      request_timeout_ms_(request_timeout_ms),
      release_(std::move(release)),
      traffic_(TrafficCounters::Register(metrics)),
      unknown_replies_(ErrorCounter(metrics, "reply_to_unknown_request")),
      acks_([this](int32_t server, uint64_t bytes) {
        Message ack = MakeMessage(proto::REPLY_ACK, control_->my_id());
        ack.header.mutable_reply_ack()->set_bytes(bytes);
        return endpoint_->Send(server, std::move(ack), Deadline::AfterMs(request_timeout_ms_));
      }) {}

uint64_t KvClient::TakeCreditLocked(InFlight& entry) {
  if (!entry.holds_credit) return 0;
  entry.holds_credit = false;
  return entry.bytes;
}

void KvClient::Send(ChunkTask&& chunk) {
  const uint64_t request = next_request_++;
  {
    MutexLock lock(mu_);
    in_flight_[request] = InFlight{chunk.op, chunk.index, chunk.server, chunk.WireBytes(), true, chunk.posted_us,
                                   timeline_ ? Timeline::NowUs() : 0, 0, chunk.on_sum, chunk.on_fail};
  }
  Message m = MakeMessage(proto::PUSH, control_->my_id());
  m.header.set_key(chunk.key);
  m.header.set_round(chunk.round);
  m.header.set_dtype(DTypeToWire(chunk.dtype));
  m.header.set_request_id(request);
  m.header.set_priority(chunk.priority);
  m.header.set_flags(proto::FLAG_PULL_AFTER_PUSH | proto::FLAG_ACK_PUSH |
                     (chunk.average ? proto::FLAG_AVERAGE : 0) | (chunk.whole_round ? proto::FLAG_WHOLE_ROUND : 0));
  // A compressed chunk's randomk indices differ by worker, key and round.
  const uint64_t seed = (chunk.key * 0x9E3779B97F4A7C15ull) ^ (chunk.round << 20) ^ uint64_t(control_->my_rank());
  std::optional<Buffer> view = chunk.op->SendView(chunk.index, seed);
  uint64_t sent_bytes = 0;
  // Registered first, so an abort's FailAll either sees this chunk or has
  // already marked the job unhealthy.
  Status st = view ? control_->health() : Aborted("the push_pull already failed");
  if (st.ok()) {
    sent_bytes = view->size();
    m.header.set_byte_length(sent_bytes);
    m.payloads.push_back(std::move(*view));
    st = endpoint_->Send(chunk.server, std::move(m), Deadline::AfterMs(request_timeout_ms_));
  }
  if (st.ok()) {
    traffic_.pushed_chunks.Add();
    traffic_.pushed_bytes.Add(double(sent_bytes));
    return;
  }
  uint64_t credit = 0;
  {
    MutexLock lock(mu_);
    if (auto it = in_flight_.find(request); it != in_flight_.end()) {
      credit = TakeCreditLocked(it->second);
      in_flight_.erase(it);
    }
  }
  if (credit > 0) release_(credit);
  const Status failed = st.WithContext("pushing tensor '" + chunk.op->tensor_name() + "' to " +
                                       control_->Describe(chunk.server));
  if (chunk.on_fail) chunk.on_fail(failed);
  chunk.op->Fail(failed);
}

bool KvClient::Handle(Message& m) {
  const proto::Op op = m.header.op();
  if (op != proto::PUSH_ACK && op != proto::PULL_REPLY && op != proto::ERROR) return false;
  // The server counts this sum against its window to us until we say it
  // came, whether or not a chunk still waits for it (a late reply after a
  // failure counts too).
  if (op == proto::PULL_REPLY && (m.header.flags() & proto::FLAG_ACK_REPLY))
    acks_.Note(m.header.sender(), m.header.byte_length());
  InFlight entry;
  uint64_t credit = 0;
  {
    MutexLock lock(mu_);
    auto it = in_flight_.find(m.header.request_id());
    if (it == in_flight_.end() || it->second.server != m.header.sender()) {
      unknown_replies_.Add();
      SYNCLINE_LOG_WARN_LIMITED("ignoring {} for unknown request {} from node {}", proto::Op_Name(op),
                        m.header.request_id(), m.header.sender());
      return true;
    }
    credit = TakeCreditLocked(it->second);
    if (timeline_ && op == proto::PUSH_ACK) it->second.acked_us = Timeline::NowUs();
    if (op != proto::PUSH_ACK) {
      entry = std::move(it->second);
      in_flight_.erase(it);
    }
  }
  if (credit > 0) release_(credit);
  if (op == proto::PUSH_ACK) return true;
  if (op == proto::ERROR || m.payloads.size() != 1) {
    const Status failed = op == proto::ERROR
                              ? Internal(control_->Describe(entry.server) + " rejected chunk " +
                                         std::to_string(entry.chunk) + " of tensor '" + entry.op->tensor_name() +
                                         "': " + m.header.error().message())
                              : Internal("malformed reply for tensor '" + entry.op->tensor_name() + "'");
    if (entry.on_fail) entry.on_fail(failed);
    entry.op->Fail(failed);
  } else {
    traffic_.pulled_chunks.Add();
    traffic_.pulled_bytes.Add(double(m.payloads.front().size()));
    if (timeline_) Trace(entry, Timeline::NowUs());
    if (entry.on_sum) entry.on_sum(m.payloads.front());
    entry.op->OnReply(entry.chunk, std::move(m.payloads.front()));
  }
  return true;
}

void KvClient::Trace(const InFlight& chunk, int64_t replied_us) const {
  if (!timeline_->recording()) return;  // outside the traced steps: build nothing
  const std::string track = chunk.op->tensor_name() + " #" + std::to_string(chunk.chunk);
  if (chunk.posted_us > 0) timeline_->Span("queued", "chunk", track, chunk.posted_us, chunk.sent_us);
  const int64_t acked = chunk.acked_us > 0 ? chunk.acked_us : replied_us;
  timeline_->Span("push", "chunk", track, chunk.sent_us, acked);
  timeline_->Span("sum", "chunk", track, acked, replied_us);
}

void KvClient::FailAll(const Status& status) {
  std::unordered_map<uint64_t, InFlight> failed;
  uint64_t credit = 0;
  {
    MutexLock lock(mu_);
    failed.swap(in_flight_);
    for (auto& [request, entry] : failed) credit += TakeCreditLocked(entry);
  }
  if (credit > 0) release_(credit);
  for (auto& [request, entry] : failed) entry.op->Fail(status);
}

}  // namespace syncline
