// Endpoint conformance, failures: listening on an address in use, send
// deadlines against absent and stuck peers, Close, peer loss, and malformed
// or forged input, over every backend (fixture: endpoint_conformance.h).
// Where a backend does not do what the contract or the design asks, the case
// checks what does hold and then skips with "FINDING (<backend>)" (none left).
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "tests/unit/transport/endpoint_conformance.h"

namespace syncline::testing {
namespace {

using ::testing::HasSubstr;
using Conformance = EndpointConformance;

// A message numbered `n` with a shared 64 KiB payload (or 8 bytes): traffic
// whose order matters but whose contents need not be made anew each time.
Message Filler(uint64_t n, bool large) {
  static const Buffer k64 = Pattern(64 << 10, 64), k8 = Pattern(8, 8);
  Message m = Push(n, {large ? k64 : k8});
  m.header.set_request_id(n);
  return m;
}

// Runs `send`, checking it returns by its deadline (plus slack).
Status Timed(const Deadline& deadline, const std::function<Status()>& send) {
  Status st = send();
  const auto late = Clock::now() - deadline.at();
  EXPECT_LE(std::chrono::duration_cast<Millis>(late).count(), kDeadlineSlackMs)
      << "Send returned long after its deadline: " << st.ToString();
  return st;
}

TEST_P(Conformance, ListenOnAnAddressInUseIsUnavailableNamingIt) {
  StartPair();
  Collector c_in;
  std::unique_ptr<Endpoint> c = backend().Make({});
  auto st = c->Listen(b_->address, c_in.receiver());
  ASSERT_FALSE(st.ok()) << "listened on " << *st;
  EXPECT_EQ(st.status().code(), StatusCode::kUnavailable) << st.status().ToString();
  EXPECT_THAT(st.status().message(), HasSubstr(b_->address));
  EXPECT_THAT(st.status().message(), HasSubstr("in use"));
  c->Close();
  // The endpoint that holds the address is unaffected.
  ASSERT_TRUE(a_->Send(2, MakeMessage(proto::HEARTBEAT, 1), Soon()).ok());
  EXPECT_TRUE(b_->in.WaitFor(1, kWaitMs));
}

TEST_P(Conformance, AnAddressIsFreeAgainOnceItsListenerClosed) {
  // For ipc:// this is a socket file left behind by a closed endpoint (or a
  // dead process): nobody accepts on it, so a new endpoint may take it over.
  StartPair();
  const std::string address = b_->address;
  b_->endpoint->Close();
  b_->endpoint.reset();
  if (contract().tcp_port) GTEST_SKIP() << "a freed TCP port may be taken by anyone meanwhile";
  Collector c_in;
  std::unique_ptr<Endpoint> c = backend().Make({});
  if (g_authenticate) c = g_authenticate(3, std::move(c));
  auto st = c->Listen(address, c_in.receiver());
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  ASSERT_TRUE(a_->Connect(3, *st).ok());
  ASSERT_TRUE(a_->Send(3, MakeMessage(proto::HEARTBEAT, 1), Soon()).ok());
  EXPECT_TRUE(c_in.WaitFor(1, kWaitMs));
  c->Close();
}

TEST_P(Conformance, ListenOnAPortHeldByAPlainSocketIsUnavailableNamingIt) {
  if (!contract().tcp_port) GTEST_SKIP() << "addresses of this backend have no TCP port";
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  socklen_t len = sizeof(sa);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len), 0);
  std::string address = backend().ListenSpec();
  address = address.substr(0, address.rfind(':') + 1) + std::to_string(ntohs(sa.sin_port));
  std::unique_ptr<Endpoint> e = backend().Make({});
  auto st = e->Listen(address, [](Message&&) {});
  close(fd);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(st.status().message(), HasSubstr(address));
}

TEST_P(Conformance, SendToAnAbsentPeerReturnsByItsDeadline) {
  StartPair({.small_queue = true});
  ASSERT_TRUE(a_->Connect(9, backend().AbsentAddress()).ok());
  int ok = 0, deadline_exceeded = 0;
  for (int i = 0; i < 64 && deadline_exceeded < 3; ++i) {
    const Deadline deadline = Deadline::AfterMs(200);
    Status st = Timed(deadline, [&] { return a_->Send(9, Filler(i, true), deadline); });
    if (st.ok()) {
      ++ok;
    } else {
      EXPECT_EQ(st.code(), StatusCode::kDeadlineExceeded) << st.ToString();
      ++deadline_exceeded;
    }
  }
  if (contract().queues_for_absent_peer) {
    EXPECT_GT(deadline_exceeded, 0) << "a bounded queue for a peer that may still come";
  } else {
    EXPECT_EQ(deadline_exceeded, 0) << "messages to an unreachable peer are dropped";
  }
  // Other peers are unaffected, and Close does not wait on the absent one.
  ASSERT_TRUE(a_->Send(2, Push(1, {Pattern(8, 1)}), Soon()).ok());
  EXPECT_TRUE(b_->in.WaitFor(1, kWaitMs));
  const auto start = Clock::now();
  a_->endpoint->Close();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(10));
}

TEST_P(Conformance, SendToAStuckPeerReturnsByItsDeadlineAndLosesNothingItAccepted) {
  std::atomic<bool> hold{false};
  StartPair({.small_queue = true}, [&](const Message&) {
    const auto give_up = Clock::now() + std::chrono::seconds(20);
    while (hold.load() && Clock::now() < give_up) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  hold = true;  // b's receiving thread stops in its first call
  std::vector<uint64_t> accepted;
  Status last;
  for (uint64_t n = 0; n < 1000; ++n) {
    const Deadline deadline = Deadline::AfterMs(300);
    last = Timed(deadline, [&] { return a_->Send(2, Filler(n, true), deadline); });
    if (!last.ok()) break;
    accepted.push_back(n);
  }
  hold = false;
  ASSERT_TRUE(b_->in.WaitFor(accepted.size(), kWaitMs)) << b_->in.size() << " of " << accepted.size();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  std::vector<Message> got = b_->in.TakeAll();
  ASSERT_EQ(got.size(), accepted.size()) << "a message whose Send failed must not arrive";
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i].header.request_id(), accepted[i]);
  if (!last.ok()) {
    EXPECT_EQ(last.code(), StatusCode::kDeadlineExceeded) << last.ToString();
    return;  // pushed back (even a backend that does not bound its queue may, for a moment, on a busy machine)
  }
  if (!contract().pushes_back_when_stuck) {
    GTEST_SKIP() << GetParam().name << " does not bound its queues: " << accepted.size()
                 << " sends of 64 KiB to a stuck peer all succeeded";
  }
  ADD_FAILURE() << accepted.size() << " sends to a stuck peer all succeeded; the backend says it pushes back";
}

// b closes while a keeps sending it messages (some large, when `large`):
// no Receiver call begins after Close returns, and a second Close is harmless.
void CloseUnderTraffic(std::unique_ptr<Node>& a, std::unique_ptr<Node>& b, bool large,
                       std::atomic<int>& calls, std::atomic<int>& late_calls, std::atomic<bool>& close_returned) {
  std::atomic<bool> stop{false};
  std::thread flood([&] {
    for (uint64_t n = 0; !stop.load() && n < 20000; ++n)
      (void)a->Send(2, Filler(n, large && n % 8 == 0), Deadline::AfterMs(500));
  });
  EXPECT_TRUE(Eventually([&] { return calls.load() >= 50; }, kWaitMs));
  b->endpoint->Close();
  close_returned = true;
  const int at_close = calls.load();
  b->endpoint->Close();  // idempotent
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  stop = true;
  flood.join();
  EXPECT_EQ(late_calls.load(), 0) << "Receiver calls began after Close returned";
  EXPECT_EQ(calls.load(), at_close);
}

TEST_P(Conformance, CloseStopsReceiverCallsAndIsIdempotent) {
  std::atomic<bool> close_returned{false};
  std::atomic<int> calls{0}, late_calls{0};
  StartPair({}, [&](const Message&) {
    if (close_returned.load()) ++late_calls;
    ++calls;
  });
  CloseUnderTraffic(a_, b_, /*large=*/false, calls, late_calls, close_returned);
}

TEST_P(Conformance, CloseWhileLargeMessagesStreamInIsClean) {
  // With UCX_TLS=sm this once aborted inside UCX 1.13 (ucp_worker_destroy ->
  // uct_cma_ep_t_delete: arbiter group not empty) when Close destroyed the
  // worker under a rendezvous receive; Close now waits for those.
  std::atomic<bool> close_returned{false};
  std::atomic<int> calls{0}, late_calls{0};
  StartPair({}, [&](const Message&) {
    if (close_returned.load()) ++late_calls;
    ++calls;
  });
  CloseUnderTraffic(a_, b_, /*large=*/true, calls, late_calls, close_returned);
}

TEST_P(Conformance, SendAfterCloseFails) {
  StartPair();
  b_->endpoint->Close();
  Status st = b_->endpoint->Send(1, MakeMessage(proto::HEARTBEAT, 2), Soon());
  EXPECT_FALSE(st.ok());
  EXPECT_FALSE(a_->in.WaitFor(1, 200)) << "a message sent after Close arrived";
  RecordProperty("send_after_close", st.ToString());
}

TEST_P(Conformance, CloseWithoutListenAndDestructionWithoutClose) {
  std::unique_ptr<Endpoint> never_listened = backend().Make({});
  never_listened->Close();
  never_listened->Close();
  never_listened.reset();
  std::unique_ptr<Endpoint> never_closed = backend().Make({});
  ASSERT_TRUE(never_closed->Listen(backend().ListenSpec(), [](Message&&) {}).ok());
  never_closed.reset();  // the destructor closes
}

TEST_P(Conformance, PeerLossDoesNotHurtTheOtherSide) {
  StartPair();
  // b goes away while a sends it large messages, and while it sends a large one to a.
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(a_->Send(2, Push(i, {Pattern(8 << 20, i)}), Soon()).ok());
  ASSERT_TRUE(b_->Send(1, Push(9, {Pattern(32 << 20, 9)}), Soon()).ok());
  b_->endpoint->Close();
  b_->endpoint.reset();
  // Sends to the lost peer succeed by their deadline, in every backend: they
  // are dropped (loopback, UCX once the break is seen) or queued for the
  // peer's return (zmq); heartbeats, not the transport, declare a peer dead.
  for (int i = 0; i < 50; ++i) {
    const Deadline deadline = Deadline::AfterMs(2000);
    Status st = Timed(deadline, [&] { return a_->Send(2, Numbered(100 + i, i % 5 == 0 ? 1 << 20 : 64), deadline); });
    EXPECT_TRUE(st.ok()) << st.ToString();
  }
  // a keeps working: with a new node under the lost one's id (connecting an
  // id again replaces it) in both directions.
  std::unique_ptr<Node> c = StartNode(2);
  Link(*a_, *c);
  Link(*c, *a_);
  Handshake(*a_, *c);
  ASSERT_TRUE(a_->Send(2, Push(7, {Pattern(1 << 20, 7)}), Soon()).ok());
  ASSERT_TRUE(c->in.WaitFor(1, kWaitMs));
  Message got = c->in.at(0);
  EXPECT_EQ(got.header.key(), 7u);
  EXPECT_TRUE(SameBytes(got.payloads.at(0), Pattern(1 << 20, 7)));
  ASSERT_TRUE(c->endpoint->Send(1, Push(8, {}), Soon()).ok());
  EXPECT_TRUE(Eventually([&] {
    for (const Message& m : a_->in.TakeAll())
      if (m.header.key() == 8) return true;
    return false;
  }, kWaitMs));
  c->endpoint->Close();
}

TEST_P(Conformance, MalformedMessagesFromSendAreRejectedCountedAndHarmless) {
  StartPair();
  const uint64_t rejected0 = b_->stats().messages_rejected, received0 = b_->stats().messages_received;
  Message lying = Push(1, {Pattern(8, 1)});
  lying.header.set_byte_length(4);  // lies about its payload
  Message bodiless = MakeMessage(proto::ABORT, 1);
  Message control_payload = MakeMessage(proto::HEARTBEAT, 1);
  control_payload.payloads.push_back(Pattern(8, 2));
  control_payload.header.set_byte_length(8);
  Message ragged = Push(4, {Pattern(3, 4)});  // 3 bytes of 2-byte elements
  Message huge = MakeMessage(proto::ADDRESS_BOOK, 0);
  huge.header.mutable_address_book()->add_nodes()->set_hostname(std::string(kMaxHeaderBytes + 100, 'h'));
  int sent = 0;
  for (Message* m : {&lying, &bodiless, &control_payload, &ragged, &huge}) {
    ASSERT_TRUE(a_->Send(2, *m, Soon()).ok()) << "the sender does not validate; the receiver must";
    ++sent;
  }
  ASSERT_TRUE(a_->Send(2, Push(2, {Pattern(8, 0)}), Soon()).ok());
  ASSERT_TRUE(b_->in.WaitFor(1, kWaitMs));
  EXPECT_TRUE(Eventually([&] { return b_->stats().messages_rejected - rejected0 == static_cast<uint64_t>(sent); },
                         kWaitMs))
      << "rejected " << b_->stats().messages_rejected - rejected0 << " of " << sent;
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_EQ(b_->in.size(), 1u);
  EXPECT_EQ(b_->in.at(0).header.key(), 2u);
  EXPECT_EQ(b_->stats().messages_received - received0, 1u);
  ASSERT_TRUE(a_->Send(2, MakeMessage(proto::FINISH, 1), Soon()).ok());
  ASSERT_TRUE(b_->in.WaitFor(2, kWaitMs));
  EXPECT_EQ(b_->in.at(1).header.op(), proto::FINISH);
}

TEST_P(Conformance, ForgedWireInputIsRejectedCountedAndHarmless) {
  StartPair();
  std::unique_ptr<RawPeer> raw = backend().Raw(b_->address);
  if (!raw) GTEST_SKIP() << "no wire to forge: malformed input reaches this backend only through Send";
  const uint64_t rejected0 = b_->stats().messages_rejected;
  const std::string eight(8, 'x');
  Message good = Push(2, {Pattern(8, 2)});
  const std::string good_header = EncodeHeader(good.header);
  const std::string truncated = good_header.substr(0, 5);  // cut inside the fixed64 key
  ASSERT_FALSE(proto::Header().ParseFromString(truncated));
  Message lying = Push(1, {Pattern(8, 1)});
  lying.header.set_byte_length(12);
  int forged = 0;
  const auto forge = [&](const std::string& header, const std::vector<std::string>& payloads) {
    raw->Send(header, payloads);
    ++forged;
  };
  forge("\xff\xfe garbage, not a header \x01", {});                          // not protobuf
  forge(truncated, {eight});                                                  // a truncated header
  forge(std::string(kMaxHeaderBytes + 10, '\x08'), {});                       // a header frame over the limit
  forge(EncodeHeader(lying.header), {eight});                                 // byte_length disagrees
  forge(std::string("\x08\xe7\x07", 3), {});                                  // op 999
  forge(EncodeHeader(MakeMessage(proto::HEARTBEAT, 9).header), {eight});      // a payload on a control op
  forged += raw->SendWireGarbage();                                           // this wire's own garbage
  raw->Flush();
  EXPECT_TRUE(Eventually([&] { return b_->stats().messages_rejected - rejected0 == static_cast<uint64_t>(forged); },
                         kWaitMs))
      << "rejected " << b_->stats().messages_rejected - rejected0 << " of " << forged;
  const uint64_t received0 = b_->stats().messages_received;
  raw->SendStreamGarbage();
  raw->Send(good_header, {std::string(reinterpret_cast<const char*>(good.payloads[0].data()), 8)});
  raw->Flush();
  ASSERT_TRUE(b_->in.WaitFor(1, kWaitMs)) << "the valid message after the garbage";
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_EQ(b_->in.size(), 1u) << "only the valid message reaches the Receiver";
  EXPECT_EQ(b_->stats().messages_received - received0, 1u);
  EXPECT_EQ(b_->in.at(0).header.key(), 2u);
  EXPECT_TRUE(SameBytes(b_->in.at(0).payloads.at(0), good.payloads[0]));
  // And the endpoint keeps serving its normal peers.
  ASSERT_TRUE(a_->Send(2, MakeMessage(proto::FINISH, 1), Soon()).ok());
  ASSERT_TRUE(b_->in.WaitFor(2, kWaitMs));
  EXPECT_EQ(b_->in.at(1).header.op(), proto::FINISH);
}

// FORGED SENDER (issue 14): a message whose header names a sender other than
// the node that proved itself on this connection must be dropped and
// counted. That is the job of the authentication decorator: with it
// (g_authenticate, set by tests/unit/control/authenticated_conformance_test.cc)
// a third node, authenticated as node 3, sends to b claiming to be node 1,
// and b must not deliver it while a's own messages still arrive.
TEST_P(Conformance, ForgedSenderIsDroppedAndCounted) {
  if (!g_authenticate) GTEST_SKIP() << "runs in control_authenticated_conformance_test, with the authentication decorator";
  StartPair();
  std::unique_ptr<Node> c = StartNode(3);
  Link(*c, *b_);
  Link(*b_, *c);
  Handshake(*c, *b_);
  const uint64_t rejected0 = b_->stats().messages_rejected;
  Message forged = Push(66, {Pattern(8, 6)});
  forged.header.set_sender(1);  // c claims to be a
  ASSERT_TRUE(c->endpoint->Send(2, std::move(forged), Soon()).ok());
  ASSERT_TRUE(a_->Send(2, Push(1, {Pattern(8, 1)}), Soon()).ok());
  ASSERT_TRUE(b_->in.WaitFor(1, kWaitMs));
  EXPECT_TRUE(Eventually([&] { return b_->stats().messages_rejected > rejected0; }, kWaitMs));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  for (const Message& m : b_->in.TakeAll()) EXPECT_NE(m.header.key(), 66u) << "a forged sender was believed";
  c->endpoint->Close();
}

}  // namespace
}  // namespace syncline::testing
