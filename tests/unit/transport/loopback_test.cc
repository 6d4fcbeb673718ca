// LoopbackNetwork (the in-process transport) and FaultyEndpoint (the fault
// injecting wrapper): what is particular to them — zero-copy payloads,
// isolation, addresses, filters. What every Endpoint must do is checked over
// loopback too, by endpoint_conformance_test.cc.
#include "transport/loopback/loopback_network.h"

#include <gtest/gtest.h>

#include <numeric>
#include <thread>

#include "tests/unit/transport/collector.h"
#include "transport/faulty_endpoint.h"
#include "transport/wire.h"

namespace syncline {
namespace {

using testing::Collector;

Deadline Soon() { return Deadline::AfterMs(2000); }

Message Push(uint64_t key, std::vector<Buffer> payloads) {
  Message m = MakeMessage(proto::PUSH, 1);
  m.header.set_key(key);
  m.header.set_dtype(proto::FLOAT32);
  m.payloads = std::move(payloads);
  m.header.set_byte_length(PayloadBytes(m));
  return m;
}

Buffer Iota(size_t n, uint8_t start) {
  std::vector<uint8_t> v(n);
  std::iota(v.begin(), v.end(), start);
  return Buffer::Copy(v.data(), v.size());
}

class LoopbackTest : public ::testing::Test {
 protected:
  void SetUp() override {
    a_ = net_.CreateEndpoint();
    b_ = net_.CreateEndpoint();
    ASSERT_TRUE(a_->Listen("loop://a", a_in_.receiver()).ok());
    auto addr = b_->Listen("loop://b", b_in_.receiver());
    ASSERT_TRUE(addr.ok());
    EXPECT_EQ(*addr, "loop://b");
    ASSERT_TRUE(a_->Connect(2, "loop://b").ok());
    ASSERT_TRUE(b_->Connect(1, "loop://a").ok());
  }

  LoopbackNetwork net_;
  Collector a_in_, b_in_;
  std::unique_ptr<Endpoint> a_, b_;
};

TEST_F(LoopbackTest, DeliveryHandsOverTheSendersMemoryReadOnly) {
  // In-process delivery is zero-copy: the receiver sees the sender's very
  // bytes, and never as writable, even when the sender's buffer is: the
  // receiver must not sum into the sender's memory. (Contents, order and
  // stats: endpoint_conformance_test.cc.)
  std::vector<Buffer> frames = {Iota(4, 0), Iota(400, 7).AsWritable()};
  ASSERT_TRUE(a_->Send(2, Push(99, frames), Soon()).ok());
  ASSERT_TRUE(b_in_.WaitFor(1));
  Message got = b_in_.at(0);
  ASSERT_EQ(got.payloads.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(got.payloads[i].data(), frames[i].data());
    EXPECT_FALSE(got.payloads[i].writable());
  }
}

TEST_F(LoopbackTest, NonLoopbackAddressIsRejected) {
  auto c = net_.CreateEndpoint();
  auto st = c->Listen("tcp://127.0.0.1:0", [](Message&&) {});
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.status().code(), StatusCode::kInvalidArgument);
}

TEST_F(LoopbackTest, IsolateDropsTrafficBothWays) {
  net_.Isolate("loop://b");
  ASSERT_TRUE(a_->Send(2, MakeMessage(proto::HEARTBEAT, 1), Soon()).ok());
  ASSERT_TRUE(b_->Send(1, MakeMessage(proto::HEARTBEAT, 2), Soon()).ok());
  // A third, healthy endpoint still talks to `a`.
  Collector c_in;
  auto c = net_.CreateEndpoint();
  ASSERT_TRUE(c->Listen("loop://c", c_in.receiver()).ok());
  ASSERT_TRUE(c->Connect(1, "loop://a").ok());
  ASSERT_TRUE(c->Send(1, MakeMessage(proto::FINISH, 3), Soon()).ok());
  ASSERT_TRUE(a_in_.WaitFor(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(b_in_.size(), 0u);
  ASSERT_EQ(a_in_.size(), 1u);
  EXPECT_EQ(a_in_.at(0).header.op(), proto::FINISH);
}

TEST_F(LoopbackTest, CloseFreesTheAddress) {
  b_->Close();
  Collector again;
  auto b2 = net_.CreateEndpoint();
  ASSERT_TRUE(b2->Listen("loop://b", again.receiver()).ok());
  ASSERT_TRUE(a_->Send(2, MakeMessage(proto::HEARTBEAT, 1), Soon()).ok());
  EXPECT_TRUE(again.WaitFor(1));
  EXPECT_EQ(b_in_.size(), 0u);
}

class FaultyEndpointTest : public LoopbackTest {
 protected:
  void SetUp() override {
    LoopbackTest::SetUp();
    auto inner = net_.CreateEndpoint();
    faulty_ = new FaultyEndpoint(std::move(inner));
    f_.reset(faulty_);
    ASSERT_TRUE(f_->Listen("loop://f", f_in_.receiver()).ok());
    ASSERT_TRUE(f_->Connect(2, "loop://b").ok());
  }
  Collector f_in_;
  FaultyEndpoint* faulty_ = nullptr;
  std::unique_ptr<Endpoint> f_;
};

TEST_F(FaultyEndpointTest, ForwardsUntouchedWithoutAFilter) {
  ASSERT_TRUE(f_->Send(2, Push(5, {Iota(8, 1)}), Soon()).ok());
  ASSERT_TRUE(b_in_.WaitFor(1));
  EXPECT_EQ(b_in_.at(0).header.key(), 5u);
  EXPECT_EQ(f_->stats().messages_sent, 1u);
}

TEST_F(FaultyEndpointTest, FilterDropsSelectedMessages) {
  std::vector<PeerId> seen;
  faulty_->SetSendFilter([&](PeerId peer, Message& m) {
    seen.push_back(peer);
    return m.header.key() % 2 == 0;  // drop odd keys
  });
  for (uint64_t k = 0; k < 6; ++k) ASSERT_TRUE(f_->Send(2, Push(k, {}), Soon()).ok());
  ASSERT_TRUE(b_in_.WaitFor(3));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  auto got = b_in_.TakeAll();
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].header.key(), 0u);
  EXPECT_EQ(got[1].header.key(), 2u);
  EXPECT_EQ(got[2].header.key(), 4u);
  EXPECT_EQ(seen, std::vector<PeerId>(6, 2));
  EXPECT_EQ(f_->stats().messages_sent, 3u) << "dropped messages never reach the inner endpoint";

  faulty_->SetSendFilter(nullptr);  // heal
  ASSERT_TRUE(f_->Send(2, Push(7, {}), Soon()).ok());
  ASSERT_TRUE(b_in_.WaitFor(1));
  EXPECT_EQ(b_in_.at(0).header.key(), 7u);
}

TEST_F(FaultyEndpointTest, FilterAltersMessages) {
  faulty_->SetSendFilter([](PeerId, Message& m) {
    m.header.set_key(m.header.key() + 100);
    return true;
  });
  ASSERT_TRUE(f_->Send(2, Push(1, {Iota(4, 0)}), Soon()).ok());
  ASSERT_TRUE(b_in_.WaitFor(1));
  EXPECT_EQ(b_in_.at(0).header.key(), 101u);
}

TEST_F(FaultyEndpointTest, CorruptedMessagesAreRejectedByTheReceiver) {
  faulty_->SetSendFilter([](PeerId, Message& m) {
    if (m.header.key() == 1) m.payloads.front() = m.payloads.front().Slice(0, 3);  // truncate
    return true;
  });
  ASSERT_TRUE(f_->Send(2, Push(1, {Iota(8, 0)}), Soon()).ok());
  ASSERT_TRUE(f_->Send(2, Push(2, {Iota(8, 0)}), Soon()).ok());
  ASSERT_TRUE(b_in_.WaitFor(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_EQ(b_in_.size(), 1u);
  EXPECT_EQ(b_in_.at(0).header.key(), 2u);
  EXPECT_EQ(b_->stats().messages_rejected, 1u);
}

TEST_F(FaultyEndpointTest, ReceivingIsUnaffected) {
  faulty_->SetSendFilter([](PeerId, Message&) { return false; });  // a peer that sends nothing
  ASSERT_TRUE(b_->Connect(6, "loop://f").ok());
  ASSERT_TRUE(b_->Send(6, MakeMessage(proto::HEARTBEAT, 2), Soon()).ok());
  EXPECT_TRUE(f_in_.WaitFor(1));
}

}  // namespace
}  // namespace syncline
