// ZmqEndpoint with CURVE (SYNCLINE_ENCRYPT): messages arrive intact and what
// crosses the wire does not show them; a peer without the right server key,
// or a plain peer, does not get through.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/unit/transport/collector.h"
#include "tests/unit/transport/tcp_relay.h"
#include "transport/factory.h"
#include "transport/wire.h"
#include "transport/zmq/zmq_endpoint.h"

namespace syncline {
namespace {

using ::testing::HasSubstr;
using testing::Collector;
using testing::TcpRelay;

const std::string kMarker = "SYNCLINE-PLAINTEXT-MARKER:";

Message Marked() {
  Message m = MakeMessage(proto::PUSH, 1);
  m.header.set_key(77);
  m.header.set_dtype(proto::FLOAT32);
  std::string text;
  while (text.size() < 4096) text += kMarker;
  text.resize(4096);
  m.payloads.push_back(Buffer::Copy(text.data(), text.size()));
  m.header.set_byte_length(4096);
  return m;
}

int PortOf(const std::string& address) {
  const size_t colon = address.rfind(':', address.find('|'));
  return std::stoi(address.substr(colon + 1));
}

std::string KeyPart(const std::string& address) { return address.substr(address.find('|')); }

// Sends one marked message from a fresh endpoint (`encrypt`) to `b` through a
// relay; returns what crossed the relay towards `b`.
std::string SendThroughRelay(bool encrypt, Endpoint& sender_of_b, const std::string& b_address, Collector& b_in) {
  (void)sender_of_b;
  TcpRelay relay(PortOf(b_address));
  ZmqOptions options;
  options.curve = encrypt;
  auto a = CreateZmqEndpoint(options);
  Collector a_in;
  EXPECT_TRUE(a->Listen("tcp://127.0.0.1:0", a_in.receiver()).ok());
  const std::string via = "tcp://127.0.0.1:" + std::to_string(relay.port()) + (encrypt ? KeyPart(b_address) : "");
  EXPECT_TRUE(a->Connect(2, via).ok());
  EXPECT_TRUE(a->Send(2, Marked(), Deadline::AfterMs(2000)).ok());
  EXPECT_TRUE(b_in.WaitFor(1));
  a->Close();
  return relay.upstream();
}

TEST(ZmqCurveTest, EncryptedMessagesArriveIntactAndTheWireDoesNotShowThem) {
  ZmqOptions options;
  options.curve = true;
  auto b = CreateZmqEndpoint(options);
  Collector b_in;
  auto address = b->Listen("tcp://127.0.0.1:0", b_in.receiver());
  ASSERT_TRUE(address.ok()) << address.status().ToString();
  EXPECT_THAT(*address, HasSubstr("|curve:"));
  const std::string wire = SendThroughRelay(true, *b, *address, b_in);
  Message got = b_in.at(0);
  ASSERT_EQ(got.payloads.size(), 1u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(got.payloads[0].data()), kMarker.size()), kMarker);
  EXPECT_GT(wire.size(), 4096u);
  EXPECT_EQ(wire.find(kMarker), std::string::npos) << "plaintext crossed the wire";
  b->Close();
}

TEST(ZmqCurveTest, TheRelayDoesSeePlainTraffic) {
  // The check above can fail: without CURVE the marker is on the wire.
  auto b = CreateZmqEndpoint();
  Collector b_in;
  auto address = b->Listen("tcp://127.0.0.1:0", b_in.receiver());
  ASSERT_TRUE(address.ok());
  const std::string wire = SendThroughRelay(false, *b, *address, b_in);
  EXPECT_NE(wire.find(kMarker), std::string::npos);
  b->Close();
}

TEST(ZmqCurveTest, MismatchedEncryptionIsAClearErrorAndAWrongKeyGetsNothingThrough) {
  ZmqOptions curve;
  curve.curve = true;
  auto secure = CreateZmqEndpoint(curve);
  auto plain = CreateZmqEndpoint();
  Collector secure_in, plain_in;
  auto secure_address = secure->Listen("tcp://127.0.0.1:0", secure_in.receiver());
  auto plain_address = plain->Listen("tcp://127.0.0.1:0", plain_in.receiver());
  ASSERT_TRUE(secure_address.ok() && plain_address.ok());
  Status st = plain->Connect(1, *secure_address);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("SYNCLINE_ENCRYPT=1"));
  st = secure->Connect(2, *plain_address);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("no CURVE key"));

  // A sender that names another server key: the handshake fails, nothing is delivered.
  auto other = CreateZmqEndpoint(curve);
  Collector other_in;
  auto other_address = other->Listen("tcp://127.0.0.1:0", other_in.receiver());
  ASSERT_TRUE(other_address.ok());
  const std::string wrong = secure_address->substr(0, secure_address->find('|')) + KeyPart(*other_address);
  auto sender = CreateZmqEndpoint(curve);
  Collector sender_in;
  ASSERT_TRUE(sender->Listen("tcp://127.0.0.1:0", sender_in.receiver()).ok());
  ASSERT_TRUE(sender->Connect(1, wrong).ok());
  ASSERT_TRUE(sender->Send(1, Marked(), Deadline::AfterMs(500)).ok());
  EXPECT_FALSE(secure_in.WaitFor(1, 500));
  for (auto* e : {secure.get(), plain.get(), other.get(), sender.get()}) e->Close();
}

TEST(ZmqCurveTest, AFixedSecretKeyGivesTheSamePublicKey) {
  ZmqOptions options;
  options.curve = true;
  options.curve_secret_key = std::string(32, '\x05');
  auto a = CreateZmqEndpoint(options);
  auto b = CreateZmqEndpoint(options);
  Collector in;
  auto a_address = a->Listen("tcp://127.0.0.1:0", in.receiver());
  auto b_address = b->Listen("tcp://127.0.0.1:0", in.receiver());
  ASSERT_TRUE(a_address.ok() && b_address.ok());
  EXPECT_EQ(KeyPart(*a_address), KeyPart(*b_address));
  options.curve_secret_key = "short";
  auto bad = CreateZmqEndpoint(options);
  EXPECT_FALSE(bad->Listen("tcp://127.0.0.1:0", in.receiver()).ok());
  a->Close();
  b->Close();
}

}  // namespace
}  // namespace syncline
