// KeyStore: the running value of async and ssp modes (a push adds to it, a
// pull reads a snapshot; in ssp a read waits for the round clock).
#include <cstring>

#include "server/key_store.h"
#include "server/key_store_rules.h"

namespace syncline {

using key_store_rules::RefuseRound;
using key_store_rules::WantsAck;

void KeyStore::AddToValue(KeyState& key, const Buffer& payload, bool average) {
  if (key.value.empty()) {
    key.value = pool_->Get(key.bytes);
    std::memset(key.value.mutable_data(), 0, key.bytes);
  }
  const size_t elements = key.bytes / DTypeSize(key.dtype);
  Buffer addend = ElementAligned(payload, key.dtype);
  if (average && options_.num_workers > 1) {
    if (!addend.writable() || addend.data() == payload.data()) {
      Buffer copy = pool_->Get(key.bytes);
      std::memcpy(copy.mutable_data(), payload.data(), key.bytes);
      addend = std::move(copy);
    }
    engine_->Scale(key.dtype, addend.mutable_data(), elements, 1.0 / options_.num_workers);
  }
  engine_->SumInto(key.dtype, key.value.mutable_data(), addend.data(), elements);
}

void KeyStore::PushAsync(KeyState& key, const Message& push, std::vector<Reply>* out) {
  AddToValue(key, push.payloads.front(), /*average=*/false);
  if (WantsAck(push)) out->push_back(Reply{push.header.sender(), ReplyTo(push, proto::PUSH_ACK)});
  if (push.header.flags() & proto::FLAG_PULL_AFTER_PUSH) {
    Message reply = ReplyTo(push, proto::PULL_REPLY);
    reply.header.set_byte_length(key.bytes);
    reply.payloads.push_back(Snapshot(key));  // later pushes change the value
    out->push_back(Reply{push.header.sender(), std::move(reply)});
  }
}

void KeyStore::PushStale(KeyState& key, const Message& push, int rank, std::vector<Reply>* out) {
  if (!key.clock) key.clock = std::make_unique<RoundClock>(contributors());
  const uint64_t number = push.header.round();
  std::string why = RefuseRound(number, key.clock->RoundsPushedByAll(), /*open=*/true);
  if (why.empty()) why = key.clock->RecordPush(rank, number);
  if (!why.empty()) {
    out->push_back(ErrorReply(push, why));
    return;
  }
  AddToValue(key, push.payloads.front(), push.header.flags() & proto::FLAG_AVERAGE);
  if (WantsAck(push)) out->push_back(Reply{push.header.sender(), ReplyTo(push, proto::PUSH_ACK)});
  if (push.header.flags() & proto::FLAG_PULL_AFTER_PUSH)
    key.stale_reads.emplace_back(number, Waiter{push.header.sender(), push.header.request_id(), rank, push.header.priority()});
  AnswerStaleReads(key, out);
  ReportIfStaleReadOrphaned(key);
}

void KeyStore::AnswerStaleReads(KeyState& key, std::vector<Reply>* out) {
  if (key.stale_reads.empty()) return;
  const uint64_t pushed_by_all = key.clock ? key.clock->RoundsPushedByAll() : 0;
  Buffer snapshot;  // one copy for every pull answered now
  std::erase_if(key.stale_reads, [&](const std::pair<uint64_t, Waiter>& read) {
    if (RoundClock::RoundsNeededToRead(read.first, *options_.ssp_staleness) > pushed_by_all) return false;
    if (snapshot.empty()) snapshot = Snapshot(key);
    out->push_back(SumReply(key, read.first, read.second, snapshot));
    return true;
  });
}

Buffer KeyStore::Snapshot(const KeyState& key) {
  Buffer copy = pool_->Get(key.bytes);
  if (key.value.empty())
    std::memset(copy.mutable_data(), 0, key.bytes);
  else
    std::memcpy(copy.mutable_data(), key.value.data(), key.bytes);
  return copy;
}

}  // namespace syncline
