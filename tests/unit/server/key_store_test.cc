// KeyStore driven directly with hand-made PUSH/PULL messages (no network):
// sync rounds, errors, averaging, deterministic order, async mode, pooling.
#include "server/key_store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/mman.h>

#include <cstring>
#include <random>
#include <set>

#include "summation/kernels.h"
#include "transport/wire.h"

namespace syncline {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kKey = (uint64_t{3} << 32) | 1;
// Worker of rank r has node id kNodeBase + r.
constexpr int32_t kNodeBase = 100;

int32_t NodeOf(int rank) { return kNodeBase + rank; }

template <typename T>
proto::DType WireOf();
template <>
proto::DType WireOf<float>() { return proto::FLOAT32; }
template <>
proto::DType WireOf<double>() { return proto::FLOAT64; }

Message PushBytes(uint64_t key, uint64_t round, int rank, proto::DType dtype, const void* data, size_t bytes,
                  uint32_t flags = 0, uint64_t request_id = 0) {
  Message m = MakeMessage(proto::PUSH, NodeOf(rank));
  m.header.set_key(key);
  m.header.set_round(round);
  m.header.set_dtype(dtype);
  m.header.set_flags(flags);
  m.header.set_request_id(request_id);
  m.payloads.push_back(Buffer::Copy(data, bytes));
  m.header.set_byte_length(bytes);
  EXPECT_TRUE(ValidateMessage(m).ok()) << "test bug: malformed push";
  return m;
}

template <typename T>
Message Push(uint64_t round, int rank, const std::vector<T>& values, uint32_t flags = 0, uint64_t key = kKey,
             uint64_t request_id = 0) {
  return PushBytes(key, round, rank, WireOf<T>(), values.data(), values.size() * sizeof(T), flags, request_id);
}

Message Pull(uint64_t round, int rank, proto::DType dtype = proto::FLOAT32, uint64_t key = kKey,
             uint64_t request_id = 0) {
  Message m = MakeMessage(proto::PULL, NodeOf(rank));
  m.header.set_key(key);
  m.header.set_round(round);
  m.header.set_dtype(dtype);
  m.header.set_request_id(request_id);
  EXPECT_TRUE(ValidateMessage(m).ok());
  return m;
}

template <typename T>
std::vector<T> ValuesOf(const Message& reply) {
  EXPECT_EQ(reply.payloads.size(), 1u);
  if (reply.payloads.size() != 1) return {};
  const Buffer& b = reply.payloads[0];
  EXPECT_EQ(b.size() % sizeof(T), 0u);
  std::vector<T> out(b.size() / sizeof(T));
  std::memcpy(out.data(), b.data(), b.size());
  return out;
}

std::vector<Reply> OfOp(const std::vector<Reply>& replies, proto::Op op) {
  std::vector<Reply> out;
  for (const Reply& r : replies)
    if (r.message.header.op() == op) out.push_back(r);
  return out;
}

class KeyStoreTest : public ::testing::Test {
 protected:
  void Make(int workers, bool async = false, bool deterministic = false) {
    store_ = std::make_unique<KeyStore>(KeyStoreOptions{workers, async, deterministic}, &engine_, &pool_);
  }
  std::vector<Reply> DoPush(const Message& m, int rank) {
    std::vector<Reply> out;
    store_->Push(m, rank, &out);
    return out;
  }
  std::vector<Reply> DoPull(const Message& m, int rank) {
    std::vector<Reply> out;
    store_->Pull(m, rank, &out);
    return out;
  }
  // Expects exactly one ERROR reply, to `rank`'s node, whose message holds every `parts`.
  void ExpectError(const std::vector<Reply>& out, int rank, const std::vector<std::string>& parts) {
    ASSERT_EQ(out.size(), 1u);
    const Reply& r = out[0];
    EXPECT_EQ(r.to, NodeOf(rank));
    ASSERT_EQ(r.message.header.op(), proto::ERROR);
    EXPECT_TRUE(ValidateMessage(r.message).ok()) << "error replies must be valid on the wire";
    for (const auto& p : parts) EXPECT_THAT(r.message.header.error().message(), HasSubstr(p));
  }

  SummationEngine engine_{1};
  BufferPool pool_;
  std::unique_ptr<KeyStore> store_;
};

TEST_F(KeyStoreTest, SyncSumsExactlyAndAnswersPullAfterPushOnlyWhenAllPushed) {
  Make(3);
  const std::vector<float> v0 = {1, 2, 3, 4}, v1 = {10, 20, 30, 40}, v2 = {-1, 0.5f, 100, 0};
  auto out = DoPush(Push(0, 0, v0, proto::FLAG_PULL_AFTER_PUSH, kKey, 11), 0);
  EXPECT_TRUE(out.empty()) << "pull-after-push answered before the round completed";
  out = DoPush(Push(0, 1, v1, proto::FLAG_PULL_AFTER_PUSH, kKey, 12), 1);
  EXPECT_TRUE(out.empty());
  out = DoPush(Push(0, 2, v2, proto::FLAG_PULL_AFTER_PUSH, kKey, 13), 2);
  ASSERT_EQ(out.size(), 3u);
  std::set<int32_t> to;
  for (const Reply& r : out) {
    to.insert(r.to);
    const auto& h = r.message.header;
    EXPECT_EQ(h.op(), proto::PULL_REPLY);
    EXPECT_EQ(h.key(), kKey);
    EXPECT_EQ(h.round(), 0u);
    EXPECT_EQ(h.dtype(), proto::FLOAT32);
    EXPECT_EQ(h.byte_length(), 16u);
    EXPECT_EQ(h.request_id(), static_cast<uint64_t>(11 + (r.to - kNodeBase))) << "request id of the push";
    EXPECT_TRUE(ValidateMessage(r.message).ok());
    EXPECT_EQ(ValuesOf<float>(r.message), (std::vector<float>{10, 22.5f, 133, 44}));
  }
  EXPECT_EQ(to, (std::set<int32_t>{NodeOf(0), NodeOf(1), NodeOf(2)}));
  EXPECT_EQ(store_->num_keys(), 1u);
}

TEST_F(KeyStoreTest, APushAskingForItsAckIsAckedAtOnceAndAnsweredWhenTheRoundCompletes) {
  // A worker's scheduling credit comes back on this ack: it must not wait for
  // the other workers, whose pushes may be queued behind this worker's credit.
  Make(2);
  const uint32_t flags = proto::FLAG_PULL_AFTER_PUSH | proto::FLAG_ACK_PUSH;
  auto out = DoPush(Push<float>(0, 0, {1, 2}, flags, kKey, 21), 0);
  ASSERT_EQ(out.size(), 1u) << "the ack must not wait for the round";
  EXPECT_EQ(out[0].message.header.op(), proto::PUSH_ACK);
  EXPECT_EQ(out[0].to, NodeOf(0));
  EXPECT_EQ(out[0].message.header.request_id(), 21u);
  EXPECT_TRUE(ValidateMessage(out[0].message).ok());
  out = DoPush(Push<float>(0, 1, {10, 20}, flags, kKey, 22), 1);
  ASSERT_EQ(OfOp(out, proto::PUSH_ACK).size(), 1u);
  EXPECT_EQ(OfOp(out, proto::PUSH_ACK)[0].to, NodeOf(1));
  EXPECT_EQ(out.front().message.header.op(), proto::PUSH_ACK) << "the ack goes out before the sums";
  auto replies = OfOp(out, proto::PULL_REPLY);
  ASSERT_EQ(replies.size(), 2u);
  for (const Reply& r : replies) EXPECT_EQ(ValuesOf<float>(r.message), (std::vector<float>{11, 22}));

  Make(1, /*async=*/true);
  out = DoPush(Push<float>(0, 0, {5, 6}, flags, kKey, 23), 0);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].message.header.op(), proto::PUSH_ACK);
  EXPECT_EQ(out[1].message.header.op(), proto::PULL_REPLY);
  EXPECT_EQ(ValuesOf<float>(out[1].message), (std::vector<float>{5, 6}));
}

TEST_F(KeyStoreTest, PushesAreAckedAndEarlyPullsWaitForCompletion) {
  Make(3);
  const std::vector<double> one = {1.5, -2}, two = {2, 4}, three = {0.25, 8};
  auto out = DoPush(Push(0, 0, one, 0, kKey, 5), 0);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].message.header.op(), proto::PUSH_ACK);
  EXPECT_EQ(out[0].to, NodeOf(0));
  EXPECT_EQ(out[0].message.header.request_id(), 5u);
  EXPECT_TRUE(ValidateMessage(out[0].message).ok());

  out = DoPull(Pull(0, 0, proto::FLOAT64, kKey, 6), 0);
  EXPECT_TRUE(out.empty()) << "a pull of an incomplete round was answered";
  out = DoPush(Push(0, 1, two), 1);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].message.header.op(), proto::PUSH_ACK);

  // The last push completes the round: its ack, and the waiting pull's reply.
  out = DoPush(Push(0, 2, three), 2);
  ASSERT_EQ(out.size(), 2u);
  auto acks = OfOp(out, proto::PUSH_ACK);
  auto replies = OfOp(out, proto::PULL_REPLY);
  ASSERT_EQ(acks.size(), 1u);
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(acks[0].to, NodeOf(2));
  EXPECT_EQ(replies[0].to, NodeOf(0));
  EXPECT_EQ(replies[0].message.header.request_id(), 6u);
  EXPECT_EQ(ValuesOf<double>(replies[0].message), (std::vector<double>{3.75, 10}));

  // Later pulls are answered at once.
  for (int rank : {1, 2}) {
    out = DoPull(Pull(0, rank, proto::FLOAT64), rank);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].to, NodeOf(rank));
    EXPECT_EQ(ValuesOf<double>(out[0].message), (std::vector<double>{3.75, 10}));
  }
}

TEST_F(KeyStoreTest, RoundsAreIndependent) {
  Make(2);
  // Round 0 completes; only rank 0 pulls it before round 1 starts.
  DoPush(Push<float>(0, 0, {1, 1}), 0);
  DoPush(Push<float>(0, 1, {2, 2}), 1);
  auto out = DoPull(Pull(0, 0), 0);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(ValuesOf<float>(out[0].message), (std::vector<float>{3, 3}));
  // Round 1 and round 2 pushes interleave with the rest of round 0.
  DoPush(Push<float>(1, 0, {10, 10}), 0);
  DoPush(Push<float>(2, 1, {1000, 1000}), 1);
  out = DoPull(Pull(1, 0), 0);
  EXPECT_TRUE(out.empty()) << "round 1 answered before rank 1 pushed it";
  out = DoPush(Push<float>(1, 1, {20, 20}), 1);
  auto replies = OfOp(out, proto::PULL_REPLY);
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].message.header.round(), 1u);
  EXPECT_EQ(ValuesOf<float>(replies[0].message), (std::vector<float>{30, 30}));
  // Round 0's value is still there for the worker that has not pulled it.
  out = DoPull(Pull(0, 1), 1);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].message.header.round(), 0u);
  EXPECT_EQ(ValuesOf<float>(out[0].message), (std::vector<float>{3, 3}));
  out = DoPull(Pull(1, 1), 1);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(ValuesOf<float>(out[0].message), (std::vector<float>{30, 30}));
  DoPush(Push<float>(2, 0, {100, 100}), 0);
  out = DoPull(Pull(2, 1), 1);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(ValuesOf<float>(out[0].message), (std::vector<float>{1100, 1100}));
}

TEST_F(KeyStoreTest, ALaggingPullOfAnOlderRoundIsStillAnswered) {
  // Round 1 is fully served while rank 1 has not yet pulled round 0: round 0's
  // sum still exists and rank 1's pull must get it, not an error.
  Make(2);
  DoPush(Push<float>(0, 0, {1}), 0);
  DoPush(Push<float>(0, 1, {2}), 1);
  ASSERT_EQ(DoPull(Pull(0, 0), 0).size(), 1u);
  DoPush(Push<float>(1, 0, {10}), 0);
  DoPush(Push<float>(1, 1, {20}), 1);
  ASSERT_EQ(DoPull(Pull(1, 0), 0).size(), 1u);
  ASSERT_EQ(DoPull(Pull(1, 1), 1).size(), 1u);
  auto out = DoPull(Pull(0, 1), 1);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].message.header.op(), proto::PULL_REPLY);
  EXPECT_EQ(ValuesOf<float>(out[0].message), (std::vector<float>{3}));
}

TEST_F(KeyStoreTest, DuplicatePushOfARoundIsAnErrorAndDoesNotCount) {
  Make(2);
  DoPush(Push<float>(0, 0, {1, 2}), 0);
  auto out = DoPush(Push<float>(0, 0, {100, 100}), 0);
  ExpectError(out, 0, {"worker rank 0 already pushed round 0"});
  EXPECT_EQ(out[0].message.header.key(), kKey);
  EXPECT_EQ(out[0].message.header.round(), 0u);
  out = DoPush(Push<float>(0, 1, {3, 4}, proto::FLAG_PULL_AFTER_PUSH), 1);
  auto replies = OfOp(out, proto::PULL_REPLY);
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(ValuesOf<float>(replies[0].message), (std::vector<float>{4, 6})) << "the duplicate was summed";
  // Once complete, a further push of that round is an error too.
  ExpectError(DoPush(Push<float>(0, 1, {3, 4}), 1), 1, {"already pushed round 0"});
}

TEST_F(KeyStoreTest, WrongSizeAndWrongDtypeAreErrorsNamingThem) {
  Make(2);
  DoPush(Push<float>(0, 0, {1, 2, 3, 4}), 0);  // the key now holds 16 bytes of fp32
  ExpectError(DoPush(Push<float>(0, 1, {1, 2}), 1), 1, {"push of 8 bytes to a key of 16 bytes"});
  ExpectError(DoPush(Push<double>(0, 1, {1, 2}), 1), 1, {"fp32", "fp64"});
  ExpectError(DoPull(Pull(0, 1, proto::FLOAT16), 1), 1, {"fp32", "fp16"});
  // A correct push still completes the round.
  auto out = DoPush(Push<float>(0, 1, {1, 1, 1, 1}, proto::FLAG_PULL_AFTER_PUSH), 1);
  auto replies = OfOp(out, proto::PULL_REPLY);
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(ValuesOf<float>(replies[0].message), (std::vector<float>{2, 3, 4, 5}));
}

TEST_F(KeyStoreTest, EmptyOrMultiFramePushIsAnError) {
  Make(1);
  Message empty = MakeMessage(proto::PUSH, NodeOf(0));
  empty.header.set_key(kKey);
  empty.header.set_dtype(proto::FLOAT32);
  ExpectError(DoPush(empty, 0), 0, {"exactly one non-empty payload"});
  Message two = Push<float>(0, 0, {1, 2});
  two.payloads.push_back(Buffer::Copy(two.payloads[0].data(), 8));
  two.header.set_byte_length(16);
  ExpectError(DoPush(two, 0), 0, {"exactly one non-empty payload"});
}

TEST_F(KeyStoreTest, NonWorkerRanksAreErrors) {
  Make(2);
  ExpectError(DoPush(Push<float>(0, 0, {1}), -1), 0, {"not a worker"});
  ExpectError(DoPush(Push<float>(0, 0, {1}), 2), 0, {"not a worker"});
  ExpectError(DoPull(Pull(0, 0), 7), 0, {"not a worker"});
  EXPECT_EQ(store_->num_keys(), 0u) << "a rejected sender created state";
}

TEST_F(KeyStoreTest, StaleRoundsAreErrors) {
  Make(2);
  DoPush(Push<float>(0, 0, {1}, proto::FLAG_PULL_AFTER_PUSH), 0);
  DoPush(Push<float>(0, 1, {1}, proto::FLAG_PULL_AFTER_PUSH), 1);  // both pulls answered: round 0 is over
  ExpectError(DoPush(Push<float>(0, 0, {1}), 0), 0, {"round 0 is already over"});
  ExpectError(DoPull(Pull(0, 1), 1), 1, {"round 0 is already over"});
  // The next round is unaffected.
  DoPush(Push<float>(1, 0, {5}), 0);
  auto out = DoPush(Push<float>(1, 1, {6}, proto::FLAG_PULL_AFTER_PUSH), 1);
  auto replies = OfOp(out, proto::PULL_REPLY);
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(ValuesOf<float>(replies[0].message), (std::vector<float>{11}));
}

TEST_F(KeyStoreTest, DuplicatePullsDoNotStarveOtherWorkers) {
  // A worker that pulls a round twice (a retry) must not use up another worker's pull.
  Make(2);
  DoPush(Push<float>(0, 0, {1}), 0);
  DoPush(Push<float>(0, 1, {2}), 1);
  ASSERT_EQ(DoPull(Pull(0, 0), 0).size(), 1u);
  auto again = DoPull(Pull(0, 0), 0);
  auto out = DoPull(Pull(0, 1), 1);
  ASSERT_EQ(out.size(), 1u);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].message.header.op(), proto::PULL_REPLY);
  EXPECT_EQ(out[0].message.header.op(), proto::PULL_REPLY);
  EXPECT_EQ(ValuesOf<float>(out[0].message), (std::vector<float>{3}));
}

TEST_F(KeyStoreTest, AverageDividesByTheNumberOfWorkers) {
  Make(4);
  const std::vector<std::vector<float>> pushes = {{1, -4, 0.5f}, {2, -4, 0.5f}, {3, -4, 0.5f}, {6, -4, 2.5f}};
  std::vector<Reply> out;
  for (int r = 0; r < 4; ++r) out = DoPush(Push(0, r, pushes[r], proto::FLAG_AVERAGE | proto::FLAG_PULL_AFTER_PUSH), r);
  auto replies = OfOp(out, proto::PULL_REPLY);
  ASSERT_EQ(replies.size(), 4u);
  for (const Reply& r : replies) EXPECT_EQ(ValuesOf<float>(r.message), (std::vector<float>{3, -4, 1}));
  // fp64 too.
  for (int r = 0; r < 4; ++r)
    out = DoPush(Push<double>(0, r, {static_cast<double>(r + 1)}, proto::FLAG_AVERAGE | proto::FLAG_PULL_AFTER_PUSH,
                              kKey + 1),
                 r);
  replies = OfOp(out, proto::PULL_REPLY);
  ASSERT_EQ(replies.size(), 4u);
  EXPECT_EQ(ValuesOf<double>(replies[0].message), (std::vector<double>{2.5}));
  // Without the flag: the plain sum.
  for (int r = 0; r < 4; ++r)
    out = DoPush(Push<float>(1, r, {static_cast<float>(r + 1)}, proto::FLAG_PULL_AFTER_PUSH, kKey + 2), r);
  replies = OfOp(out, proto::PULL_REPLY);
  ASSERT_EQ(replies.size(), 4u);
  EXPECT_EQ(ValuesOf<float>(replies[0].message), (std::vector<float>{10}));
}

// Values whose fp32 sum depends on the order of addition.
std::vector<std::vector<float>> OrderSensitive(int workers, size_t n) {
  std::mt19937 gen(99);
  std::uniform_real_distribution<float> small(-1, 1);
  std::vector<std::vector<float>> v(workers, std::vector<float>(n));
  for (int r = 0; r < workers; ++r)
    for (size_t i = 0; i < n; ++i) v[r][i] = (r % 2 == 0 ? 1e8f : -1e8f) * (i % 3 == 0 ? 1 : 0) + small(gen);
  return v;
}

std::vector<float> RankOrderReference(const std::vector<std::vector<float>>& v) {
  std::vector<float> sum = v[0];
  for (size_t r = 1; r < v.size(); ++r) kernels::SumInto(DType::kFloat32, sum.data(), v[r].data(), sum.size());
  return sum;
}

TEST_F(KeyStoreTest, DeterministicModeSumsInRankOrderWhateverTheArrivalOrder) {
  constexpr int kWorkers = 4;
  constexpr size_t kN = 999;
  const auto values = OrderSensitive(kWorkers, kN);
  const std::vector<float> reference = RankOrderReference(values);
  const int arrival[] = {3, 1, 2, 0};

  // Check the data really is order sensitive: summing in arrival order differs.
  std::vector<std::vector<float>> arrived;
  for (int r : arrival) arrived.push_back(values[r]);
  ASSERT_NE(RankOrderReference(arrived), reference) << "test data does not depend on summation order";

  Make(kWorkers, /*async=*/false, /*deterministic=*/true);
  std::vector<Reply> out;
  for (int r : arrival) {
    EXPECT_TRUE(OfOp(out, proto::PULL_REPLY).empty());
    out = DoPush(Push(0, r, values[r], proto::FLAG_PULL_AFTER_PUSH), r);
  }
  auto replies = OfOp(out, proto::PULL_REPLY);
  ASSERT_EQ(replies.size(), 4u);
  for (const Reply& rep : replies) {
    auto got = ValuesOf<float>(rep.message);
    ASSERT_EQ(got.size(), kN);
    EXPECT_EQ(std::memcmp(got.data(), reference.data(), kN * sizeof(float)), 0) << "not the rank-order sum";
  }

  // A different arrival order in the next round gives the same bits.
  const int arrival2[] = {0, 2, 3, 1};
  for (int r : arrival2) out = DoPush(Push(1, r, values[r], proto::FLAG_PULL_AFTER_PUSH), r);
  replies = OfOp(out, proto::PULL_REPLY);
  ASSERT_EQ(replies.size(), 4u);
  auto got = ValuesOf<float>(replies[0].message);
  EXPECT_EQ(std::memcmp(got.data(), reference.data(), kN * sizeof(float)), 0);
}

TEST_F(KeyStoreTest, NonDeterministicModeSumsInArrivalOrder) {
  constexpr int kWorkers = 4;
  const auto values = OrderSensitive(kWorkers, 300);
  const int arrival[] = {3, 1, 2, 0};
  std::vector<std::vector<float>> arrived;
  for (int r : arrival) arrived.push_back(values[r]);
  const std::vector<float> expected = RankOrderReference(arrived);  // i.e. arrival order
  Make(kWorkers);
  std::vector<Reply> out;
  for (int r : arrival) out = DoPush(Push(0, r, values[r], proto::FLAG_PULL_AFTER_PUSH), r);
  auto replies = OfOp(out, proto::PULL_REPLY);
  ASSERT_EQ(replies.size(), 4u);
  auto got = ValuesOf<float>(replies[0].message);
  EXPECT_EQ(std::memcmp(got.data(), expected.data(), expected.size() * sizeof(float)), 0);
}

TEST_F(KeyStoreTest, DeterministicAverage) {
  Make(4, false, true);
  std::vector<Reply> out;
  for (int r : {2, 0, 3, 1})
    out = DoPush(Push<float>(0, r, {static_cast<float>(4 * r)}, proto::FLAG_AVERAGE | proto::FLAG_PULL_AFTER_PUSH), r);
  auto replies = OfOp(out, proto::PULL_REPLY);
  ASSERT_EQ(replies.size(), 4u);
  EXPECT_EQ(ValuesOf<float>(replies[0].message), (std::vector<float>{6}));  // (0+4+8+12)/4
}

TEST_F(KeyStoreTest, AsyncModeAccumulatesAndPullReturnsTheLatestValue) {
  Make(2, /*async=*/true);
  auto out = DoPush(Push<float>(0, 0, {1, 2}), 0);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].message.header.op(), proto::PUSH_ACK);
  out = DoPull(Pull(0, 1), 1);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].message.header.op(), proto::PULL_REPLY);
  EXPECT_EQ(ValuesOf<float>(out[0].message), (std::vector<float>{1, 2})) << "async pulls do not wait for a round";
  DoPush(Push<float>(0, 1, {10, 20}), 1);
  // The same rank pushing the same round again is normal in async mode.
  DoPush(Push<float>(0, 0, {100, 200}), 0);
  out = DoPull(Pull(5, 0), 0);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(ValuesOf<float>(out[0].message), (std::vector<float>{111, 222}));
  // Pull-after-push returns the value including that push.
  out = DoPush(Push<float>(0, 1, {1000, 1000}, proto::FLAG_PULL_AFTER_PUSH), 1);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].message.header.op(), proto::PULL_REPLY);
  EXPECT_TRUE(ValidateMessage(out[0].message).ok());
  const auto snapshot = out[0].message;
  EXPECT_EQ(ValuesOf<float>(snapshot), (std::vector<float>{1111, 1222}));
  // A reply is a snapshot: later pushes do not change what was already sent.
  DoPush(Push<float>(0, 0, {1, 1}), 0);
  EXPECT_EQ(ValuesOf<float>(snapshot), (std::vector<float>{1111, 1222}));
}

TEST_F(KeyStoreTest, KeysAreIndependent) {
  Make(2);
  DoPush(Push<float>(0, 0, {1}, 0, /*key=*/1), 0);
  DoPush(Push<double>(0, 0, {1, 2, 3}, 0, /*key=*/2), 0);
  auto out = DoPush(Push<float>(0, 1, {2}, proto::FLAG_PULL_AFTER_PUSH, 1), 1);
  auto replies = OfOp(out, proto::PULL_REPLY);
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].message.header.key(), 1u);
  EXPECT_EQ(ValuesOf<float>(replies[0].message), (std::vector<float>{3}));
  EXPECT_TRUE(DoPull(Pull(0, 1, proto::FLOAT64, 2), 1).empty()) << "key 2 is incomplete";
  EXPECT_EQ(store_->num_keys(), 2u);
}

TEST_F(KeyStoreTest, PooledBuffersAreReusedAcrossRounds) {
  for (bool deterministic : {false, true}) {
    SCOPED_TRACE(deterministic ? "deterministic" : "arrival order");
    BufferPool pool;
    KeyStore store(KeyStoreOptions{2, false, deterministic}, &engine_, &pool);
    std::vector<float> x(1024, 1.0f);
    uint64_t allocations_after_warmup = 0;
    for (uint64_t round = 0; round < 20; ++round) {
      std::vector<Reply> out;
      store.Push(Push(round, 0, x), 0, &out);
      store.Push(Push(round, 1, x), 1, &out);
      store.Pull(Pull(round, 0), 0, &out);
      store.Pull(Pull(round, 1), 1, &out);
      auto replies = OfOp(out, proto::PULL_REPLY);
      ASSERT_EQ(replies.size(), 2u);
      EXPECT_EQ(ValuesOf<float>(replies[0].message)[1023], 2.0f);
      // The replies are "sent": dropping them returns the sum to the pool.
      out.clear();
      replies.clear();
      if (round == 1) allocations_after_warmup = pool.stats().allocations;
    }
    auto s = pool.stats();
    EXPECT_GE(s.reuses, 18u);
    EXPECT_EQ(s.allocations, allocations_after_warmup) << "steady-state rounds allocated memory";
    EXPECT_LE(s.allocations, 2u);
    EXPECT_EQ(s.idle_bytes, s.allocations * 4096) << "every round buffer went back to the pool";
  }
}

TEST_F(KeyStoreTest, HeldRepliesKeepTheirMemoryOutOfThePool) {
  Make(1);
  auto out = DoPush(Push<float>(0, 0, {7, 8}, proto::FLAG_PULL_AFTER_PUSH), 0);
  ASSERT_EQ(out.size(), 1u);
  const Message held = out[0].message;  // e.g. still queued in a socket
  out.clear();
  // The next round must not reuse (and overwrite) the buffer the held reply points at.
  auto next = DoPush(Push<float>(1, 0, {1, 1}, proto::FLAG_PULL_AFTER_PUSH), 0);
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(ValuesOf<float>(held), (std::vector<float>{7, 8}));
  EXPECT_EQ(ValuesOf<float>(next[0].message), (std::vector<float>{1, 1}));
}

// A push whose frame the transport marked writable (ours alone) becomes the
// round's sum buffer without a copy; any other push (a view of a sender's or
// a peer's memory) is copied and never written.
TEST_F(KeyStoreTest, AWritableFirstPushIsSummedInPlaceOthersAreNeverWritten) {
  for (bool writable : {true, false}) {
    SCOPED_TRACE(writable ? "writable first push" : "read-only first push");
    Make(2);
    Message first = Push<float>(0, 0, {1, 2, 3}, proto::FLAG_PULL_AFTER_PUSH);
    if (writable) first.payloads[0] = first.payloads[0].AsWritable();
    const Buffer first_bytes = first.payloads[0];
    const Message second = Push<float>(0, 1, {10, 20, 30}, proto::FLAG_PULL_AFTER_PUSH);
    const Buffer second_bytes = second.payloads[0];
    EXPECT_TRUE(DoPush(first, 0).empty());
    auto out = DoPush(second, 1);
    auto replies = OfOp(out, proto::PULL_REPLY);
    ASSERT_EQ(replies.size(), 2u);
    for (const Reply& r : replies) EXPECT_EQ(ValuesOf<float>(r.message), (std::vector<float>{11, 22, 33}));
    EXPECT_EQ(replies[0].message.payloads[0].data() == first_bytes.data(), writable);
    std::vector<float> second_now(3), first_now(3);
    std::memcpy(second_now.data(), second_bytes.data(), 12);
    std::memcpy(first_now.data(), first_bytes.data(), 12);
    EXPECT_EQ(second_now, (std::vector<float>{10, 20, 30})) << "a read-only push was written";
    EXPECT_EQ(first_now, writable ? (std::vector<float>{11, 22, 33}) : (std::vector<float>{1, 2, 3}));
  }
}

// A page of memory nobody may write: a write into it (a sum, an averaging)
// kills the test instead of passing unnoticed.
class ReadOnlyPage {
 public:
  explicit ReadOnlyPage(const std::vector<float>& values) {
    page_ = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    EXPECT_NE(page_, MAP_FAILED);
    std::memcpy(page_, values.data(), values.size() * sizeof(float));
    EXPECT_EQ(mprotect(page_, kBytes, PROT_READ), 0);
  }
  ~ReadOnlyPage() { munmap(page_, kBytes); }
  Buffer View(size_t bytes) const { return Buffer(page_, bytes, nullptr); }

 private:
  static constexpr size_t kBytes = 4096;
  void* page_;
};

// With one worker its push is the sum: the reply carries the pushed bytes
// themselves, even when they are a read-only view (shared memory, loopback),
// nothing is copied or allocated, and nothing is written (averaging by 1 is
// skipped): the push lies in a page that faults on any write.
TEST_F(KeyStoreTest, AOneWorkerRoundAnswersWithThePushItself) {
  const std::vector<float> values = {1.5f, -2, 3};
  const ReadOnlyPage page(values);
  for (bool deterministic : {false, true}) {
    for (uint32_t average : {0u, static_cast<uint32_t>(proto::FLAG_AVERAGE)}) {
      SCOPED_TRACE(std::string(deterministic ? "deterministic" : "arrival order") + (average ? ", average" : ""));
      BufferPool pool;
      KeyStore store(KeyStoreOptions{1, false, deterministic}, &engine_, &pool);
      for (uint64_t round = 0; round < 3; ++round) {
        Message push = Push<float>(round, 0, values, proto::FLAG_PULL_AFTER_PUSH | average);
        push.payloads[0] = page.View(values.size() * sizeof(float));
        std::vector<Reply> out;
        store.Push(push, 0, &out);
        ASSERT_EQ(out.size(), 1u);
        ASSERT_EQ(out[0].message.header.op(), proto::PULL_REPLY);
        EXPECT_EQ(out[0].message.payloads[0].data(), push.payloads[0].data()) << "the push was copied";
        EXPECT_EQ(ValuesOf<float>(out[0].message), values);
      }
      EXPECT_EQ(pool.stats().allocations, 0u);
    }
  }
}

// A one-worker push without its pull is acked at once, and the sender may
// reuse its memory from then on: the round keeps a copy for the later pull.
TEST_F(KeyStoreTest, AOneWorkerPushWithoutItsPullIsCopied) {
  for (bool deterministic : {false, true}) {
    SCOPED_TRACE(deterministic ? "deterministic" : "arrival order");
    Make(1, false, deterministic);
    std::vector<float> tensor = {4, 5, 6};
    Message push = Push<float>(0, 0, tensor);
    push.payloads[0] = Buffer(tensor.data(), tensor.size() * sizeof(float), nullptr);  // the sender's own memory
    auto acks = DoPush(push, 0);
    ASSERT_EQ(acks.size(), 1u);
    EXPECT_EQ(acks[0].message.header.op(), proto::PUSH_ACK);
    tensor = {0, 0, 0};  // reused after the ack
    auto out = DoPull(Pull(0, 0), 0);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(ValuesOf<float>(out[0].message), (std::vector<float>{4, 5, 6}));
  }
}

}  // namespace
}  // namespace syncline
