// Endpoint conformance, traffic: what a healthy pair of endpoints of every
// backend does with messages — exact bytes of header-only and multi-frame
// messages, large frames and headers, per-peer FIFO order under load and
// across threads, who owns payload memory on each side, and replies sent
// from inside a Receiver. (Failures: endpoint_conformance_failure_test.cc.)
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <thread>

#include "tests/unit/transport/endpoint_conformance.h"

namespace syncline::testing {
namespace {

using ::testing::HasSubstr;
using Conformance = EndpointConformance;

TEST_P(Conformance, ListenReturnsAConcreteAddressOfItsScheme) {
  StartPair();
  const std::string spec = backend().ListenSpec();
  const std::string scheme = spec.substr(0, spec.find("://") + 3);
  for (const Node* n : {a_.get(), b_.get()}) {
    EXPECT_EQ(n->address.rfind(scheme, 0), 0u) << n->address;
    EXPECT_FALSE(n->address.ends_with(":0")) << "port 0 must be resolved: " << n->address;
  }
  EXPECT_NE(a_->address, b_->address);
}

TEST_P(Conformance, HeaderOnlyMessagesArriveWithEveryField) {
  StartPair();
  Message hb = MakeMessage(proto::HEARTBEAT, 1);
  Message pull = MakeMessage(proto::PULL, 1);  // a data op with no payload
  pull.header.set_key(0xfedcba9876543210ull);
  pull.header.set_round(1ull << 40);
  pull.header.set_dtype(proto::FLOAT64);
  pull.header.set_request_id(123456789012345ull);
  pull.header.set_flags(0x5a);
  Message abort = MakeMessage(proto::ABORT, 1);  // a control op with its body
  abort.header.mutable_abort()->set_reason(std::string("reason with \0 and \xc3\xa9", 20));
  for (const Message* m : {&hb, &pull, &abort}) ASSERT_TRUE(a_->Send(2, *m, Soon()).ok());
  ASSERT_TRUE(b_->in.WaitFor(3, kWaitMs));
  std::vector<Message> got = b_->in.TakeAll();
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].header.SerializeAsString(), hb.header.SerializeAsString());
  EXPECT_EQ(got[1].header.SerializeAsString(), pull.header.SerializeAsString());
  EXPECT_EQ(got[2].header.SerializeAsString(), abort.header.SerializeAsString());
  for (const Message& m : got) EXPECT_TRUE(m.payloads.empty());
}

TEST_P(Conformance, MultiFrameMessagesArriveByteExactWithStats) {
  StartPair();
  const EndpointStats sent0 = a_->stats(), received0 = b_->stats();
  const Buffer empty = Buffer::Copy(nullptr, 0), one = Pattern(1, 1), mib = Pattern(1 << 20, 2), odd = Pattern(1, 3);
  const std::vector<std::vector<Buffer>> shapes = {
      {empty},                 // one empty frame
      {Buffer()},              // a default Buffer: no data, no owner
      {Pattern(2, 5)},         // one tiny frame
      {empty, one, mib, odd},  // frames of every size at once
  };
  std::vector<Buffer> many;  // 300 frames
  for (int i = 0; i < 300; ++i) many.push_back(Pattern(i % 7 == 0 ? 0 : (i % 5 == 0 ? 65536 : 1), i));
  if (PayloadBytes(Push(0, many)) % 2) many.push_back(one);
  std::vector<std::vector<Buffer>> all = shapes;
  all.push_back(many);
  uint64_t bytes = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    Message m = Push(10 + i, all[i]);
    bytes += PayloadBytes(m);
    ASSERT_TRUE(a_->Send(2, std::move(m), Soon()).ok()) << i;
  }
  ASSERT_TRUE(b_->in.WaitFor(all.size(), kWaitMs)) << b_->in.size();
  std::vector<Message> got = b_->in.TakeAll();
  ASSERT_EQ(got.size(), all.size());
  for (size_t i = 0; i < all.size(); ++i) {
    const Message& m = got[i];
    EXPECT_EQ(m.header.op(), proto::PUSH);
    EXPECT_EQ(m.header.key(), 10 + i);
    EXPECT_EQ(m.header.round(), 3u);
    EXPECT_EQ(m.header.sender(), 1);
    EXPECT_EQ(m.header.dtype(), proto::BFLOAT16);
    EXPECT_EQ(m.header.request_id(), 77u);
    EXPECT_EQ(m.header.byte_length(), PayloadBytes(Push(0, all[i])));
    EXPECT_FALSE(m.header.has_shm()) << "the receiver sees plain payload frames";
    ASSERT_EQ(m.payloads.size(), all[i].size()) << "message " << i;
    for (size_t f = 0; f < all[i].size(); ++f)
      EXPECT_TRUE(SameBytes(m.payloads[f], all[i][f])) << "message " << i << " frame " << f;
  }
  const EndpointStats sent = a_->stats(), received = b_->stats();
  EXPECT_EQ(sent.messages_sent - sent0.messages_sent, all.size());
  EXPECT_EQ(received.messages_received - received0.messages_received, all.size());
  EXPECT_EQ(received.messages_rejected, 0u);
  const uint64_t bytes_sent = sent.payload_bytes_sent - sent0.payload_bytes_sent;
  const uint64_t bytes_received = received.payload_bytes_received - received0.payload_bytes_received;
  EXPECT_EQ(bytes_sent, bytes);
  EXPECT_EQ(bytes_received, bytes);
}

TEST_P(Conformance, ReceivedFramesAreWritableExactlyWhereTheBackendSaysSo) {
  StartPair();
  // Even a buffer the sender may write into must not reach a receiver as
  // writable unless the receiver alone holds it (a server sums into it).
  ASSERT_TRUE(a_->Send(2, Push(1, {Pattern(64 << 10, 1).AsWritable()}), Soon()).ok());
  ASSERT_TRUE(b_->in.WaitFor(1, kWaitMs));
  Message got = b_->in.at(0);
  ASSERT_EQ(got.payloads.size(), 1u);
  EXPECT_EQ(got.payloads[0].writable(), contract().receives_writable);
}

TEST_P(Conformance, LargeFramesArriveIntactAndInOrder) {
  StartPair();
  static const Buffer big = Pattern(size_t{64} << 20, 4);  // made once for every backend
  ASSERT_TRUE(a_->Send(2, Push(1, {big}), Soon()).ok());
  ASSERT_TRUE(a_->Send(2, Push(2, {Pattern(16, 2)}), Soon()).ok());  // must not overtake it
  const Buffer back1 = Pattern(size_t{8} << 20, 3), back2 = Pattern(size_t{8} << 20, 5);
  ASSERT_TRUE(b_->Send(1, Push(3, {back1, back2}), Soon()).ok());  // several large frames, the other way
  ASSERT_TRUE(b_->in.WaitFor(2, kWaitMs)) << b_->in.size();
  ASSERT_TRUE(a_->in.WaitFor(1, kWaitMs));
  std::vector<Message> at_b = b_->in.TakeAll();
  ASSERT_EQ(at_b[0].header.key(), 1u);
  ASSERT_EQ(at_b[0].payloads.size(), 1u);
  EXPECT_TRUE(SameBytes(at_b[0].payloads[0], big));
  EXPECT_EQ(at_b[1].header.key(), 2u);
  Message at_a = a_->in.at(0);
  ASSERT_EQ(at_a.payloads.size(), 2u);
  EXPECT_TRUE(SameBytes(at_a.payloads[0], back1));
  EXPECT_TRUE(SameBytes(at_a.payloads[1], back2));
}

TEST_P(Conformance, LargeHeadersArriveIntact) {
  StartPair();
  Message book = MakeMessage(proto::ADDRESS_BOOK, 1);  // in a's name, as a_->Send sends it
  for (int i = 0; i < 2000; ++i) {
    proto::NodeInfo* n = book.header.mutable_address_book()->add_nodes();
    n->set_id(i);
    n->set_address("tcp://10.0.0." + std::to_string(i % 250) + ":" + std::to_string(20000 + i));
    n->set_hostname("host-" + std::to_string(i));
  }
  ASSERT_GT(EncodeHeader(book.header).size(), 32000u);  // past UCX's AM header and the shm ring's record limits
  ASSERT_TRUE(a_->Send(2, book, Soon()).ok());
  ASSERT_TRUE(a_->Send(2, Push(1, {Pattern(4096, 1)}), Soon()).ok());
  ASSERT_TRUE(b_->in.WaitFor(2, kWaitMs));
  std::vector<Message> got = b_->in.TakeAll();
  EXPECT_EQ(got[0].header.SerializeAsString(), book.header.SerializeAsString());
  EXPECT_EQ(got[1].header.key(), 1u);
}

TEST_P(Conformance, PerPeerOrderHoldsUnderManyMessagesBothWays) {
  StartPair();
  constexpr uint64_t kCount = 500;
  // Large and small interleaved: a small one (eager, socket, ring) must not
  // overtake a large one (rendezvous, shared memory) sent before it.
  const auto size_of = [](uint64_t n) -> size_t { return n % 3 == 0 ? 256 << 10 : 2 * (1 + n % 40); };
  std::thread back([&] {
    for (uint64_t n = 0; n < kCount; ++n) ASSERT_TRUE(b_->Send(1, Numbered(n, 0), Soon()).ok()) << n;
  });
  for (uint64_t n = 0; n < kCount; ++n) ASSERT_TRUE(a_->Send(2, Numbered(n, size_of(n)), Soon()).ok()) << n;
  back.join();
  ASSERT_TRUE(b_->in.WaitFor(kCount, kWaitMs)) << b_->in.size();
  ASSERT_TRUE(a_->in.WaitFor(kCount, kWaitMs)) << a_->in.size();
  std::vector<Message> at_b = b_->in.TakeAll(), at_a = a_->in.TakeAll();
  ASSERT_EQ(at_b.size(), kCount);
  ASSERT_EQ(at_a.size(), kCount);
  for (uint64_t n = 0; n < kCount; ++n) {
    ASSERT_EQ(at_b[n].header.request_id(), n) << "a -> b message " << n << " out of order";
    ASSERT_EQ(at_a[n].header.request_id(), n) << "b -> a message " << n << " out of order";
    ASSERT_TRUE(SameBytes(at_b[n].payloads.at(0), Pattern(size_of(n), static_cast<uint32_t>(n)))) << n;
  }
}

TEST_P(Conformance, ConcurrentSendersToOnePeerKeepEachThreadsOrder) {
  StartPair();
  constexpr int kThreads = 4, kEach = 200;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i)
        if (!a_->Send(2, Push(t * 1000 + i, {Pattern(i % 10 == 0 ? 100000 : 32, i)}), Soon()).ok()) ++failures;
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  ASSERT_TRUE(b_->in.WaitFor(kThreads * kEach, kWaitMs)) << b_->in.size();
  EXPECT_EQ(b_->stats().messages_rejected, 0u) << "interleaved frames of concurrent sends";
  std::map<uint64_t, uint64_t> next;  // thread -> next index expected
  std::string reordered;
  for (const Message& m : b_->in.TakeAll()) {
    const uint64_t t = m.header.key() / 1000, i = m.header.key() % 1000;
    if (i != next[t] && reordered.empty())
      reordered = "thread " + std::to_string(t) + "'s message " + std::to_string(i) + " arrived where " +
                  std::to_string(next[t]) + " was due";
    next[t] = i + 1;
    EXPECT_TRUE(SameBytes(m.payloads.at(0), Pattern(i % 10 == 0 ? 100000 : 32, static_cast<uint32_t>(i))));
  }
  EXPECT_TRUE(reordered.empty()) << reordered;
}

TEST_P(Conformance, EachSenderToOneReceiverKeepsItsOwnOrder) {
  StartPair();
  std::unique_ptr<Node> c = StartNode(3);
  Link(*c, *b_);
  Link(*b_, *c);
  Handshake(*c, *b_);
  constexpr uint64_t kCount = 300;
  std::thread other([&] {
    for (uint64_t n = 0; n < kCount; ++n) {
      Message m = Numbered(n, n % 5 == 0 ? 64 << 10 : 8);
      m.header.set_sender(3);
      ASSERT_TRUE(c->endpoint->Send(2, std::move(m), Soon()).ok());
    }
  });
  for (uint64_t n = 0; n < kCount; ++n) ASSERT_TRUE(a_->Send(2, Numbered(n, n % 7 == 0 ? 64 << 10 : 8), Soon()).ok());
  other.join();
  ASSERT_TRUE(b_->in.WaitFor(2 * kCount, kWaitMs)) << b_->in.size();
  std::map<int32_t, uint64_t> next;
  for (const Message& m : b_->in.TakeAll()) {
    EXPECT_EQ(m.header.request_id(), next[m.header.sender()]) << "from node " << m.header.sender();
    next[m.header.sender()] = m.header.request_id() + 1;
  }
  EXPECT_EQ(next[1], kCount);
  EXPECT_EQ(next[3], kCount);
  c->endpoint->Close();
}

TEST_P(Conformance, AReceiverMaySendFromInsideItsCall) {
  // Servers answer pulls from their Receiver: a Send on the I/O thread must work.
  std::atomic<int> failed_replies{0};
  StartPair({}, [&](const Message& m) {
    if (m.header.op() != proto::PUSH) return;
    Message reply = Numbered(m.header.request_id(), m.payloads.empty() ? 0 : m.payloads[0].size());
    reply.header.set_sender(2);
    if (!b_->endpoint->Send(1, std::move(reply), Soon()).ok()) ++failed_replies;
  });
  constexpr uint64_t kCount = 200;
  for (uint64_t n = 0; n < kCount; ++n) ASSERT_TRUE(a_->Send(2, Numbered(n, n % 4 == 0 ? 128 << 10 : 4), Soon()).ok());
  ASSERT_TRUE(a_->in.WaitFor(kCount, kWaitMs)) << a_->in.size();
  EXPECT_EQ(failed_replies.load(), 0);
  std::vector<Message> replies = a_->in.TakeAll();
  for (uint64_t n = 0; n < kCount; ++n) {
    ASSERT_EQ(replies[n].header.request_id(), n);
    EXPECT_EQ(replies[n].header.sender(), 2);
  }
}

TEST_P(Conformance, TheReceiverRunsOffTheSendersThread) {
  std::atomic<int> calls{0};
  std::atomic<bool> on_sender_thread{false};
  const auto sender_thread = std::this_thread::get_id();
  StartPair({}, [&](const Message&) {
    if (std::this_thread::get_id() == sender_thread) on_sender_thread = true;
    ++calls;
  });
  ASSERT_TRUE(a_->Send(2, Push(1, {Pattern(8, 1)}), Soon()).ok());
  ASSERT_TRUE(b_->in.WaitFor(1, kWaitMs));
  EXPECT_FALSE(on_sender_thread.load());
}

TEST_P(Conformance, PayloadOwnersAreReleasedOnceDelivered) {
  StartPair();
  for (size_t size : {size_t{64}, size_t{64} << 10, size_t{4} << 20}) {
    std::atomic<bool> released{false};
    auto* bytes = new std::vector<uint8_t>(size, 0x3c);
    Buffer payload(bytes->data(), bytes->size(), std::shared_ptr<const void>(bytes, [&released](const void* p) {
                     delete static_cast<const std::vector<uint8_t>*>(p);
                     released = true;
                   }));
    ASSERT_TRUE(a_->Send(2, Push(1, {payload}), Soon()).ok());
    payload = Buffer();  // the endpoints now hold the only references
    ASSERT_TRUE(b_->in.WaitFor(1, kWaitMs));
    if (!contract().shares_sender_memory) {
      // The receiver's copy is its own: the sender lets go while it is still held.
      EXPECT_TRUE(Eventually([&] { return released.load(); }, kWaitMs))
          << "the sender still holds a " << size << "-byte payload after the peer received it";
    }
    Message got = b_->in.TakeAll().at(0);
    ASSERT_EQ(got.payloads.size(), 1u);
    EXPECT_EQ(got.payloads[0].data()[size - 1], 0x3c);
    got = Message();  // and once nobody holds it, it must go in any backend
    EXPECT_TRUE(Eventually([&] { return released.load(); }, kWaitMs)) << size << "-byte payload leaked";
  }
}

TEST_P(Conformance, OwnerlessPayloadsAreCopiedAtSend) {
  StartPair();
  uint8_t scratch[6] = {1, 2, 3, 4, 5, 6};
  ASSERT_TRUE(a_->Send(2, Push(6, {Buffer(scratch, 6, nullptr)}), Soon()).ok());
  std::memset(scratch, 0, sizeof(scratch));  // the caller may reuse it at once
  ASSERT_TRUE(b_->in.WaitFor(1, kWaitMs));
  const uint8_t want[6] = {1, 2, 3, 4, 5, 6};
  EXPECT_EQ(std::memcmp(b_->in.at(0).payloads.at(0).data(), want, 6), 0);
}

TEST_P(Conformance, ReceivedPayloadsOutliveTheEndpoint) {
  StartPair();
  ASSERT_TRUE(a_->Send(2, Push(1, {Pattern(4096, 9)}), Soon()).ok());
  ASSERT_TRUE(a_->Send(2, Push(2, {Pattern(1 << 20, 10)}), Soon()).ok());
  ASSERT_TRUE(b_->in.WaitFor(2, kWaitMs));
  std::vector<Message> got = b_->in.TakeAll();
  b_->endpoint->Close();
  b_->endpoint.reset();  // the endpoint, its context and its pools are gone; the frames must not be
  EXPECT_TRUE(SameBytes(got[0].payloads.at(0), Pattern(4096, 9)));
  EXPECT_TRUE(SameBytes(got[1].payloads.at(0), Pattern(1 << 20, 10)));
}

TEST_P(Conformance, SendToAnUnknownPeerIsNotFoundNamingIt) {
  StartPair();
  Status st = a_->Send(42, MakeMessage(proto::HEARTBEAT, 1), Soon());
  EXPECT_EQ(st.code(), StatusCode::kNotFound) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr("42"));
  // And the endpoint is unaffected.
  ASSERT_TRUE(a_->Send(2, MakeMessage(proto::HEARTBEAT, 1), Soon()).ok());
  EXPECT_TRUE(b_->in.WaitFor(1, kWaitMs));
}

INSTANTIATE_TEST_SUITE_P(Backends, Conformance, ::testing::ValuesIn(AllBackends()), BackendName);

}  // namespace
}  // namespace syncline::testing
