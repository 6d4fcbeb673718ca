// The Endpoint conformance suite's frame: one Backend per transport this build
// has, and a fixture that starts two endpoints of it (`a`, peer id 1, and
// `b`, peer id 2) connected both ways. Every case in
// endpoint_conformance_*_test.cc runs over every backend, so a behaviour the
// Endpoint contract (transport/transport.h) promises is checked once, the
// same way, everywhere. What the contract leaves to each backend (who owns a
// received frame, whether a stuck peer pushes back, ...) is stated per backend
// in `Contract`, and the cases check each backend against its own statement.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tests/unit/transport/collector.h"
#include "tests/unit/transport/messages.h"
#include "transport/transport.h"
#include "transport/wire.h"

namespace syncline::testing {

// Where the contract leaves room, what this backend does.
struct Contract {
  // Received payload frames are the receiver's own memory (it may sum into
  // them): zmq and UCX. Loopback hands over views of the sender's memory and
  // shared memory views of the sender's segment, both read-only.
  bool receives_writable = true;
  // The receiver's frames are the sender's very Buffers (loopback): the
  // sender's payload owner lives until the receiver drops the message.
  bool shares_sender_memory = false;
  // Send to a peer whose Receiver is stuck eventually fails with
  // DeadlineExceeded (a bounded queue, with Tuning::small_queue). The design
  // asks this of every backend (docs/decisions.md: back-pressure).
  bool pushes_back_when_stuck = true;
  // Send to an address nobody listens at eventually fails with
  // DeadlineExceeded (zmq queues for a peer that may come); otherwise its
  // messages are dropped and Send succeeds.
  bool queues_for_absent_peer = false;
  // Addresses are host:port (a plain TCP socket can hold the port).
  bool tcp_port = false;
  // Flush fails with DeadlineExceeded while a stuck peer's queue on this side
  // is full. Loopback hands each message to the receiver's inbox within Send,
  // so nothing of the sender's waits: its Flush succeeds.
  bool flush_waits_for_stuck_peer = true;
};

// Options a case may ask of a backend's endpoints.
struct Tuning {
  // Per-peer send queues of a few messages, so that back-pressure shows fast.
  bool small_queue = false;
};

// Sends hand-made bytes to an endpoint's address as that backend's wire
// carries them, bypassing every sender-side check.
class RawPeer {
 public:
  virtual ~RawPeer() = default;
  // One message: an encoded header frame (any bytes) and payload frames.
  virtual void Send(const std::string& header, const std::vector<std::string>& payloads) = 0;
  // Malformed messages only this backend's wire can frame (bad framing, an
  // empty message, forged shared-memory references); returns how many it sent,
  // each of which the receiver must count as rejected.
  virtual int SendWireGarbage() = 0;
  // Bytes on a plain socket to the endpoint's port or path that are no
  // well-framed message at all. The receiver may count some of them as
  // rejected messages (how many depends on how its library frames garbage).
  virtual void SendStreamGarbage() {}
  // Makes sure everything sent has left (before the case waits for it).
  virtual void Flush() {}
};

// One transport under test. Made fresh for every test case; lives longer
// than the endpoints it makes (it may hold their network or their
// environment, e.g. UCX_TLS).
class Backend {
 public:
  virtual ~Backend() = default;
  virtual Contract contract() const = 0;
  virtual std::unique_ptr<Endpoint> Make(const Tuning& tuning) = 0;
  // A listen address for a new endpoint (any port, a fresh path).
  virtual std::string ListenSpec() = 0;
  // An address in this backend's scheme where nobody listens.
  virtual std::string AbsentAddress() = 0;
  // Called after `e` connects `peer` (another endpoint of this test, in this process).
  virtual void Colocate(Endpoint& /*e*/, PeerId /*peer*/) {}
  // A raw sender to `address`, or null if this backend has no wire to forge.
  virtual std::unique_ptr<RawPeer> Raw(const std::string& /*address*/) { return nullptr; }
};

struct BackendParam {
  std::string name;
  std::function<std::unique_ptr<Backend>()> make;
};
// Every backend this build has (endpoint_conformance_backends.cc).
std::vector<BackendParam> AllBackends();
inline void PrintTo(const BackendParam& p, std::ostream* os) { *os << p.name; }
inline std::string BackendName(const ::testing::TestParamInfo<BackendParam>& info) { return info.param.name; }

// FORGED-SENDER HOOK (issue 14): null here; tests/unit/control's
// authenticated run of the suite sets it to wrap every endpoint it makes (of
// node `self`) in the authentication decorator, and the ForgedSender* cases
// run there.
extern std::function<std::unique_ptr<Endpoint>(PeerId self, std::unique_ptr<Endpoint> e)> g_authenticate;

// An endpoint of the test, with what it received.
struct Node {
  PeerId id = 0;
  std::unique_ptr<Endpoint> endpoint;
  Collector in;
  std::string address;
  // Sends `m` in this node's name (a shared-memory reference is honoured
  // only from the colocated peer it names).
  Status Send(PeerId peer, Message m, Deadline deadline) {
    m.header.set_sender(id);
    return endpoint->Send(peer, std::move(m), deadline);
  }
  Status Connect(PeerId peer, const std::string& to) { return endpoint->Connect(peer, to); }
  EndpointStats stats() const { return endpoint->stats(); }
};

class EndpointConformance : public ::testing::TestWithParam<BackendParam> {
 protected:
  void SetUp() override;
  void TearDown() override;

  // Runs on the receiving thread before a message is collected (may block, or send).
  using Tap = std::function<void(const Message&)>;
  // A node listening at a fresh address.
  std::unique_ptr<Node> StartNode(PeerId id, const Tuning& tuning = {}, Tap tap = nullptr);
  // `from` reaches `to` under `to.id`.
  void Link(Node& from, const Node& to);
  // One message each way, so that both connections are up before a case
  // starts (UCX 1.13 may crash a process whose peer goes away while their
  // connection is still being set up; see docs/ucx.md); leaves both Collectors empty.
  void Handshake(Node& x, Node& y);
  // `a` and `b` as described above, started with `tuning` and (for b) `b_tap`.
  void StartPair(const Tuning& tuning = {}, Tap b_tap = nullptr);

  const Contract& contract() const { return contract_; }
  Backend& backend() { return *backend_; }

  std::unique_ptr<Backend> backend_;  // outlives the nodes: declared first
  Contract contract_;
  std::unique_ptr<Node> a_, b_;
};

// Time limits: generous, for a shared 2-core machine; nothing is timed tighter.
inline Deadline Soon() { return Deadline::AfterMs(10000); }
constexpr int kWaitMs = 30000;
// How far past its deadline a Send may return before it counts as hanging.
constexpr int kDeadlineSlackMs = 3000;

// A PUSH with a numbered key and request id and `bytes` of pattern payload
// (seeded by the number), for checking order and contents.
inline Message Numbered(uint64_t n, size_t bytes) {
  Message m = Push(n, bytes == 0 ? std::vector<Buffer>{} : std::vector<Buffer>{Pattern(bytes, static_cast<uint32_t>(n))});
  m.header.set_request_id(n);
  return m;
}

}  // namespace syncline::testing
