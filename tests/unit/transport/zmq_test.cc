// ZmqEndpoint over tcp://127.0.0.1 and ipc://: round trips, zero-copy send
// lifetimes, listen errors, and robustness against garbage from the network.
#include "transport/zmq/zmq_endpoint.h"

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <random>
#include <zmq.hpp>

#include "tests/unit/transport/collector.h"
#include "tests/unit/transport/messages.h"
#include "transport/wire.h"

namespace syncline {
namespace {

using ::testing::HasSubstr;
using testing::Collector;
using testing::Eventually;
using testing::Pattern;
using testing::Push;

Deadline Soon() { return Deadline::AfterMs(5000); }

std::string FreshIpcAddress() {
  static std::atomic<int> counter{0};
  return "ipc:///tmp/syncline-zmq-test-" + std::to_string(getpid()) + "-" + std::to_string(counter++) + ".sock";
}

std::string ListenSpec(const std::string& transport) {
  return transport == "tcp" ? "tcp://127.0.0.1:0" : FreshIpcAddress();
}

int PortOf(const std::string& tcp_address) {
  return std::stoi(tcp_address.substr(tcp_address.rfind(':') + 1));
}

// Two endpoints, `a` sending to `b` (peer id 2), over one transport.
class ZmqPairTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    a_ = CreateZmqEndpoint();
    b_ = CreateZmqEndpoint();
    auto a_addr = a_->Listen(ListenSpec(GetParam()), a_in_.receiver());
    ASSERT_TRUE(a_addr.ok()) << a_addr.status().ToString();
    auto b_addr = b_->Listen(ListenSpec(GetParam()), b_in_.receiver());
    ASSERT_TRUE(b_addr.ok()) << b_addr.status().ToString();
    a_address_ = *a_addr;
    b_address_ = *b_addr;
    ASSERT_TRUE(a_->Connect(2, b_address_).ok());
    ASSERT_TRUE(b_->Connect(1, a_address_).ok());
  }

  Collector a_in_, b_in_;
  std::unique_ptr<Endpoint> a_, b_;
  std::string a_address_, b_address_;
};

TEST_P(ZmqPairTest, ListenReturnsAConcreteAddress) {
  if (GetParam() == "tcp") {
    EXPECT_EQ(b_address_.rfind("tcp://127.0.0.1:", 0), 0u) << b_address_;
    EXPECT_GT(PortOf(b_address_), 0);
    EXPECT_NE(a_address_, b_address_);
  } else {
    EXPECT_EQ(b_address_.rfind("ipc://", 0), 0u) << b_address_;
  }
}

TEST_P(ZmqPairTest, RoundTripOfHeaderAndPayloadsOfSize0And1And1MiB) {
  const Buffer empty = Buffer::Copy(nullptr, 0), one = Pattern(1, 1), big = Pattern(1 << 20, 2), odd = Pattern(1, 3);
  ASSERT_TRUE(a_->Send(2, Push(0xabcdef0123ull, {empty, one, big, odd}), Soon()).ok());
  ASSERT_TRUE(b_in_.WaitFor(1));
  Message got = b_in_.at(0);
  EXPECT_EQ(got.header.op(), proto::PUSH);
  EXPECT_EQ(got.header.key(), 0xabcdef0123ull);
  EXPECT_EQ(got.header.round(), 3u);
  EXPECT_EQ(got.header.sender(), 1);
  EXPECT_EQ(got.header.request_id(), 77u);
  EXPECT_EQ(got.header.byte_length(), (1u << 20) + 2);
  ASSERT_EQ(got.payloads.size(), 4u);
  EXPECT_EQ(got.payloads[0].size(), 0u);
  ASSERT_EQ(got.payloads[1].size(), 1u);
  EXPECT_EQ(got.payloads[1].data()[0], one.data()[0]);
  ASSERT_EQ(got.payloads[2].size(), size_t{1} << 20);
  EXPECT_EQ(std::memcmp(got.payloads[2].data(), big.data(), big.size()), 0);
  EXPECT_EQ(got.payloads[3].data()[0], odd.data()[0]);
  // Received frames are the receiver's own copies: writable (a server sums into them).
  EXPECT_TRUE(got.payloads[2].writable());

  EXPECT_EQ(a_->stats().messages_sent, 1u);
  EXPECT_EQ(a_->stats().payload_bytes_sent, (1u << 20) + 2);
  EXPECT_EQ(b_->stats().messages_received, 1u);
  EXPECT_EQ(b_->stats().payload_bytes_received, (1u << 20) + 2);
}

TEST_P(ZmqPairTest, HeaderOnlyAndDefaultBufferFrames) {
  Message hb = MakeMessage(proto::HEARTBEAT, 1);
  ASSERT_TRUE(a_->Send(2, hb, Soon()).ok());
  // A default Buffer (no data, no owner) is a valid empty frame.
  ASSERT_TRUE(a_->Send(2, Push(5, {Buffer()}), Soon()).ok());
  // Static memory without an owner is copied into the frame.
  static const uint8_t kStatic[4] = {1, 2, 3, 4};
  ASSERT_TRUE(a_->Send(2, Push(6, {Buffer(kStatic, 4, nullptr)}), Soon()).ok());
  ASSERT_TRUE(b_in_.WaitFor(3));
  auto got = b_in_.TakeAll();
  EXPECT_EQ(got[0].header.op(), proto::HEARTBEAT);
  EXPECT_TRUE(got[0].payloads.empty());
  ASSERT_EQ(got[1].payloads.size(), 1u);
  EXPECT_EQ(got[1].payloads[0].size(), 0u);
  ASSERT_EQ(got[2].payloads.size(), 1u);
  EXPECT_EQ(std::memcmp(got[2].payloads[0].data(), kStatic, 4), 0);
}

TEST_P(ZmqPairTest, ManyMessagesArriveInOrderBothWays) {
  constexpr int kCount = 500;
  for (int i = 0; i < kCount; ++i) {
    ASSERT_TRUE(a_->Send(2, Push(i, {Pattern(64, i)}), Soon()).ok());
    ASSERT_TRUE(b_->Send(1, Push(i, {}), Soon()).ok());
  }
  ASSERT_TRUE(b_in_.WaitFor(kCount, 10000));
  ASSERT_TRUE(a_in_.WaitFor(kCount, 10000));
  auto got = b_in_.TakeAll();
  for (int i = 0; i < kCount; ++i) ASSERT_EQ(got[i].header.key(), static_cast<uint64_t>(i));
}

TEST_P(ZmqPairTest, SendsReleasePayloadOwnersAfterDelivery) {
  std::atomic<bool> released{false};
  std::vector<uint8_t>* bytes = new std::vector<uint8_t>(1 << 16, 0x3c);
  Buffer payload(bytes->data(), bytes->size(), std::shared_ptr<const void>(bytes, [&released](const void* p) {
                   delete static_cast<const std::vector<uint8_t>*>(p);
                   released = true;
                 }));
  ASSERT_TRUE(a_->Send(2, Push(1, {payload}), Soon()).ok());
  payload = Buffer();  // the endpoint now holds the only reference
  ASSERT_TRUE(b_in_.WaitFor(1));
  EXPECT_TRUE(Eventually([&] { return released.load(); }, 2000))
      << "the sender still holds the payload after the peer received it";
  Message got = b_in_.at(0);
  ASSERT_EQ(got.payloads.size(), 1u);
  EXPECT_EQ(got.payloads[0].data()[100], 0x3c);
}

TEST_P(ZmqPairTest, ReceivedPayloadsOutliveTheReceiverCall) {
  ASSERT_TRUE(a_->Send(2, Push(1, {Pattern(4096, 9)}), Soon()).ok());
  ASSERT_TRUE(b_in_.WaitFor(1));
  Buffer kept = b_in_.TakeAll()[0].payloads[0];
  b_->Close();  // the endpoint and its zmq context are gone; the frame must not be
  Buffer want = Pattern(4096, 9);
  EXPECT_EQ(std::memcmp(kept.data(), want.data(), 4096), 0);
}

TEST_P(ZmqPairTest, SendToUnknownPeerIsNotFound) {
  Status st = a_->Send(42, MakeMessage(proto::HEARTBEAT, 1), Soon());
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
  EXPECT_THAT(st.message(), HasSubstr("42"));
}

TEST_P(ZmqPairTest, MalformedMultipartFromARawDealerIsDroppedAndCounted) {
  zmq::context_t ctx(1);
  zmq::socket_t dealer(ctx, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::linger, 0);
  dealer.connect(b_address_);

  // 1. A header frame that is not protobuf.
  const std::string garbage("\xff\xfe garbage, not a header \x01");
  dealer.send(zmq::buffer(garbage), zmq::send_flags::none);
  // 2. A well-formed header whose byte_length disagrees with its frames.
  Message lying = Push(1, {Pattern(8, 1)});
  lying.header.set_byte_length(12);
  const std::string lying_header = EncodeHeader(lying.header);
  std::string eight(8, 'x');
  dealer.send(zmq::buffer(lying_header), zmq::send_flags::sndmore);
  dealer.send(zmq::buffer(eight), zmq::send_flags::none);
  // 3. An empty message.
  dealer.send(zmq::message_t(), zmq::send_flags::none);
  // 4. A header frame beyond the size limit.
  std::string huge(kMaxHeaderBytes + 10, '\x08');
  dealer.send(zmq::buffer(huge), zmq::send_flags::none);
  // 5. A payload on a control op.
  const std::string hb_header = EncodeHeader(MakeMessage(proto::HEARTBEAT, 9).header);
  dealer.send(zmq::buffer(hb_header), zmq::send_flags::sndmore);
  dealer.send(zmq::buffer(eight), zmq::send_flags::none);
  // 6. Finally, a valid message over the same connection.
  Message good = Push(2, {Pattern(8, 2)});
  const std::string good_header = EncodeHeader(good.header);
  dealer.send(zmq::buffer(good_header), zmq::send_flags::sndmore);
  dealer.send(zmq::buffer(good.payloads[0].data(), 8), zmq::send_flags::none);

  ASSERT_TRUE(b_in_.WaitFor(1));
  ASSERT_TRUE(Eventually([&] { return b_->stats().messages_rejected == 5; }))
      << "rejected " << b_->stats().messages_rejected;
  ASSERT_EQ(b_in_.size(), 1u);
  EXPECT_EQ(b_in_.at(0).header.key(), 2u);
  // And the endpoint keeps serving its normal peers.
  ASSERT_TRUE(a_->Send(2, MakeMessage(proto::FINISH, 1), Soon()).ok());
  ASSERT_TRUE(b_in_.WaitFor(2));
  EXPECT_EQ(b_in_.at(1).header.op(), proto::FINISH);
}

INSTANTIATE_TEST_SUITE_P(Transports, ZmqPairTest, ::testing::Values("tcp", "ipc"));

TEST(ZmqEndpointTest, ListeningOnAPortInUseIsUnavailableNamingTheAddress) {
  Collector in;
  auto first = CreateZmqEndpoint();
  auto address = first->Listen("tcp://127.0.0.1:0", in.receiver());
  ASSERT_TRUE(address.ok());
  auto second = CreateZmqEndpoint();
  auto st = second->Listen(*address, [](Message&&) {});
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(st.status().message(), HasSubstr(*address));
  second->Close();
  // The first endpoint is unaffected.
  auto sender = CreateZmqEndpoint();
  ASSERT_TRUE(sender->Connect(1, *address).ok());
  ASSERT_TRUE(sender->Send(1, MakeMessage(proto::HEARTBEAT, 5), Soon()).ok());
  EXPECT_TRUE(in.WaitFor(1));
}

TEST(ZmqEndpointTest, ListeningOnAPortHeldByAPlainSocketIsUnavailable) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  sa.sin_port = 0;
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  socklen_t len = sizeof(sa);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len), 0);
  const std::string address = "tcp://127.0.0.1:" + std::to_string(ntohs(sa.sin_port));
  auto e = CreateZmqEndpoint();
  auto st = e->Listen(address, [](Message&&) {});
  close(fd);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(st.status().message(), HasSubstr(address));
}

TEST(ZmqEndpointTest, NonZmqSchemeIsInvalidArgument) {
  auto e = CreateZmqEndpoint();
  auto st = e->Listen("loop://x", [](Message&&) {});
  EXPECT_EQ(st.status().code(), StatusCode::kInvalidArgument);
}

// Connects a plain TCP socket to `port`, writes `bytes`, closes.
void WriteRaw(int port, const std::string& bytes) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  sa.sin_port = htons(static_cast<uint16_t>(port));
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0) << strerror(errno);
  // The endpoint may hang up mid-write; that is fine (and must not SIGPIPE us).
  (void)send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  close(fd);
}

TEST(ZmqEndpointTest, RawTcpGarbageDoesNotStopTheEndpoint) {
  Collector in;
  auto server = CreateZmqEndpoint();
  auto address = server->Listen("tcp://127.0.0.1:0", in.receiver());
  ASSERT_TRUE(address.ok());
  const int port = PortOf(*address);

  std::mt19937 gen(7);
  std::string garbage(4096, '\0');
  for (char& c : garbage) c = static_cast<char>(gen());
  WriteRaw(port, garbage);
  // A valid ZMTP 3 signature followed by garbage, and one claiming a huge frame.
  std::string zmtp("\xff\0\0\0\0\0\0\0\x01\x7f", 10);
  WriteRaw(port, zmtp + garbage);
  WriteRaw(port, zmtp + std::string("\x03\x00NULL", 6) + std::string(48, '\0') +
                     std::string("\x06\xff\xff\xff\xff\xff\xff\xff\xff", 9));
  WriteRaw(port, "");  // connect and hang up at once

  auto sender = CreateZmqEndpoint();
  ASSERT_TRUE(sender->Connect(1, *address).ok());
  ASSERT_TRUE(sender->Send(1, Push(11, {Pattern(16, 1)}), Soon()).ok());
  ASSERT_TRUE(in.WaitFor(1));
  EXPECT_EQ(in.at(0).header.key(), 11u);
  // Nothing the garbage produced reached the receiver.
  EXPECT_EQ(in.size(), 1u);
  EXPECT_EQ(server->stats().messages_received, 1u);
}

TEST(ZmqEndpointTest, MessagesOverTheSizeLimitAreRefusedWithoutHarm) {
  ZmqOptions options;
  options.max_message_bytes = 1024;
  Collector in;
  auto server = CreateZmqEndpoint(options);
  auto address = server->Listen("tcp://127.0.0.1:0", in.receiver());
  ASSERT_TRUE(address.ok());
  auto big_sender = CreateZmqEndpoint();
  ASSERT_TRUE(big_sender->Connect(1, *address).ok());
  ASSERT_TRUE(big_sender->Send(1, Push(1, {Pattern(4096, 1)}), Soon()).ok());
  auto small_sender = CreateZmqEndpoint();
  ASSERT_TRUE(small_sender->Connect(1, *address).ok());
  ASSERT_TRUE(small_sender->Send(1, Push(2, {Pattern(512, 2)}), Soon()).ok());
  ASSERT_TRUE(in.WaitFor(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_EQ(in.size(), 1u);
  EXPECT_EQ(in.at(0).header.key(), 2u);
}

TEST(ZmqEndpointTest, MessagesQueuedBeforeThePeerListensAreDelivered) {
  // Reserve a port, free it, connect to it before anyone listens there.
  auto probe = CreateZmqEndpoint();
  auto address = probe->Listen("tcp://127.0.0.1:0", [](Message&&) {});
  ASSERT_TRUE(address.ok());
  probe->Close();
  auto sender = CreateZmqEndpoint();
  ASSERT_TRUE(sender->Connect(1, *address).ok());
  ASSERT_TRUE(sender->Send(1, MakeMessage(proto::HEARTBEAT, 3), Soon()).ok());
  Collector in;
  auto late = CreateZmqEndpoint();
  auto st = late->Listen(*address, in.receiver());
  if (!st.ok()) GTEST_SKIP() << "port was taken in between: " << st.status().ToString();
  EXPECT_TRUE(in.WaitFor(1, 5000));
}

TEST(ZmqEndpointTest, CloseStopsReceivingAndIsIdempotent) {
  std::atomic<int> calls{0};
  auto server = CreateZmqEndpoint();
  auto address = server->Listen("tcp://127.0.0.1:0", [&](Message&&) { ++calls; });
  ASSERT_TRUE(address.ok());
  auto sender = CreateZmqEndpoint();
  ASSERT_TRUE(sender->Connect(1, *address).ok());
  ASSERT_TRUE(sender->Send(1, MakeMessage(proto::HEARTBEAT, 3), Soon()).ok());
  ASSERT_TRUE(Eventually([&] { return calls.load() == 1; }));
  server->Close();
  server->Close();
  ASSERT_TRUE(sender->Send(1, MakeMessage(proto::HEARTBEAT, 3), Soon()).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(calls.load(), 1);
  // Sending from a closed endpoint fails cleanly.
  EXPECT_FALSE(server->Send(1, MakeMessage(proto::HEARTBEAT, 3), Soon()).ok());
}

TEST(ZmqEndpointTest, ConcurrentSendersToOnePeer) {
  Collector in;
  auto server = CreateZmqEndpoint();
  auto address = server->Listen("tcp://127.0.0.1:0", in.receiver());
  ASSERT_TRUE(address.ok());
  auto sender = CreateZmqEndpoint();
  ASSERT_TRUE(sender->Connect(1, *address).ok());
  constexpr int kThreads = 4, kEach = 200;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i)
        if (!sender->Send(1, Push(t * 1000 + i, {Pattern(32, i)}), Soon()).ok()) ++failures;
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  ASSERT_TRUE(in.WaitFor(kThreads * kEach, 10000));
  EXPECT_EQ(server->stats().messages_rejected, 0u) << "interleaved multipart frames";
}

}  // namespace
}  // namespace syncline
