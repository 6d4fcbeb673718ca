// Wire encoding shared by the backends: the header frame's bytes, and the
// validation every received message passes before a Receiver sees it.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/buffer.h"
#include "common/mutex.h"
#include "common/status.h"
#include "transport/transport.h"

namespace syncline {

// Largest header frame accepted; headers carry at most an address book.
constexpr size_t kMaxHeaderBytes = 1 << 20;
// The most chunks one tensor may be cut into: its placement must fit one
// DECLARE_REPLY header, and a worker keeps a record per chunk of every
// push_pull in flight. 32768 chunks allow an 8 GiB tensor at the default 256 KiB
// partitions (32 GiB at 1 MiB: a larger tensor needs SYNCLINE_PARTITION_BYTES raised).
constexpr uint64_t kMaxChunksPerTensor = 32768;

std::string EncodeHeader(const proto::Header& header);

// Parses a header frame and checks the message is well-formed: a known op,
// byte_length equal to the payload frames' total, a valid dtype and
// dtype-aligned length on data ops, and the body each control op needs.
Result<Message> DecodeMessage(const void* header_bytes, size_t header_size, std::vector<Buffer> payloads);
Status ValidateMessage(const Message& message);

// An endpoint's EndpointStats behind a lock of their own (thread-safe).
class EndpointCounters {
 public:
  void Sent(uint64_t payload_bytes) EXCLUDES(mu_) {
    MutexLock lock(mu_);
    ++stats_.messages_sent;
    stats_.payload_bytes_sent += payload_bytes;
  }
  void Received(uint64_t payload_bytes) EXCLUDES(mu_) {
    MutexLock lock(mu_);
    ++stats_.messages_received;
    stats_.payload_bytes_received += payload_bytes;
  }
  // Payload bytes of a message counted already (or counted elsewhere).
  void MoreBytes(uint64_t sent, uint64_t received) EXCLUDES(mu_) {
    MutexLock lock(mu_);
    stats_.payload_bytes_sent += sent;
    stats_.payload_bytes_received += received;
  }
  void Rejected() EXCLUDES(mu_) {
    MutexLock lock(mu_);
    ++stats_.messages_rejected;
  }
  // Well-formed, but its proof of sender failed: also counted as rejected.
  void Unauthenticated() EXCLUDES(mu_) {
    MutexLock lock(mu_);
    ++stats_.messages_rejected;
    ++stats_.messages_unauthenticated;
  }
  EndpointStats Get() const EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return stats_;
  }

 private:
  mutable Mutex mu_;
  EndpointStats stats_ GUARDED_BY(mu_);
};

// The receive-side bookkeeping every backend shares: counts `decoded` in
// `counters`, logs why a rejected message was dropped, and returns the
// message to hand to the Receiver, or nothing.
std::optional<Message> AdmitReceived(Result<Message> decoded, EndpointCounters& counters, std::string_view where);

// Totals the payload frames' sizes of `message` (what header.byte_length must
// equal, unless the frames travel in shared memory: header.shm).
uint64_t PayloadBytes(const Message& message);

}  // namespace syncline

namespace syncline {
// A message with only `op` and `sender` set, ready for a body.
inline Message MakeMessage(proto::Op op, int32_t sender) {
  Message m;
  m.header.set_op(op);
  m.header.set_sender(sender);
  return m;
}
}  // namespace syncline
