#include "transport/wire.h"

#include <google/protobuf/stubs/logging.h>

#include "common/dtype.h"
#include "common/log_limiter.h"
#include "common/logging.h"

namespace syncline {
namespace {

// protobuf logs an error line of its own for each header whose strings are
// not UTF-8, straight to stderr: a peer could flood a node's log with them.
// Its warnings and errors go through the rate-limited warning instead; a
// fatal message still reaches the handler that was there before, and
// protobuf aborts after it as always. (protobuf's handler is process-wide:
// this is the one place Syncline sets it, once, before the first header is
// encoded or decoded.)
google::protobuf::LogHandler* previous_protobuf_handler = nullptr;

void RouteProtobufLogs() {
  static std::once_flag once;
  std::call_once(once, [] {
    previous_protobuf_handler = google::protobuf::SetLogHandler(
        [](google::protobuf::LogLevel level, const char* file, int line, const std::string& message) {
          if (level >= google::protobuf::LOGLEVEL_FATAL && previous_protobuf_handler != nullptr)
            return previous_protobuf_handler(level, file, line, message);
          SYNCLINE_LOG_WARN_LIMITED("protobuf: {}", message);
        });
  });
}

}  // namespace

std::string EncodeHeader(const proto::Header& header) {
  RouteProtobufLogs();
  return header.SerializeAsString();
}

uint64_t PayloadBytes(const Message& message) {
  uint64_t total = 0;
  for (const Buffer& b : message.payloads) total += b.size();
  return total;
}

namespace {

bool IsDataOp(proto::Op op) {
  return op == proto::PUSH || op == proto::PUSH_ACK || op == proto::PULL || op == proto::PULL_REPLY ||
         op == proto::LOCAL_PUSH || op == proto::LOCAL_SUM;
}

bool CarriesPayload(proto::Op op) {
  return op == proto::PUSH || op == proto::PULL_REPLY || op == proto::LOCAL_PUSH || op == proto::LOCAL_SUM;
}

// The body a control op must carry, or 0 if none is required.
proto::Header::BodyCase RequiredBody(proto::Op op) {
  switch (op) {
    case proto::REGISTER:
    case proto::REGISTER_CHALLENGE: return proto::Header::kRegisterBody;
    case proto::ADDRESS_BOOK: return proto::Header::kAddressBook;
    case proto::BARRIER:
    case proto::BARRIER_RELEASE: return proto::Header::kBarrier;
    case proto::ABORT: return proto::Header::kAbort;
    case proto::DECLARE: return proto::Header::kDeclare;
    case proto::DECLARE_REPLY:
    case proto::PLACEMENT: return proto::Header::kDeclareReply;
    case proto::WORKER_AT_BARRIER: return proto::Header::kWorkerAtBarrier;
    case proto::ERROR: return proto::Header::kError;
    case proto::WORKER_FINISHED: return proto::Header::kWorkerFinished;
    case proto::REPLY_ACK: return proto::Header::kReplyAck;
    default: return proto::Header::BODY_NOT_SET;
  }
}

}  // namespace

Status ValidateMessage(const Message& m) {
  const proto::Header& h = m.header;
  if (!proto::Op_IsValid(h.op()) || h.op() == proto::OP_UNKNOWN)
    return InvalidArgument("unknown op " + std::to_string(h.op()));
  uint64_t bytes = PayloadBytes(m);
  if (h.has_shm()) {
    if (!m.payloads.empty()) return InvalidArgument("a shared-memory message carries no payload frames");
    bytes = 0;
    for (uint64_t l : h.shm().frame_lengths()) bytes += l;
  }
  if (h.byte_length() != bytes)
    return InvalidArgument("header says " + std::to_string(h.byte_length()) + " payload bytes, frames hold " +
                           std::to_string(bytes));
  if (!CarriesPayload(h.op()) && bytes != 0)
    return InvalidArgument(proto::Op_Name(h.op()) + " must not carry a payload");
  if (IsDataOp(h.op())) {
    auto dtype = DTypeFromWire(h.dtype());
    if (!dtype.ok()) return dtype.status().WithContext(proto::Op_Name(h.op()));
    if (bytes % DTypeSize(*dtype) != 0)
      return InvalidArgument(proto::Op_Name(h.op()) + " payload of " + std::to_string(bytes) +
                             " bytes is not a whole number of " + DTypeName(*dtype) + " elements");
  }
  if (auto body = RequiredBody(h.op()); body != proto::Header::BODY_NOT_SET && h.body_case() != body)
    return InvalidArgument(proto::Op_Name(h.op()) + " lacks its body");
  return Status::Ok();
}

std::optional<Message> AdmitReceived(Result<Message> decoded, EndpointCounters& counters, std::string_view where) {
  if (decoded.ok()) {
    counters.Received(PayloadBytes(*decoded));
    return std::move(decoded).value();
  }
  counters.Rejected();
  SYNCLINE_LOG_WARN_LIMITED("{}: dropping malformed message: {}", where, decoded.status().message());
  return std::nullopt;
}

Result<Message> DecodeMessage(const void* header_bytes, size_t header_size, std::vector<Buffer> payloads) {
  RouteProtobufLogs();
  if (header_size > kMaxHeaderBytes)
    return InvalidArgument("header frame of " + std::to_string(header_size) + " bytes exceeds the limit");
  Message m;
  if (!m.header.ParseFromArray(header_bytes, static_cast<int>(header_size)))
    return InvalidArgument("header frame of " + std::to_string(header_size) + " bytes is not a valid header");
  m.payloads = std::move(payloads);
  SYNCLINE_RETURN_IF_ERROR(ValidateMessage(m));
  return m;
}

}  // namespace syncline
