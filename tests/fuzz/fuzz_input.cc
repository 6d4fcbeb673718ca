#include "tests/fuzz/fuzz_input.h"

#include <spdlog/spdlog.h>

#include <cstdio>

#include "control/job_keys.h"
#include "transport/wire.h"

// libFuzzer calls this once: the nodes' logging (every rejected message, every
// registration) would only slow the runs down.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  spdlog::set_level(spdlog::level::off);
  return 0;
}

namespace syncline::fuzz {
namespace {

constexpr proto::Op kOps[] = {proto::REGISTER,      proto::ADDRESS_BOOK, proto::BARRIER,    proto::BARRIER_RELEASE,
                              proto::HEARTBEAT,     proto::HEARTBEAT_ACK, proto::ABORT,     proto::FINISH,
                              proto::SHUTDOWN,      proto::DECLARE,      proto::DECLARE_REPLY, proto::WORKER_FINISHED,
                              proto::PUSH,          proto::PUSH_ACK,     proto::PULL,       proto::PULL_REPLY,
                              proto::ERROR,         proto::WORKER_AT_BARRIER, proto::PLACEMENT, proto::PLACEMENT_ACK,
                              proto::WORKER_STALLED, proto::REGISTER_CHALLENGE, proto::REPLY_ACK, proto::OP_UNKNOWN};

// Mostly small values (ids, ranks, keys, rounds that exist), sometimes any.
uint64_t SmallOrAny(FuzzedDataProvider& in, uint64_t small) {
  return in.ConsumeBool() ? in.ConsumeIntegralInRange<uint64_t>(0, small) : in.ConsumeIntegral<uint64_t>();
}
int32_t SmallId(FuzzedDataProvider& in) {
  return in.ConsumeBool() ? in.ConsumeIntegralInRange<int32_t>(-1, 6) : in.ConsumeIntegral<int32_t>();
}
proto::Role AnyRole(FuzzedDataProvider& in) { return static_cast<proto::Role>(in.ConsumeIntegralInRange(0, 4)); }
proto::DType AnyDType(FuzzedDataProvider& in) { return static_cast<proto::DType>(in.ConsumeIntegralInRange(0, 5)); }

void FillSpec(FuzzedDataProvider& in, proto::TensorSpec* spec) {
  spec->set_name(in.ConsumeBool() ? "t" + std::to_string(in.ConsumeIntegralInRange(0, 3))
                                  : in.ConsumeRandomLengthString(32));
  spec->set_dtype(AnyDType(in));
  spec->set_num_elements(SmallOrAny(in, 5000));
  spec->set_partition_bytes(SmallOrAny(in, 8192));
}

void FillBody(FuzzedDataProvider& in, proto::Header& h) {
  switch (h.op()) {
    case proto::REGISTER:
    case proto::REGISTER_CHALLENGE: {
      auto* r = h.mutable_register_body();
      r->set_challenge(in.ConsumeRandomLengthString(kRegistrationChallengeBytes + 1));
      r->set_role(AnyRole(in));
      r->set_address("fuzz://" + in.ConsumeRandomLengthString(12));
      r->set_requested_rank(SmallId(in));
      r->set_hostname(in.ConsumeRandomLengthString(12));
      r->set_host_id(in.ConsumeRandomLengthString(12));
      r->set_pid(in.ConsumeIntegral<int32_t>());
      r->set_shm(in.ConsumeBool());
      break;
    }
    case proto::ADDRESS_BOOK: {
      auto* book = h.mutable_address_book();
      book->set_your_id(SmallId(in));
      book->set_heartbeat_interval_ms(in.ConsumeIntegralInRange<uint32_t>(0, 2000));
      book->set_heartbeat_timeout_ms(in.ConsumeIntegralInRange<uint32_t>(0, 20000));
      for (int n = in.ConsumeIntegralInRange(0, 5); n > 0; --n) {
        auto* node = book->add_nodes();
        node->set_id(SmallId(in));
        node->set_role(AnyRole(in));
        node->set_rank(SmallId(in));
        node->set_address("fuzz://" + in.ConsumeRandomLengthString(8));
      }
      break;
    }
    case proto::BARRIER:
    case proto::BARRIER_RELEASE:
      h.mutable_barrier()->set_group(AnyRole(in));
      h.mutable_barrier()->set_sequence(SmallOrAny(in, 3));
      break;
    case proto::ABORT: {
      auto* a = h.mutable_abort();
      a->set_reason(in.ConsumeRandomLengthString(40));
      a->set_culprit(SmallId(in));
      if (in.ConsumeBool()) a->set_address("fuzz://" + in.ConsumeRandomLengthString(8));
      if (in.ConsumeBool()) a->set_key(SmallOrAny(in, 8));
      break;
    }
    case proto::DECLARE:
      FillSpec(in, h.mutable_declare()->mutable_spec());
      break;
    case proto::DECLARE_REPLY:
    case proto::PLACEMENT: {
      auto* r = h.mutable_declare_reply();
      r->set_tensor_id(static_cast<uint32_t>(SmallOrAny(in, 4)));
      r->set_name(in.ConsumeRandomLengthString(8));
      for (int n = in.ConsumeIntegralInRange(0, 4); n > 0; --n) {
        auto* c = r->add_chunks();
        c->set_key(SmallOrAny(in, 8));
        c->set_server_id(SmallId(in));
        c->set_offset_bytes(SmallOrAny(in, 4096));
        c->set_length_bytes(SmallOrAny(in, 4096));
      }
      break;
    }
    case proto::ERROR:
      h.mutable_error()->set_message(in.ConsumeRandomLengthString(40));
      break;
    case proto::WORKER_AT_BARRIER:
      h.mutable_worker_at_barrier()->set_rank(SmallId(in));
      h.mutable_worker_at_barrier()->set_sequence(SmallOrAny(in, 3));
      h.mutable_worker_at_barrier()->set_waiting(in.ConsumeBool());
      break;
    case proto::WORKER_FINISHED:
      h.mutable_worker_finished()->set_rank(SmallId(in));
      break;
    case proto::REPLY_ACK:
      h.mutable_reply_ack()->set_bytes(SmallOrAny(in, 1 << 20));
      break;
    case proto::WORKER_STALLED: {
      auto* note = h.mutable_worker_stalled();
      note->set_stalled(in.ConsumeBool());
      note->set_waiting_for("t" + std::to_string(in.ConsumeIntegralInRange(0, 3)));
      note->set_waited_ms(SmallOrAny(in, 100000));
      for (int n = in.ConsumeIntegralInRange(0, 5); n > 0; --n) {
        auto* c = note->add_calls();
        c->set_tensor(in.ConsumeBool() ? "t" + std::to_string(in.ConsumeIntegralInRange(0, 3))
                                       : in.ConsumeRandomLengthString(8));
        c->set_push_pulls(SmallOrAny(in, 5));
      }
      break;
    }
    default:
      break;
  }
}

}  // namespace

std::optional<Message> NextMessage(FuzzedDataProvider& in) {
  proto::Header h;
  h.set_op(in.PickValueInArray(kOps));
  h.set_sender(SmallId(in));
  h.set_key(SmallOrAny(in, 8));
  h.set_round(SmallOrAny(in, 6));
  h.set_dtype(AnyDType(in));
  h.set_request_id(SmallOrAny(in, 16));
  h.set_flags(in.ConsumeIntegralInRange<uint32_t>(0, 15));
  if (in.ConsumeBool()) h.set_priority(in.ConsumeIntegral<int64_t>());
  FillBody(in, h);
  std::vector<Buffer> payloads;
  uint64_t bytes = 0;
  for (int n = in.ConsumeIntegralInRange(0, 2); n > 0; --n) {
    // Sizes near what keys hold (multiples of 2, 4, 8) more often than not.
    const size_t size = in.ConsumeBool() ? 8 * in.ConsumeIntegralInRange<size_t>(0, 64)
                                         : in.ConsumeIntegralInRange<size_t>(0, 600);
    std::string bytes_of = in.ConsumeBytesAsString(size);
    bytes_of.resize(size);  // the input may run out: zeros
    payloads.push_back(Buffer::Copy(bytes_of.data(), bytes_of.size()));
    bytes += size;
  }
  h.set_byte_length(in.ConsumeBool() ? bytes : SmallOrAny(in, 1024));
  const std::string encoded = EncodeHeader(h);
  Result<Message> decoded = DecodeMessage(encoded.data(), encoded.size(), std::move(payloads));
  if (!decoded.ok()) return std::nullopt;
  return std::move(decoded).value();
}

Result<std::string> CaptureEndpoint::Listen(const std::string& address, Receiver receiver) {
  receiver_ = std::move(receiver);
  return address;
}

Status CaptureEndpoint::Send(PeerId, Message message, Deadline) {
  // What a peer would receive must pass the wire too: a node's own replies
  // are checked here.
  const std::string encoded = EncodeHeader(message.header);
  Result<Message> decoded = DecodeMessage(encoded.data(), encoded.size(), std::move(message.payloads));
  if (!decoded.ok()) {
    std::fprintf(stderr, "a reply the wire rejected: %s\n", decoded.status().ToString().c_str());
    __builtin_trap();
  }
  if (message.header.op() == proto::REGISTER_CHALLENGE) last_challenge_ = message.header.register_body().challenge();
  ++stats_.messages_sent;
  return Status::Ok();
}

void CaptureEndpoint::Deliver(Message&& message) {
  ++stats_.messages_received;
  if (receiver_) receiver_(std::move(message));
}

}  // namespace syncline::fuzz
