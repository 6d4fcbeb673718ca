#include "worker/local_reduce.h"

#include <algorithm>
#include <cstring>

#include "common/log_limiter.h"
#include "common/logging.h"
#include "metrics/common_metrics.h"
#include "summation/kernels.h"
#include "transport/wire.h"
#include "worker/operation.h"

namespace syncline {
namespace {
// Chunks other workers of the host may send ahead of this worker's own
// push_pull of them (a peer a few steps ahead). Beyond it the job ends: a
// peer that far ahead is not making the same push_pull calls.
constexpr size_t kMaxEarly = size_t{1} << 16;
}  // namespace

LocalReducer::LocalReducer(Endpoint* endpoint, const SchedulerClient* control, LocalGroup group,
                           std::vector<int32_t> peer_ids, int request_timeout_ms, Push push, Abort abort,
                           MetricsRegistry& metrics)
    : endpoint_(endpoint),
      control_(control),
      group_(std::move(group)),
      peer_ids_(std::move(peer_ids)),
      request_timeout_ms_(request_timeout_ms),
      push_(std::move(push)),
      abort_(std::move(abort)),
      rejected_(ErrorCounter(metrics, "local_reduce_rejected")),
      local_bytes_(metrics.AddCounter("syncline_local_reduce_sent_bytes_total",
                                      "Bytes this worker sent to the other workers of its host (local reduce)")),
      gate_(std::make_shared<Gate>()),
      finished_(group_.local_size, false),
      at_barrier_(group_.local_size),
      parts_([this](ChunkTask&& chunk) { SendPart(chunk); },
             [this](ChunkTask&& chunk, const Status& why) { DropPart(chunk, why); }) {
  MutexLock lock(gate_->mu);
  gate_->reducer = this;
}

LocalReducer::~LocalReducer() {
  {
    MutexLock lock(gate_->mu);
    gate_->reducer = nullptr;
  }
  parts_.Stop(Aborted("the worker's local reduce stopped"));
  thread_.Shutdown();
}

int LocalReducer::LocalRankOf(int32_t node) const {
  auto it = std::find(peer_ids_.begin(), peer_ids_.end(), node);
  return it == peer_ids_.end() ? -1 : static_cast<int>(it - peer_ids_.begin());
}

Message LocalReducer::Header(proto::Op op, const ChunkTask& chunk) const {
  Message m = MakeMessage(op, control_->my_id());
  m.header.set_key(chunk.key);
  m.header.set_round(chunk.round);
  m.header.set_dtype(DTypeToWire(chunk.dtype));
  m.header.set_priority(chunk.priority);
  return m;
}

void LocalReducer::Post(ChunkTask&& chunk) {
  const RoundKey id{chunk.key, chunk.round};
  const int owner = OwnerOf(chunk.key);
  std::optional<Status> failed;
  std::string owner_absent;
  {
    MutexLock lock(mu_);
    failed = failed_;
    if (!failed && owner != group_.local_rank) {
      owner_absent = AbsenceLocked(owner);
      if (owner_absent.empty()) awaiting_[id] = Awaiting{chunk.op, chunk.index, owner, chunk.posted_us};
    }
  }
  if (failed) return chunk.op->Fail(*failed);
  if (!owner_absent.empty())  // this push_pull waits nowhere here: it fails with the job's reason
    return chunk.op->Fail(ReportAbsentPeer(owner, owner_absent, id.second, chunk.op->tensor_name()));
  if (owner == group_.local_rank) {
    std::shared_ptr<Operation> op = chunk.op;
    Status queued = thread_.Submit(0, [this, id, chunk = std::move(chunk)]() mutable {
      Gather(id, group_.local_rank, std::nullopt, std::move(chunk), "");
    });
    if (!queued.ok()) op->Fail(queued.WithContext("local reduce"));
    return;
  }
  // Another worker pushes this chunk for the host: it gets this worker's copy,
  // sent from a thread of ours (a send may copy the chunk into shared memory:
  // not on the caller's, which is the framework's backward pass).
  parts_.Post(std::move(chunk));
}

void LocalReducer::DropPart(const ChunkTask& chunk, const Status& why) {
  {
    MutexLock lock(mu_);
    awaiting_.erase({chunk.key, chunk.round});
  }
  chunk.op->Fail(why.WithContext("local reduce"));
}

std::string LocalReducer::FailedHere(const Operation& op, const std::string& role) const {
  const std::optional<Status> why = op.failure();
  return "the push_pull of tensor '" + op.tensor_name() + "' failed on worker " +
         std::to_string(group_.ranks[group_.local_rank]) + role + (why ? ": " + why->message() : std::string());
}

void LocalReducer::SendPart(const ChunkTask& chunk) {
  const RoundKey id{chunk.key, chunk.round};
  const int owner = OwnerOf(chunk.key);
  std::optional<Buffer> view = chunk.op->RawView(chunk.index);
  if (!control_->health().ok()) return;  // the abort fails what waits, here and at the pusher
  Message m = Header(proto::LOCAL_PUSH, chunk);
  if (view) {
    m.header.set_byte_length(view->size());
    m.payloads.push_back(std::move(*view));
  } else {
    // This push_pull failed already (another chunk's error): the pusher must
    // not wait for this part, nor its host's other workers for the sum.
    m.header.mutable_error()->set_message(FailedHere(*chunk.op, ""));
  }
  Status st = endpoint_->Send(peer_ids_[owner], std::move(m), Deadline::AfterMs(request_timeout_ms_));
  if (st.ok() && view) local_bytes_.Add(double(chunk.length));
  if (st.ok()) return;
  {
    MutexLock lock(mu_);
    awaiting_.erase(id);
  }
  const std::string why = "passing chunk " + std::to_string(chunk.index) + " of tensor '" + chunk.op->tensor_name() +
                          "' to " + control_->Describe(peer_ids_[owner]) + " (local reduce): " + st.message();
  chunk.op->Fail(Internal(why));
  // The pusher would wait for this part in vain.
  if (control_->health().ok()) End(why, owner);
}

bool LocalReducer::Handle(Message& m) {
  const proto::Op op = m.header.op();
  if (op != proto::LOCAL_PUSH && op != proto::LOCAL_SUM && op != proto::LOCAL_FINISHED &&
      op != proto::LOCAL_AT_BARRIER)
    return false;
  const int from = LocalRankOf(m.header.sender());
  if (from < 0 || from == group_.local_rank) {
    rejected_.Add();
    SYNCLINE_LOG_WARN_LIMITED("ignoring {} from node {}: not another worker of this host", proto::Op_Name(op),
                              m.header.sender());
    return true;
  }
  if (op == proto::LOCAL_SUM) {
    OnSum(m, from);
    return true;
  }
  Status queued;
  if (op == proto::LOCAL_FINISHED || op == proto::LOCAL_AT_BARRIER) {
    // After that peer's earlier LOCAL_PUSHes, which queue on the same thread.
    std::optional<uint64_t> barrier;
    if (op == proto::LOCAL_AT_BARRIER) barrier = m.header.round();
    queued = thread_.Submit(0, [this, from, barrier] { OnPeerAbsent(from, barrier); });
  } else if (const bool failed = m.header.has_error();
             (failed ? !m.payloads.empty() : m.payloads.size() != 1 || m.payloads.front().empty()) ||
             OwnerOf(m.header.key()) != group_.local_rank) {
    rejected_.Add();
    SYNCLINE_LOG_WARN_LIMITED("ignoring LOCAL_PUSH of key {} from node {}: {}", m.header.key(), m.header.sender(),
                              OwnerOf(m.header.key()) != group_.local_rank ? "this worker does not push that key"
                                                                           : "neither one payload nor an error");
    return true;
  } else {
    const RoundKey id{m.header.key(), m.header.round()};
    // A failed part (its sender's push_pull failed) stands as an empty buffer beside its error.
    Buffer part = failed ? Buffer() : std::move(m.payloads.front());
    std::string failure = failed ? m.header.error().message() : "";
    queued = thread_.Submit(0, [this, id, from, part = std::move(part), failure = std::move(failure)]() mutable {
      Gather(id, from, std::move(part), std::nullopt, std::move(failure));
    });
  }
  if (!queued.ok()) SYNCLINE_LOG_WARN_LIMITED("dropping {} from node {}: {}", proto::Op_Name(op), m.header.sender(), queued.message());
  return true;
}

void LocalReducer::Gather(const RoundKey& id, int from, std::optional<Buffer> part, std::optional<ChunkTask> posted,
                          std::string failure) {
  std::optional<Status> failed;
  int missing = -1;
  std::string absence, tensor;
  std::optional<Gathering> complete;
  bool duplicate = false, too_many = false;
  {
    MutexLock lock(mu_);
    failed = failed_;
    if (!failed && finished_self_) {
      // This worker shut down: a part drops here (see AnnounceFinished).
      if (posted) failed = Aborted("push_pull of tensor '" + posted->op->tensor_name() + "' after Shutdown");
      else return;
    }
    const bool fresh = !gathering_.count(id);
    too_many = !failed && fresh && !posted && early_ >= kMaxEarly;
    if (!failed && !too_many) {
      Gathering& g = gathering_[id];
      if (fresh) g.by_local_rank.resize(group_.local_size);
      if (fresh && !posted) ++early_;
      if (!fresh && posted && !g.mine) --early_;
      if (posted) {
        g.mine = std::move(posted);
      } else if (g.by_local_rank[from]) {
        duplicate = true;
      } else {
        g.by_local_rank[from] = std::move(part);
        if (!failure.empty() && g.failure.empty()) g.failure = std::move(failure);
        ++g.arrived;
      }
      if (g.mine) {
        tensor = g.mine->op->tensor_name();
        for (int p = 0; p < group_.local_size && missing < 0; ++p)
          if (p != group_.local_rank && !g.by_local_rank[p] && !(absence = AbsenceLocked(p)).empty()) missing = p;
        if (g.arrived == group_.local_size - 1) {
          complete = std::move(g);
          gathering_.erase(id);
        }
      }
    }
  }
  if (failed) {
    if (posted) posted->op->Fail(*failed);
    return;
  }
  if (duplicate) {
    rejected_.Add();
    SYNCLINE_LOG_WARN_LIMITED("ignoring a second LOCAL_PUSH of key {} round {} from {}", id.first, id.second,
                              control_->Describe(peer_ids_[from]));
  }
  if (too_many)
    return End("worker " + std::to_string(group_.ranks[from]) + " sent more than " + std::to_string(kMaxEarly) +
                   " chunks ahead of worker " + std::to_string(group_.ranks[group_.local_rank]) +
                   " on their host (local reduce): every worker must make the same push_pull calls",
               from);
  if (missing >= 0) {
    (void)ReportAbsentPeer(missing, absence, id.second, tensor);
    return;
  }
  if (complete) SumAndPush(std::move(*complete));
}

void LocalReducer::SumAndPush(Gathering g) {
  ChunkTask chunk = std::move(*g.mine);
  ChunkTask header = chunk;  // what the sum's messages say
  header.op.reset();
  if (!g.failure.empty()) {
    // A part failed: so does the chunk, here and for the host's other workers.
    const Status failed = Internal("tensor '" + chunk.op->tensor_name() + "', chunk " + std::to_string(chunk.index) +
                                   ": " + g.failure);
    chunk.op->Fail(failed);
    return SendSum(header, std::nullopt, failed);
  }
  for (int p = 0; p < group_.local_size; ++p) {
    if (p == group_.local_rank || g.by_local_rank[p]->size() == chunk.length) continue;
    const std::string why = "worker " + std::to_string(group_.ranks[p]) + " passed " +
                            std::to_string(g.by_local_rank[p]->size()) + " bytes of chunk " +
                            std::to_string(chunk.index) + " of tensor '" + chunk.op->tensor_name() + "', which has " +
                            std::to_string(chunk.length) + ": the workers of a host declared it differently";
    End(why, p);  // the job is over before the caller hears, so its Shutdown sends no FINISH first
    return chunk.op->Fail(InvalidArgument(why));
  }
  const size_t elements = chunk.length / DTypeSize(chunk.dtype);
  const bool summed = chunk.op->SumLocally(chunk.index, [&](uint8_t* target) {
    for (int p = 0; p < group_.local_size; ++p) {
      if (p == group_.local_rank) continue;
      const Buffer& part = *g.by_local_rank[p];
      if (reinterpret_cast<uintptr_t>(part.data()) % DTypeSize(chunk.dtype) == 0) {
        kernels::SumInto(chunk.dtype, target, part.data(), elements);
      } else {
        // The kernels read whole elements at their alignment.
        Buffer aligned = Buffer::Zeros(part.size());
        std::memcpy(aligned.mutable_data(), part.data(), part.size());
        kernels::SumInto(chunk.dtype, target, aligned.data(), elements);
      }
    }
  });
  g.by_local_rank.clear();  // the peers' copies: their memory is theirs again
  if (!summed) {
    // This worker's push_pull failed already; the others must not wait for the sum.
    return SendSum(header, std::nullopt, Aborted(FailedHere(*chunk.op, ", which pushes it for this host")));
  }
  header.on_sum = nullptr;
  if (timeline_ && chunk.posted_us > 0) {
    // From here the credit scheduler's wait ("queued", by KvClient).
    const int64_t now = Timeline::NowUs();
    if (timeline_->recording())
      timeline_->Span("gather", "chunk", chunk.op->tensor_name() + " #" + std::to_string(chunk.index),
                      chunk.posted_us, now);
    chunk.posted_us = now;
  }
  // Called on the endpoint's receiving thread or the chunk scheduler's: the
  // sends go from ours. Through the gate, which closes when this reducer goes
  // (the chunk scheduler may outlive it by one admission).
  chunk.on_sum = [gate = gate_, header](const Buffer& sum) {
    MutexLock lock(gate->mu);
    if (gate->reducer) gate->reducer->QueueSum(header, sum, Status::Ok());
  };
  chunk.on_fail = [gate = gate_, header](const Status& error) {
    MutexLock lock(gate->mu);
    if (gate->reducer) gate->reducer->QueueSum(header, std::nullopt, error);
  };
  push_(std::move(chunk));
}

void LocalReducer::QueueSum(const ChunkTask& chunk, const std::optional<Buffer>& sum, const Status& error) {
  Status queued = thread_.Submit(0, [this, chunk, sum, error] { SendSum(chunk, sum, error); });
  if (!queued.ok()) SYNCLINE_LOG_WARN_LIMITED("not passing on the outcome of key {}: {}", chunk.key, queued.message());
}

void LocalReducer::SendSum(const ChunkTask& chunk, const std::optional<Buffer>& sum, const Status& error) {
  for (int p = 0; p < group_.local_size; ++p) {
    if (p == group_.local_rank) continue;
    Message m = Header(proto::LOCAL_SUM, chunk);
    if (sum) {
      m.header.set_byte_length(sum->size());
      m.payloads.push_back(*sum);
    } else {
      m.header.mutable_error()->set_message(error.message());
    }
    Status st = endpoint_->Send(peer_ids_[p], std::move(m), Deadline::AfterMs(request_timeout_ms_));
    if (st.ok()) {
      local_bytes_.Add(double(sum ? sum->size() : 0));
    } else if (control_->health().ok()) {
      End("passing the sum of key " + std::to_string(chunk.key) + " to " + control_->Describe(peer_ids_[p]) +
              " (local reduce): " + st.message(),
          p);
    }
  }
}

void LocalReducer::OnSum(Message& m, int from) {
  const RoundKey id{m.header.key(), m.header.round()};
  const bool failed = m.header.has_error();
  Awaiting waiting;
  if (failed || m.payloads.size() == 1) {
    MutexLock lock(mu_);
    auto it = awaiting_.find(id);
    if (it != awaiting_.end() && it->second.owner == from) {
      waiting = std::move(it->second);
      awaiting_.erase(it);
    }
  }
  if (!waiting.op) {
    rejected_.Add();
    SYNCLINE_LOG_WARN_LIMITED("ignoring LOCAL_SUM of key {} round {} from node {}: {}", id.first, id.second,
                              m.header.sender(),
                              failed || m.payloads.size() == 1 ? "no chunk waits for it from there"
                                                               : "neither a sum nor an error");
    return;
  }
  if (failed) {
    return waiting.op->Fail(Internal("tensor '" + waiting.op->tensor_name() + "', chunk " +
                                     std::to_string(waiting.index) + ": " + m.header.error().message() +
                                     " (passed on by " + control_->Describe(m.header.sender()) +
                                     ", which pushes it for this host)"));
  }
  if (timeline_ && waiting.posted_us > 0 && timeline_->recording())
    timeline_->Span("local", "chunk", waiting.op->tensor_name() + " #" + std::to_string(waiting.index),
                    waiting.posted_us, Timeline::NowUs());
  waiting.op->OnReply(waiting.index, std::move(m.payloads.front()));
}

}  // namespace syncline
