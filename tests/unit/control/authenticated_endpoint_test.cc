// AuthenticatedEndpoint over the loopback transport: signed messages arrive
// intact, forged and replayed ones are dropped and counted, and messages from
// senders whose keys are not known yet wait for them (within a bound).
#include "control/authenticated_endpoint.h"

#include <gtest/gtest.h>

#include <numeric>

#include "tests/unit/transport/collector.h"
#include "transport/loopback/loopback_network.h"
#include "transport/wire.h"

namespace syncline {
namespace {

using testing::Collector;
using testing::Eventually;

Deadline Soon() { return Deadline::AfterMs(2000); }

Message Push(int32_t sender, uint64_t key, size_t bytes = 64) {
  Message m = MakeMessage(proto::PUSH, sender);
  m.header.set_key(key);
  m.header.set_dtype(proto::FLOAT32);
  std::vector<uint8_t> v(bytes);
  std::iota(v.begin(), v.end(), uint8_t(key));
  m.payloads.push_back(Buffer::Copy(v.data(), v.size()));
  m.header.set_byte_length(PayloadBytes(m));
  return m;
}

// Node 1 (a) and node 2 (b) share a key; an intruder on the same network
// speaks to b without one.
class AuthenticatedEndpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    a_keys_ = std::make_shared<KeyRing>();
    b_keys_ = std::make_shared<KeyRing>();
    a_ = std::make_unique<AuthenticatedEndpoint>(net_.CreateEndpoint(), a_keys_);
    b_ = std::make_unique<AuthenticatedEndpoint>(net_.CreateEndpoint(), b_keys_);
    intruder_ = net_.CreateEndpoint();
    ASSERT_TRUE(a_->Listen("loop://a", a_in_.receiver()).ok());
    ASSERT_TRUE(b_->Listen("loop://b", b_in_.receiver()).ok());
    ASSERT_TRUE(intruder_->Listen("loop://intruder", intruder_in_.receiver()).ok());
    ASSERT_TRUE(a_->Connect(2, "loop://b").ok());
    ASSERT_TRUE(b_->Connect(1, "loop://a").ok());
    ASSERT_TRUE(intruder_->Connect(2, "loop://b").ok());
  }
  void ShareKey() {
    const SecretKey k = RandomKey();
    a_keys_->SetPeerKey(2, k);
    b_keys_->SetPeerKey(1, k);
  }

  LoopbackNetwork net_;
  std::shared_ptr<KeyRing> a_keys_, b_keys_;
  std::unique_ptr<AuthenticatedEndpoint> a_, b_;
  std::unique_ptr<Endpoint> intruder_;
  Collector a_in_, b_in_, intruder_in_;
};

TEST_F(AuthenticatedEndpointTest, SignedMessagesArriveIntactAndForgedOnesAreDroppedAndCounted) {
  ShareKey();
  b_keys_->MarkComplete();
  ASSERT_TRUE(a_->Send(2, Push(1, 5), Soon()).ok());
  ASSERT_TRUE(b_in_.WaitFor(1));
  Message got = b_in_.at(0);
  EXPECT_EQ(got.header.key(), 5u);
  EXPECT_EQ(got.header.sender(), 1);
  ASSERT_EQ(got.payloads.size(), 1u);
  EXPECT_EQ(got.payloads[0].data()[3], 8);

  // Node 1's id without its key; a replay of a real message; no proof at all.
  KeyRing forger;
  forger.SetPeerKey(2, RandomKey());
  Message forged = Push(1, 6);
  ASSERT_TRUE(forger.Sign(2, &forged.header).ok());
  ASSERT_TRUE(intruder_->Send(2, forged, Soon()).ok());
  Message real = Push(1, 7);
  ASSERT_TRUE(a_keys_->Sign(2, &real.header).ok());
  ASSERT_TRUE(intruder_->Send(2, real, Soon()).ok());
  ASSERT_TRUE(intruder_->Send(2, real, Soon()).ok());
  ASSERT_TRUE(intruder_->Send(2, Push(1, 8), Soon()).ok());
  ASSERT_TRUE(Eventually([&] { return b_->stats().messages_unauthenticated == 3; }))
      << b_->stats().messages_unauthenticated;
  EXPECT_EQ(b_in_.size(), 2u) << "only the first copy of the real message gets through";
  EXPECT_EQ(b_in_.at(1).header.key(), 7u);
  EXPECT_GE(b_->stats().messages_rejected, 3u);

  // The endpoint keeps working.
  ASSERT_TRUE(a_->Send(2, Push(1, 9), Soon()).ok());
  ASSERT_TRUE(b_in_.WaitFor(3));
  EXPECT_EQ(b_in_.at(2).header.key(), 9u);
}

TEST_F(AuthenticatedEndpointTest, SendingToAPeerWithoutAKeyFails) {
  Status st = a_->Send(2, Push(1, 5), Soon());
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition) << st.ToString();
}

TEST_F(AuthenticatedEndpointTest, EarlyMessagesWaitForTheKeysAndArriveInOrder) {
  const SecretKey k = RandomKey();
  a_keys_->SetPeerKey(2, k);
  // b knows the scheduler (here: node 3, played by the intruder's endpoint) only.
  const SecretKey scheduler_key = RandomKey();
  b_keys_->SetPeerKey(3, scheduler_key);
  for (uint64_t key = 0; key < 3; ++key) ASSERT_TRUE(a_->Send(2, Push(1, key), Soon()).ok());
  ASSERT_TRUE(Eventually([&] { return b_->messages_held() == 3; }));
  EXPECT_EQ(b_in_.size(), 0u) << "held, not delivered, until node 1's key is known";
  // Keys arrive with a message (the address book); held messages follow it.
  b_keys_->SetPeerKey(1, k);
  b_keys_->MarkComplete();
  KeyRing scheduler;
  scheduler.SetPeerKey(2, scheduler_key);
  Message book = MakeMessage(proto::HEARTBEAT_ACK, 3);
  ASSERT_TRUE(scheduler.Sign(2, &book.header).ok());
  ASSERT_TRUE(intruder_->Send(2, book, Soon()).ok());
  ASSERT_TRUE(b_in_.WaitFor(4));
  EXPECT_EQ(b_in_.at(0).header.op(), proto::HEARTBEAT_ACK);
  for (uint64_t key = 0; key < 3; ++key) EXPECT_EQ(b_in_.at(key + 1).header.key(), key);
  EXPECT_EQ(b_->stats().messages_unauthenticated, 0u);
}

TEST_F(AuthenticatedEndpointTest, AMessageHeldAgainIsCheckedAgainWhenAKeyArrivesMeanwhile) {
  // Node c holds messages from nodes 1 and 4; node 4's key arrives, and while
  // the held messages are checked again (1's still held), delivering 4's
  // message brings node 1's key. Node 1's message must follow at once, not
  // wait for some later receipt (on another receiving thread, that key's own
  // check of the held messages may have run while they were out of the queue).
  const SecretKey k1 = RandomKey(), k4 = RandomKey(), k3 = RandomKey();
  auto c_keys = std::make_shared<KeyRing>();
  c_keys->SetPeerKey(3, k3);
  Collector c_in;
  auto collect = c_in.receiver();
  AuthenticatedEndpoint c(net_.CreateEndpoint(), c_keys);
  ASSERT_TRUE(c.Listen("loop://c", [&](Message&& m) {
                 const bool from_4 = m.header.sender() == 4;
                 collect(std::move(m));
                 if (from_4) c_keys->SetPeerKey(1, k1);
               }).ok());
  ASSERT_TRUE(intruder_->Connect(9, "loop://c").ok());
  KeyRing one, four, scheduler;
  one.SetPeerKey(9, k1);
  four.SetPeerKey(9, k4);
  scheduler.SetPeerKey(9, k3);
  Message from_1 = Push(1, 10), from_4 = Push(4, 20), heartbeat = MakeMessage(proto::HEARTBEAT_ACK, 3);
  ASSERT_TRUE(one.Sign(9, &from_1.header).ok());
  ASSERT_TRUE(four.Sign(9, &from_4.header).ok());
  ASSERT_TRUE(scheduler.Sign(9, &heartbeat.header).ok());
  ASSERT_TRUE(intruder_->Send(9, std::move(from_1), Soon()).ok());
  ASSERT_TRUE(intruder_->Send(9, std::move(from_4), Soon()).ok());
  ASSERT_TRUE(Eventually([&] { return c.messages_held() == 2; }));  // both checked, not just received
  EXPECT_EQ(c_in.size(), 0u);
  c_keys->SetPeerKey(4, k4);
  ASSERT_TRUE(intruder_->Send(9, std::move(heartbeat), Soon()).ok());
  ASSERT_TRUE(c_in.WaitFor(3)) << "node 1's message is still held";
  // The heartbeat's receipt checks the held messages again, unless the receipt
  // of node 4's message is still inside its own check when node 4's key
  // arrives and does it first: the heartbeat may come first or last, but node
  // 1's message always follows node 4's.
  std::vector<PeerId> held_senders;
  for (size_t i = 0; i < 3; ++i) {
    if (c_in.at(i).header.op() != proto::HEARTBEAT_ACK) held_senders.push_back(c_in.at(i).header.sender());
  }
  EXPECT_EQ(held_senders, (std::vector<PeerId>{4, 1}));
  c.Close();
}

TEST_F(AuthenticatedEndpointTest, HeldMessagesAreBounded) {
  KeyRing stranger;
  stranger.SetPeerKey(2, RandomKey());
  const size_t extra = 5;
  for (size_t i = 0; i < AuthenticatedEndpoint::kMaxHeldMessages + extra; ++i) {
    Message m = Push(7, i, 4);
    ASSERT_TRUE(stranger.Sign(2, &m.header).ok());
    ASSERT_TRUE(intruder_->Send(2, std::move(m), Soon()).ok());
  }
  ASSERT_TRUE(Eventually([&] { return b_->stats().messages_unauthenticated == extra; }))
      << b_->stats().messages_unauthenticated;
  // Once b's keys are complete, what was held from the stranger is refused too.
  ShareKey();
  b_keys_->MarkComplete();
  ASSERT_TRUE(a_->Send(2, Push(1, 1), Soon()).ok());
  ASSERT_TRUE(b_in_.WaitFor(1));
  ASSERT_TRUE(Eventually([&] {
    return b_->stats().messages_unauthenticated == extra + AuthenticatedEndpoint::kMaxHeldMessages;
  }));
  EXPECT_EQ(b_in_.size(), 1u);
}

TEST(AuthenticatedHoldTest, HeldBytesCountTheHeaders) {
  // Header-only messages from a sender not known yet: their headers alone
  // must fill the bound (a flood of large headers, no payload at all).
  LoopbackNetwork net;
  auto keys = std::make_shared<KeyRing>();
  AuthenticatedEndpoint b(net.CreateEndpoint(), keys, {.messages = 4096, .bytes = 1 << 20});
  Collector b_in;
  ASSERT_TRUE(b.Listen("loop://b", b_in.receiver()).ok());
  auto stranger_end = net.CreateEndpoint();
  ASSERT_TRUE(stranger_end->Connect(2, "loop://b").ok());
  KeyRing stranger;
  stranger.SetPeerKey(2, RandomKey());
  constexpr size_t kHeaderBytes = 64 << 10;
  constexpr size_t kSent = 40;  // 2.5 MiB of headers
  for (size_t i = 0; i < kSent; ++i) {
    Message m = MakeMessage(proto::ABORT, 7);
    m.header.mutable_abort()->set_reason(std::string(kHeaderBytes, 'x'));
    ASSERT_TRUE(stranger.Sign(2, &m.header).ok());
    ASSERT_TRUE(stranger_end->Send(2, std::move(m), Soon()).ok());
  }
  const size_t fit = (1 << 20) / kHeaderBytes;  // 16, less a little for the rest of each header
  ASSERT_TRUE(Eventually([&] {
    const EndpointStats st = b.stats();
    return st.messages_received + st.messages_unauthenticated >= kSent;  // all in: held or refused
  }));
  EXPECT_GE(b.stats().messages_unauthenticated, kSent - fit);
  EXPECT_LE(b.stats().messages_unauthenticated, kSent - fit + 1);
  EXPECT_EQ(b_in.size(), 0u);
  b.Close();
}

TEST(AuthenticatedTest, WithoutATokenTheEndpointIsUnwrapped) {
  LoopbackNetwork net;
  KeyRing* keys = reinterpret_cast<KeyRing*>(1);
  auto plain = Authenticated("", net.CreateEndpoint(), &keys);
  EXPECT_EQ(keys, nullptr);
  EXPECT_EQ(dynamic_cast<AuthenticatedEndpoint*>(plain.get()), nullptr);
  auto wrapped = Authenticated("token", net.CreateEndpoint(), &keys);
  EXPECT_NE(keys, nullptr);
  EXPECT_NE(dynamic_cast<AuthenticatedEndpoint*>(wrapped.get()), nullptr);
}

}  // namespace
}  // namespace syncline
