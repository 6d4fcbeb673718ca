// What the libFuzzer targets share: turning fuzzer bytes into the messages a
// node receives (built field by field from the schema, then encoded and
// decoded as a transport does, so only what would pass the wire arrives),
// and an in-memory Endpoint that hands them to a node synchronously and
// swallows its replies (keeping the last registration challenge).
#pragma once

#include <fuzzer/FuzzedDataProvider.h>

#include <optional>
#include <string>

#include "transport/transport.h"

namespace syncline::fuzz {

// The job token the targets' nodes are configured with (the fuzzer finds it
// among the choices for a token, and also tries others).
inline constexpr const char* kToken = "fuzz-token";

// The next message of the input: any op, with fields and a body drawn from
// `input` (small ids, keys and rounds mostly; extremes sometimes), payload
// frames included. Nothing if the wire would reject it.
std::optional<Message> NextMessage(FuzzedDataProvider& input);

// An Endpoint with no I/O: Listen keeps the receiver, Deliver calls it on the
// caller's thread, sends are counted and dropped.
class CaptureEndpoint final : public Endpoint {
 public:
  Result<std::string> Listen(const std::string& address, Receiver receiver) override;
  Status Connect(PeerId, const std::string&) override { return Status::Ok(); }
  Status Send(PeerId, Message message, Deadline) override;
  Status Flush(Deadline) override { return Status::Ok(); }
  void Close() override {}
  EndpointStats stats() const override { return stats_; }

  void Deliver(Message&& message);
  // The challenge of the newest REGISTER_CHALLENGE sent (a scheduler's).
  const std::string& last_challenge() const { return last_challenge_; }

 private:
  std::string last_challenge_;
  Receiver receiver_;
  EndpointStats stats_;
};

}  // namespace syncline::fuzz
