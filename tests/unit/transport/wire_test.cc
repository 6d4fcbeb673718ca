// Wire validation: every malformed message is rejected with a reason, every
// well-formed one passes, and DecodeMessage never trusts the bytes it is given.
#include "transport/wire.h"

#include <gmock/gmock.h>
#include <unistd.h>
#include <gtest/gtest.h>

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <sstream>

namespace syncline {
namespace {

using ::testing::HasSubstr;

Buffer Bytes(size_t n, uint8_t fill = 0x11) {
  std::vector<uint8_t> v(n, fill);
  return Buffer::Copy(v.data(), v.size());
}

Message Push(proto::DType dtype, std::vector<size_t> frame_sizes) {
  Message m = MakeMessage(proto::PUSH, 3);
  m.header.set_key(42);
  m.header.set_round(7);
  m.header.set_dtype(dtype);
  uint64_t total = 0;
  for (size_t n : frame_sizes) {
    m.payloads.push_back(Bytes(n));
    total += n;
  }
  m.header.set_byte_length(total);
  return m;
}

// Encodes `m`'s header and decodes it again with `m`'s payloads.
Result<Message> RoundTrip(const Message& m) {
  std::string header = EncodeHeader(m.header);
  return DecodeMessage(header.data(), header.size(), m.payloads);
}

void ExpectRejected(const Message& m, const std::string& why) {
  Status st = ValidateMessage(m);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr(why));
  auto decoded = RoundTrip(m);
  ASSERT_FALSE(decoded.ok());
  EXPECT_THAT(decoded.status().message(), HasSubstr(why));
}

TEST(WireTest, MakeMessageSetsOpAndSender) {
  Message m = MakeMessage(proto::HEARTBEAT, 12);
  EXPECT_EQ(m.header.op(), proto::HEARTBEAT);
  EXPECT_EQ(m.header.sender(), 12);
  EXPECT_TRUE(m.payloads.empty());
}

TEST(WireTest, PayloadBytesTotalsAllFrames) {
  EXPECT_EQ(PayloadBytes(Push(proto::FLOAT32, {})), 0u);
  EXPECT_EQ(PayloadBytes(Push(proto::FLOAT32, {4, 0, 12})), 16u);
}

TEST(WireTest, AcceptsWellFormedDataMessages) {
  EXPECT_TRUE(ValidateMessage(Push(proto::FLOAT32, {4})).ok());
  EXPECT_TRUE(ValidateMessage(Push(proto::FLOAT32, {4, 8, 0})).ok());
  EXPECT_TRUE(ValidateMessage(Push(proto::FLOAT64, {16})).ok());
  EXPECT_TRUE(ValidateMessage(Push(proto::FLOAT16, {2, 6})).ok());
  EXPECT_TRUE(ValidateMessage(Push(proto::BFLOAT16, {10})).ok());
  Message pull = MakeMessage(proto::PULL, 3);
  pull.header.set_dtype(proto::FLOAT16);
  EXPECT_TRUE(ValidateMessage(pull).ok());
  Message ack = MakeMessage(proto::PUSH_ACK, 0);
  ack.header.set_dtype(proto::FLOAT64);
  EXPECT_TRUE(ValidateMessage(ack).ok());
  Message reply = MakeMessage(proto::PULL_REPLY, 0);
  reply.header.set_dtype(proto::BFLOAT16);
  reply.payloads.push_back(Bytes(6));
  reply.header.set_byte_length(6);
  EXPECT_TRUE(ValidateMessage(reply).ok());
}

TEST(WireTest, AcceptsWellFormedControlMessages) {
  for (proto::Op op : {proto::HEARTBEAT, proto::HEARTBEAT_ACK, proto::FINISH, proto::SHUTDOWN})
    EXPECT_TRUE(ValidateMessage(MakeMessage(op, 1)).ok()) << proto::Op_Name(op);

  Message reg = MakeMessage(proto::REGISTER, -1);
  reg.header.mutable_register_body()->set_address("tcp://127.0.0.1:1");
  EXPECT_TRUE(ValidateMessage(reg).ok());
  Message book = MakeMessage(proto::ADDRESS_BOOK, 0);
  book.header.mutable_address_book()->set_your_id(3);
  EXPECT_TRUE(ValidateMessage(book).ok());
  for (proto::Op op : {proto::BARRIER, proto::BARRIER_RELEASE}) {
    Message b = MakeMessage(op, 1);
    b.header.mutable_barrier()->set_sequence(2);
    EXPECT_TRUE(ValidateMessage(b).ok());
  }
  Message abort = MakeMessage(proto::ABORT, 1);
  abort.header.mutable_abort()->set_reason("x");
  EXPECT_TRUE(ValidateMessage(abort).ok());
  Message declare = MakeMessage(proto::DECLARE, 1);
  declare.header.mutable_declare()->mutable_spec()->set_name("w");
  EXPECT_TRUE(ValidateMessage(declare).ok());
  Message dreply = MakeMessage(proto::DECLARE_REPLY, 0);
  dreply.header.mutable_declare_reply()->set_name("w");
  EXPECT_TRUE(ValidateMessage(dreply).ok());
  Message error = MakeMessage(proto::ERROR, 0);
  error.header.mutable_error()->set_message("bad");
  EXPECT_TRUE(ValidateMessage(error).ok());
}

TEST(WireTest, EmptyBodiesStillCountAsPresent) {
  // A body that is set but has only default fields encodes as an empty
  // sub-message; it must survive the trip over the wire.
  Message abort = MakeMessage(proto::ABORT, 1);
  abort.header.mutable_abort();
  auto decoded = RoundTrip(abort);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_TRUE(decoded->header.has_abort());
}

TEST(WireTest, RoundTripPreservesEveryHeaderField) {
  Message m = Push(proto::FLOAT64, {8, 16});
  m.header.set_key(0xdeadbeef00000003ull);
  m.header.set_round(1ull << 40);
  m.header.set_sender(-1);
  m.header.set_request_id(123456789);
  m.header.set_flags(proto::FLAG_PULL_AFTER_PUSH | proto::FLAG_AVERAGE);
  auto d = RoundTrip(m);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->header.op(), proto::PUSH);
  EXPECT_EQ(d->header.key(), 0xdeadbeef00000003ull);
  EXPECT_EQ(d->header.round(), 1ull << 40);
  EXPECT_EQ(d->header.sender(), -1);
  EXPECT_EQ(d->header.dtype(), proto::FLOAT64);
  EXPECT_EQ(d->header.byte_length(), 24u);
  EXPECT_EQ(d->header.request_id(), 123456789u);
  EXPECT_EQ(d->header.flags(), 3u);
  ASSERT_EQ(d->payloads.size(), 2u);
  EXPECT_EQ(d->payloads[0].data(), m.payloads[0].data()) << "payloads are passed through, not copied";
  EXPECT_EQ(d->payloads[1].size(), 16u);
}

TEST(WireTest, RejectsUnknownOps) {
  ExpectRejected(MakeMessage(proto::OP_UNKNOWN, 1), "unknown op 0");
  ExpectRejected(MakeMessage(static_cast<proto::Op>(19), 1), "unknown op 19");
  ExpectRejected(MakeMessage(static_cast<proto::Op>(1000), 1), "unknown op 1000");
  // Raw bytes: field 1 (op) = 99 as a varint.
  const char bytes[] = {0x08, 0x63};
  auto d = DecodeMessage(bytes, sizeof(bytes), {});
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(d.status().message(), HasSubstr("unknown op 99"));
}

TEST(WireTest, RejectsEmptyHeaderFrame) {
  auto d = DecodeMessage("", 0, {});
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(d.status().message(), HasSubstr("unknown op"));
}

TEST(WireTest, RejectsGarbageHeaderBytes) {
  const std::vector<std::string> garbage = {
      std::string("\x0a\xff\xff\xff\x0f", 5),  // length-delimited field longer than the frame
      std::string("\x08\xff\xff\xff", 4),      // truncated varint
      std::string("\x0c", 1),                  // end-group tag without a start
      std::string("\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", 11),  // overlong varint tag
      std::string("not a protobuf header at all"),
  };
  for (const std::string& g : garbage) {
    auto d = DecodeMessage(g.data(), g.size(), {});
    ASSERT_FALSE(d.ok()) << "accepted garbage of " << g.size() << " bytes";
    EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument);
  }
}

TEST(WireTest, RandomBytesNeverCrashAndOnlyValidMessagesPass) {
  std::mt19937 gen(20240611);
  std::uniform_int_distribution<int> byte(0, 255), len(0, 300);
  int accepted = 0;
  for (int i = 0; i < 5000; ++i) {
    std::string g(len(gen), '\0');
    for (char& c : g) c = static_cast<char>(byte(gen));
    auto d = DecodeMessage(g.data(), g.size(), {});
    if (d.ok()) {
      ++accepted;
      EXPECT_TRUE(ValidateMessage(*d).ok());
    }
  }
  EXPECT_LT(accepted, 50) << "random bytes should almost never form a valid message";
}

TEST(WireTest, RejectsOversizedHeaderFrame) {
  std::string big(kMaxHeaderBytes + 1, '\0');
  auto d = DecodeMessage(big.data(), big.size(), {});
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(d.status().message(), HasSubstr("exceeds the limit"));
}

TEST(WireTest, RejectsByteLengthMismatch) {
  Message m = Push(proto::FLOAT32, {8});
  m.header.set_byte_length(12);
  ExpectRejected(m, "header says 12 payload bytes, frames hold 8");
  m.header.set_byte_length(0);
  ExpectRejected(m, "header says 0 payload bytes, frames hold 8");
  Message multi = Push(proto::FLOAT32, {4, 4});
  multi.header.set_byte_length(4);  // only the first frame counted
  ExpectRejected(multi, "frames hold 8");
  Message claims = MakeMessage(proto::PULL, 1);
  claims.header.set_dtype(proto::FLOAT32);
  claims.header.set_byte_length(1ull << 40);  // claims bytes that never came
  ExpectRejected(claims, "frames hold 0");
}

TEST(WireTest, RejectsPayloadOnOpsThatCarryNone) {
  for (proto::Op op : {proto::HEARTBEAT, proto::FINISH, proto::SHUTDOWN, proto::PULL, proto::PUSH_ACK}) {
    Message m = MakeMessage(op, 1);
    m.header.set_dtype(proto::FLOAT32);
    m.payloads.push_back(Bytes(4));
    m.header.set_byte_length(4);
    ExpectRejected(m, proto::Op_Name(op) + " must not carry a payload");
  }
  Message abort = MakeMessage(proto::ABORT, 1);
  abort.header.mutable_abort()->set_reason("r");
  abort.payloads.push_back(Bytes(1));
  abort.header.set_byte_length(1);
  ExpectRejected(abort, "ABORT must not carry a payload");
}

TEST(WireTest, RejectsDataOpsWithUnknownDtype) {
  ExpectRejected(Push(proto::DTYPE_UNKNOWN, {4}), "unknown wire dtype 0");
  ExpectRejected(Push(static_cast<proto::DType>(9), {4}), "unknown wire dtype 9");
  for (proto::Op op : {proto::PULL, proto::PUSH_ACK, proto::PULL_REPLY}) {
    Message m = MakeMessage(op, 1);  // dtype left unset
    ExpectRejected(m, proto::Op_Name(op));
  }
}

TEST(WireTest, RejectsPayloadsThatAreNotWholeElements) {
  ExpectRejected(Push(proto::FLOAT32, {6}), "not a whole number of fp32 elements");
  ExpectRejected(Push(proto::FLOAT64, {4, 8}), "not a whole number of fp64 elements");
  ExpectRejected(Push(proto::FLOAT16, {3}), "fp16");
  // Frames may split elements as long as the total is whole.
  EXPECT_TRUE(ValidateMessage(Push(proto::FLOAT32, {3, 5})).ok());
}

TEST(WireTest, RejectsControlOpsMissingTheirBody) {
  for (proto::Op op : {proto::REGISTER, proto::ADDRESS_BOOK, proto::BARRIER, proto::BARRIER_RELEASE, proto::ABORT,
                       proto::DECLARE, proto::DECLARE_REPLY, proto::ERROR}) {
    ExpectRejected(MakeMessage(op, 1), proto::Op_Name(op) + " lacks its body");
  }
  // The wrong body is as bad as none.
  Message reg = MakeMessage(proto::REGISTER, 1);
  reg.header.mutable_barrier()->set_sequence(1);
  ExpectRejected(reg, "REGISTER lacks its body");
  Message release = MakeMessage(proto::BARRIER_RELEASE, 0);
  release.header.mutable_abort()->set_reason("no");
  ExpectRejected(release, "BARRIER_RELEASE lacks its body");
}

}  // namespace
}  // namespace syncline

namespace syncline {
namespace {

TEST(WireTest, HeadersWithInvalidUtf8AreRejectedWithoutFloodingTheLog) {
  // A peer sending strings that are not UTF-8: protobuf rejects each header
  // and would write a line of its own to stderr for each, unlimited.
  proto::Header h;
  h.set_op(proto::ABORT);
  h.mutable_abort()->set_reason("ok");
  std::string bytes = EncodeHeader(h);
  const size_t at = bytes.find("ok");
  ASSERT_NE(at, std::string::npos);
  bytes[at] = static_cast<char>(0xff);  // not UTF-8
  std::ostringstream log;
  auto previous = spdlog::default_logger();
  spdlog::set_default_logger(
      std::make_shared<spdlog::logger>("test", std::make_shared<spdlog::sinks::ostream_sink_mt>(log)));
  std::FILE* captured = std::tmpfile();
  ASSERT_NE(captured, nullptr);
  std::fflush(stderr);
  const int saved_stderr = dup(2);
  dup2(fileno(captured), 2);
  for (int i = 0; i < 10000; ++i) EXPECT_FALSE(DecodeMessage(bytes.data(), bytes.size(), {}).ok());
  std::fflush(stderr);
  dup2(saved_stderr, 2);
  close(saved_stderr);
  spdlog::set_default_logger(previous);
  const long stderr_bytes = std::ftell(captured) > 0 ? std::ftell(captured) : lseek(fileno(captured), 0, SEEK_END);
  std::fclose(captured);
  EXPECT_EQ(stderr_bytes, 0) << "protobuf wrote to stderr itself";
  const std::string text = log.str();
  EXPECT_LE(std::count(text.begin(), text.end(), '\n'), 21) << "its lines are rate-limited like ours";
}

}  // namespace
}  // namespace syncline
