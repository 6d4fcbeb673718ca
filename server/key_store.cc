#include "server/key_store.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>

#include "common/log_limiter.h"
#include "common/logging.h"
#include "server/key_store_rules.h"
#include "transport/wire.h"

namespace syncline {

using key_store_rules::RefuseRound;
using key_store_rules::WantsAck;

Reply ErrorReply(const Message& request, const std::string& why) {
  Message m = MakeMessage(proto::ERROR, -1);
  m.header.set_key(request.header.key());
  m.header.set_round(request.header.round());
  m.header.set_request_id(request.header.request_id());
  m.header.mutable_error()->set_message(why);
  SYNCLINE_LOG_WARN_LIMITED("rejecting {} of key {} from node {}: {}", proto::Op_Name(request.header.op()),
                    request.header.key(), request.header.sender(), why);
  return Reply{request.header.sender(), std::move(m)};
}

KeyStore::KeyStore(KeyStoreOptions options, SummationEngine* engine, BufferPool* pool)
    : options_(options), contributors_(options.num_workers), engine_(engine), pool_(pool) {}

KeyStore::~KeyStore() = default;

void KeyStore::Place(uint64_t key, uint64_t bytes, compression::Spec form) {
  if (form.kind != compression::Kind::kNone &&
      (bytes % sizeof(float) != 0 || bytes / sizeof(float) > std::numeric_limits<uint32_t>::max())) {
    // Not fp32 values a chunk can hold: the key stays unplaced, its requests refused.
    SYNCLINE_LOG_ERROR("key {} of {} bytes cannot travel compressed as {}", key, bytes, form.Name());
    return;
  }
  MutexLock lock(map_mu_);
  placed_[key] = Placed{bytes, form};
}

size_t KeyStore::num_keys() const {
  MutexLock lock(map_mu_);
  return keys_.size();
}

std::vector<uint64_t> KeyStore::keys() const {
  MutexLock lock(map_mu_);
  std::vector<uint64_t> out;
  out.reserve(keys_.size());
  for (const auto& [id, state] : keys_) out.push_back(id);
  return out;
}

Message KeyStore::ReplyTo(const Message& request, proto::Op op) const {
  Message m = MakeMessage(op, -1);
  m.header.set_key(request.header.key());
  m.header.set_round(request.header.round());
  m.header.set_dtype(request.header.dtype());
  m.header.set_request_id(request.header.request_id());
  m.header.set_priority(request.header.priority());
  return m;
}

KeyStore::KeyState* KeyStore::StateFor(const Message& m, std::vector<Reply>* out) {
  const DType dtype = DTypeFromWire(m.header.dtype()).value();  // validated on receipt
  const bool is_push = m.header.op() == proto::PUSH;
  KeyState* state;
  {
    MutexLock lock(map_mu_);
    auto it = keys_.find(m.header.key());
    if (it == keys_.end()) {
      Placed placed_as;
      if (options_.require_placement) {
        auto placed = placed_.find(m.header.key());
        if (placed == placed_.end()) {
          out->push_back(ErrorReply(m, "key " + std::to_string(m.header.key()) +
                                           " is not placed on this server (no declared tensor has it)"));
          return nullptr;
        }
        placed_as = placed->second;
        // A placement names bytes, not a dtype: the first request's dtype
        // must divide them, or every answer would be a malformed frame.
        if (placed_as.form.kind == compression::Kind::kNone && placed_as.bytes % DTypeSize(dtype) != 0) {
          out->push_back(ErrorReply(m, "key " + std::to_string(m.header.key()) + " holds " +
                                           std::to_string(placed_as.bytes) + " bytes, not a whole number of " +
                                           DTypeName(dtype) + " elements"));
          return nullptr;
        }
      }
      // Without a placement, a pull may overtake the first push of a key:
      // its size is then learned from that push.
      auto fresh = std::make_unique<KeyState>();
      fresh->id = m.header.key();
      // A compressed key holds fp32 values (the scheduler refuses others):
      // requests of any other dtype are refused below.
      fresh->dtype = placed_as.form.kind != compression::Kind::kNone ? DType::kFloat32 : dtype;
      fresh->bytes = placed_as.bytes;
      fresh->form = placed_as.form;
      if (fresh->compressed()) fresh->feedback = std::make_unique<compression::ErrorFeedback>(placed_as.form);
      it = keys_.emplace(m.header.key(), std::move(fresh)).first;
    }
    state = it->second.get();
  }
  if (state->bytes == 0 && is_push) state->bytes = m.header.byte_length();
  if (state->dtype != dtype) {
    out->push_back(ErrorReply(m, std::string("key holds ") + DTypeName(state->dtype) + " but this " +
                                     proto::Op_Name(m.header.op()) + " is " + DTypeName(dtype)));
    return nullptr;
  }
  if (is_push && m.header.byte_length() != state->PushBytes()) {
    out->push_back(ErrorReply(m, "push of " + std::to_string(m.header.byte_length()) + " bytes to a key of " +
                                     std::to_string(state->bytes) + " bytes" +
                                     (state->compressed() ? " compressed as " + state->form.Name() + " to " +
                                                                std::to_string(state->PushBytes()) + " bytes"
                                                          : "")));
    return nullptr;
  }
  if (state->compressed() && !(m.header.flags() & proto::FLAG_WHOLE_ROUND) &&
      (options_.async || options_.ssp_staleness)) {
    out->push_back(ErrorReply(m, "a compressed key is summed in whole rounds (bsp) only; this server keeps running "
                                 "values (async or ssp)"));
    return nullptr;
  }
  return state;
}

void KeyStore::Push(const Message& push, int rank, std::vector<Reply>* out) {
  if (rank < 0 || rank >= contributors()) {
    out->push_back(ErrorReply(push, "sender is not a worker of this job"));
    return;
  }
  if (push.payloads.size() != 1 || push.payloads.front().empty()) {
    out->push_back(ErrorReply(push, "a push carries exactly one non-empty payload frame"));
    return;
  }
  KeyState* key = StateFor(push, out);
  if (key == nullptr) return;
  const bool whole_round = push.header.flags() & proto::FLAG_WHOLE_ROUND;
  if (options_.ssp_staleness && !whole_round) return PushStale(*key, push, rank, out);
  if (options_.async && !whole_round) return PushAsync(*key, push, out);
  PushSync(*key, push, rank, out);
}

void KeyStore::PushSync(KeyState& key, const Message& push, int rank, std::vector<Reply>* out) {
  const uint64_t number = push.header.round();
  if (std::string why = RefuseRound(number, key.rounds_served_below, key.rounds.count(number)); !why.empty()) {
    out->push_back(ErrorReply(push, why));
    return;
  }
  Round& round = key.rounds[number];
  if (round.pushed.empty()) round.pushed.assign(contributors(), false);
  if (round.complete || round.pushed[rank]) {
    out->push_back(ErrorReply(push, "worker rank " + std::to_string(rank) + " already pushed round " +
                                        std::to_string(number)));
    return;
  }
  const Buffer& payload = push.payloads.front();
  const size_t elements = key.bytes / DTypeSize(key.dtype);
  if (key.compressed()) {
    if (Status taken = TakeCompressed(key, round, rank, payload); !taken.ok()) {
      if (round.pushes == 0 && round.waiting.empty()) key.rounds.erase(number);
      out->push_back(ErrorReply(push, taken.message()));
      return;
    }
  } else if (options_.num_workers == 1 && (push.header.flags() & proto::FLAG_PULL_AFTER_PUSH)) {
    // The only push is the sum, and its reply is made in this very call
    // (it may then wait for the worker's reply window): nothing is ever written into it (no second push, no averaging), so
    // even a view of the sender's memory (shared memory, loopback) serves as
    // is, and the copy is saved. (A push without its pull is copied: the
    // sender may reuse that memory once acked, long before the pull.)
    round.sum = payload;
  } else if (options_.deterministic) {
    if (round.by_rank.empty()) round.by_rank.resize(contributors());
    round.by_rank[rank] = ElementAligned(payload, key.dtype);  // the received frame itself, where aligned
  } else if (round.pushes == 0 && payload.writable() &&
             reinterpret_cast<uintptr_t>(payload.data()) % DTypeSize(key.dtype) == 0) {
    round.sum = payload;  // the received frame is ours alone: sum into it, no copy
  } else if (round.pushes == 0) {
    round.sum = pool_->Get(key.bytes);
    std::memcpy(round.sum.mutable_data(), payload.data(), key.bytes);
  } else {
    engine_->SumInto(key.dtype, round.sum.mutable_data(), ElementAligned(payload, key.dtype).data(), elements);
  }
  round.pushed[rank] = true;
  round.average = round.average || (push.header.flags() & proto::FLAG_AVERAGE);
  ++round.pushes;
  if (push.header.flags() & proto::FLAG_PULL_AFTER_PUSH)
    round.waiting.push_back(Waiter{push.header.sender(), push.header.request_id(), rank, push.header.priority()});
  if (WantsAck(push)) out->push_back(Reply{push.header.sender(), ReplyTo(push, proto::PUSH_ACK)});
  if (round.pushes < contributors()) return ReportIfOrphaned(key, number, round);
  Complete(key, number, round);
  std::vector<Waiter> waiting = std::move(round.waiting);
  for (const Waiter& w : waiting) {
    // Answer erases the round after its last pull; stop touching it then.
    auto it = key.rounds.find(number);
    if (it == key.rounds.end()) break;
    Answer(key, number, it->second, w, out);
  }
}

Status KeyStore::TakeCompressed(KeyState& key, Round& round, int rank, const Buffer& payload) {
  const size_t n = key.bytes / sizeof(float);
  const Buffer chunk = ElementAligned(payload, DType::kFloat32);  // the decoders read 4-byte aligned chunks
  const auto* in = reinterpret_cast<const std::byte*>(chunk.data());
  if (options_.deterministic) {
    // Each worker's push decoded on its own, summed in rank order at completion.
    Buffer decoded = pool_->Get(key.bytes);
    SYNCLINE_RETURN_IF_ERROR(
        compression::Decompress(key.form, in, chunk.size(), reinterpret_cast<float*>(decoded.mutable_data()), n));
    if (round.by_rank.empty()) round.by_rank.resize(contributors());
    round.by_rank[rank] = std::move(decoded);
    return Status::Ok();
  }
  if (round.pushes == 0) {
    Buffer sum = pool_->Get(key.bytes);
    SYNCLINE_RETURN_IF_ERROR(
        compression::Decompress(key.form, in, chunk.size(), reinterpret_cast<float*>(sum.mutable_data()), n));
    round.sum = std::move(sum);
    return Status::Ok();
  }
  // Decoded straight into the sum; a chunk that does not decode leaves it untouched.
  return compression::DecompressAdd(key.form, in, chunk.size(), 1.0f, reinterpret_cast<float*>(round.sum.mutable_data()),
                                    n);
}

void KeyStore::Complete(KeyState& key, uint64_t number, Round& round) {
  const size_t elements = key.bytes / DTypeSize(key.dtype);
  if (options_.deterministic && !round.by_rank.empty()) {
    round.sum = pool_->Get(key.bytes);
    std::memcpy(round.sum.mutable_data(), round.by_rank[0].data(), key.bytes);
    for (int r = 1; r < contributors(); ++r)
      engine_->SumInto(key.dtype, round.sum.mutable_data(), round.by_rank[r].data(), elements);
    round.by_rank.clear();
  }
  if (round.average && options_.num_workers > 1)
    engine_->Scale(key.dtype, round.sum.mutable_data(), elements, 1.0 / options_.num_workers);
  if (key.compressed()) {
    // Every pull of the round gets the same compressed sum; what it lost goes
    // into the next round's (the key's error feedback).
    Buffer wire = pool_->Get(key.PushBytes());
    const uint64_t seed = key.id * 0x9E3779B97F4A7C15ull ^ number;
    Status st = key.feedback->Compress(reinterpret_cast<const float*>(round.sum.data()), elements, seed,
                                       reinterpret_cast<std::byte*>(wire.mutable_data()));
    // The form and size were checked when the key was placed: this should not
    // fail; if it does, the reply is zeros, which no worker decodes (it names the error).
    if (!st.ok()) {
      SYNCLINE_LOG_ERROR("compressing the sum of key {} round {}: {}", key.id, number, st.message());
      std::memset(wire.mutable_data(), 0, wire.size());
    }
    round.sum = std::move(wire);
  }
  round.complete = true;
  if (options_.on_round_complete) options_.on_round_complete();
}

void KeyStore::Answer(KeyState& key, uint64_t number, Round& round, const Waiter& w, std::vector<Reply>* out) {
  out->push_back(SumReply(key, number, w, round.sum));  // shared, not copied; back to the pool when sent
  // A repeated pull of the same rank is answered again but counted once.
  if (round.pulled.empty()) round.pulled.assign(contributors(), false);
  if (round.pulled[w.rank]) return;
  round.pulled[w.rank] = true;
  if (++round.pulls_answered == contributors()) {
    key.rounds.erase(number);
    key.rounds_served_below = std::max(key.rounds_served_below, number + 1);
  }
}

Reply KeyStore::SumReply(const KeyState& key, uint64_t number, const Waiter& w, const Buffer& value) const {
  Message reply = MakeMessage(proto::PULL_REPLY, -1);
  reply.header.set_key(key.id);
  reply.header.set_round(number);
  reply.header.set_dtype(DTypeToWire(key.dtype));
  reply.header.set_request_id(w.request_id);
  reply.header.set_priority(w.priority);
  reply.header.set_byte_length(value.size());
  reply.payloads.push_back(value);
  return Reply{w.to, std::move(reply)};
}

Buffer KeyStore::ElementAligned(const Buffer& payload, DType dtype) {
  if (reinterpret_cast<uintptr_t>(payload.data()) % DTypeSize(dtype) == 0) return payload;
  Buffer copy = pool_->Get(payload.size());
  std::memcpy(copy.mutable_data(), payload.data(), payload.size());
  return copy;
}

void KeyStore::Pull(const Message& pull, int rank, std::vector<Reply>* out) {
  if (rank < 0 || rank >= contributors()) {
    out->push_back(ErrorReply(pull, "sender is not a worker of this job"));
    return;
  }
  KeyState* key = StateFor(pull, out);
  if (key == nullptr) return;
  const Waiter w{pull.header.sender(), pull.header.request_id(), rank, pull.header.priority()};
  const bool whole_round = pull.header.flags() & proto::FLAG_WHOLE_ROUND;
  if (options_.ssp_staleness && !whole_round) {
    if (!key->clock) key->clock = std::make_unique<RoundClock>(contributors());
    if (std::string why = RefuseRound(pull.header.round(), key->clock->RoundsPushedByAll(), /*open=*/true); !why.empty())
      return out->push_back(ErrorReply(pull, why));
    key->stale_reads.emplace_back(pull.header.round(), w);
    AnswerStaleReads(*key, out);
    return ReportIfStaleReadOrphaned(*key);
  }
  if (options_.async && !whole_round) {
    Message reply = ReplyTo(pull, proto::PULL_REPLY);
    Buffer value = Snapshot(*key);
    reply.header.set_byte_length(value.size());
    reply.payloads.push_back(std::move(value));
    out->push_back(Reply{w.to, std::move(reply)});
    return;
  }
  const uint64_t number = pull.header.round();
  if (std::string why = RefuseRound(number, key->rounds_served_below, key->rounds.count(number)); !why.empty()) {
    out->push_back(ErrorReply(pull, why));
    return;
  }
  Round& round = key->rounds[number];
  if (round.pushed.empty()) round.pushed.assign(contributors(), false);
  if (round.complete)
    Answer(*key, number, round, w, out);
  else
    round.waiting.push_back(w);
}

}  // namespace syncline
