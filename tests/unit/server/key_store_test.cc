// KeyStore driven directly with hand-made PUSH/PULL messages (no network):
// sync rounds, acks, errors, averaging, deterministic order, async mode, keys.
#include "server/key_store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <set>

#include "tests/unit/server/key_store_testing.h"

namespace syncline {
namespace {

using namespace keystore_testing;


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

TEST_F(KeyStoreTest, ARequestWhoseDtypeDoesNotDivideThePlacedBytesIsRefusedNotAnsweredMalformed) {
  // A placement names bytes only; a pull of fp64 for a key of 12 bytes would
  // be answered with 12 bytes of "fp64", which no peer can decode (fuzz_key_store found it).
  for (bool async : {false, true}) {
    KeyStoreOptions options{2, async, false, nullptr, nullptr};
    options.require_placement = true;
    store_ = std::make_unique<KeyStore>(options, &engine_, &pool_);
    store_->Place(kKey, 12, compression::Spec{});
    ExpectError(DoPull(Pull(0, 1, proto::FLOAT64), 1), 1, {"12 bytes, not a whole number of fp64 elements"});
    // The key stays open to requests in a dtype that fits it.
    auto out = DoPull(Pull(0, 0, proto::FLOAT32), 0);
    if (async) {
      ASSERT_EQ(out.size(), 1u);
      EXPECT_EQ(ValuesOf<float>(out[0].message), (std::vector<float>{0, 0, 0}));
    } else {
      EXPECT_TRUE(out.empty()) << "a bsp pull waits for the round";
    }
  }
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

TEST_F(KeyStoreTest, RoundsFarAheadAreRefused) {
  // A peer sending rounds from far in the future (or one worker running far
  // ahead) cannot make the server open a buffer per round.
  Make(2);
  ExpectError(DoPush(Push<float>(kMaxRoundsAhead, 0, {1}), 0), 0, {"rounds beyond", "limit is 256"});
  ExpectError(DoPull(Pull(1ull << 40, 1), 1), 1, {"rounds beyond"});
  // The last round within the limit is fine, and the limit moves with the rounds served.
  EXPECT_EQ(OfOp(DoPush(Push<float>(kMaxRoundsAhead - 1, 0, {1}), 0), proto::ERROR).size(), 0u);
  DoPush(Push<float>(0, 0, {1}, proto::FLAG_PULL_AFTER_PUSH), 0);
  DoPush(Push<float>(0, 1, {1}, proto::FLAG_PULL_AFTER_PUSH), 1);  // round 0 served to both
  EXPECT_EQ(OfOp(DoPush(Push<float>(kMaxRoundsAhead, 1, {1}), 1), proto::ERROR).size(), 0u);
}

TEST_F(KeyStoreTest, FramesAtOddAddressesAreSummedExactly) {
  // A transport may hand a frame over at any address; the kernels need
  // element alignment (an ASan+UBSan run flagged the misaligned loads).
  auto odd = [](uint64_t round, int rank, std::vector<float> values, uint32_t flags = 0) {
    const size_t bytes = values.size() * sizeof(float);
    auto storage = std::make_shared<std::vector<uint8_t>>(bytes + 1);
    std::memcpy(storage->data() + 1, values.data(), bytes);
    Message m = Push<float>(round, rank, values, flags);
    m.payloads[0] = Buffer(storage->data() + 1, bytes, storage);
    return m;
  };
  for (bool deterministic : {false, true}) {
    SCOPED_TRACE(deterministic ? "deterministic" : "arrival order");
    Make(3, /*async=*/false, deterministic);
    DoPush(odd(0, 0, {1, 2}), 0);
    DoPush(odd(0, 1, {10, 20}), 1);
    auto out = DoPush(odd(0, 2, {100, 200}, proto::FLAG_PULL_AFTER_PUSH), 2);
    auto replies = OfOp(out, proto::PULL_REPLY);
    ASSERT_EQ(replies.size(), 1u);
    EXPECT_EQ(ValuesOf<float>(replies[0].message), (std::vector<float>{111, 222}));
  }
  Make(2, /*async=*/true);
  DoPush(odd(0, 0, {1, 2}), 0);
  auto out = DoPush(odd(1, 1, {3, 4}, proto::FLAG_PULL_AFTER_PUSH), 1);
  auto replies = OfOp(out, proto::PULL_REPLY);
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(ValuesOf<float>(replies[0].message), (std::vector<float>{4, 6}));
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

// A worker that finished pushes nothing more: a round that lacks its push is
// reported (on later pushes, and when its keys are checked), rounds it did
// push are not.
TEST_F(KeyStoreTest, RoundsAFinishedWorkerNeverPushedAreReported) {
  std::vector<std::tuple<uint64_t, uint64_t, int>> reported;
  KeyStoreOptions options{3, false, false, nullptr, nullptr};
  options.on_orphaned_round = [&](uint64_t key, uint64_t round, int rank, Absence) { reported.emplace_back(key, round, rank); };
  store_ = std::make_unique<KeyStore>(options, &engine_, &pool_);
  const std::vector<float> v = {1, 2, 3, 4};
  // Round 0: all three push. Round 1: ranks 0 and 1 push (rank 2 still busy).
  for (int r = 0; r < 3; ++r) DoPush(Push(0, r, v), r);
  DoPush(Push(1, 0, v), 0);
  DoPush(Push(1, 1, v), 1);
  store_->MarkFinished(1);  // rank 1 pushed round 1: nothing is missing for it
  store_->CheckOrphanedRounds(kKey);
  EXPECT_TRUE(reported.empty());
  store_->MarkFinished(2);  // rank 2 finished without pushing round 1
  store_->CheckOrphanedRounds(kKey);
  ASSERT_EQ(reported.size(), 1u);
  EXPECT_EQ(reported[0], std::make_tuple(kKey, uint64_t{1}, 2));
  // A later round opened by another worker is reported as it is pushed.
  reported.clear();
  DoPush(Push(2, 0, v), 0);
  ASSERT_FALSE(reported.empty());
  EXPECT_EQ(std::get<1>(reported.back()), 2u);
}

// A worker at a barrier pushes nothing until it is released: rounds lacking
// its push are reported as such while it waits there, and not after.
TEST_F(KeyStoreTest, RoundsAWorkerAtABarrierLacksAreReportedUntilItIsReleased) {
  std::vector<std::pair<int, Absence>> reported;
  KeyStoreOptions options{2, false, false, nullptr, nullptr};
  options.on_orphaned_round = [&](uint64_t, uint64_t, int rank, Absence why) { reported.emplace_back(rank, why); };
  store_ = std::make_unique<KeyStore>(options, &engine_, &pool_);
  const std::vector<float> v = {1, 2, 3, 4};
  DoPush(Push(0, 0, v), 0);
  store_->MarkAtBarrier(1, 7);
  store_->CheckOrphanedRounds(kKey);
  ASSERT_EQ(reported.size(), 1u);
  EXPECT_EQ(reported[0].first, 1);
  EXPECT_EQ(reported[0].second.kind, Absence::kAtBarrier);
  EXPECT_EQ(reported[0].second.barrier_sequence, 7u);
  EXPECT_TRUE(store_->StillOrphaned(kKey, 0, 1, reported[0].second));
  EXPECT_FALSE(store_->StillOrphaned(kKey, 0, 1, Absence{Absence::kAtBarrier, 8})) << "another barrier";
  EXPECT_FALSE(store_->StillOrphaned(kKey, 0, 0, reported[0].second)) << "rank 0 pushed and is not absent";
  store_->ClearBarrier(6);  // another barrier: rank 1 still waits at 7
  EXPECT_TRUE(store_->StillOrphaned(kKey, 0, 1, reported[0].second));
  store_->ClearBarrier(7);
  EXPECT_FALSE(store_->StillOrphaned(kKey, 0, 1, reported[0].second));
  reported.clear();
  store_->CheckOrphanedRounds(kKey);
  EXPECT_TRUE(reported.empty());
  DoPush(Push(0, 1, v), 1);  // released: it pushes, the round completes
  EXPECT_FALSE(store_->StillOrphaned(kKey, 0, 1, Absence{Absence::kAtBarrier, 7}));
  // A finished worker stays finished whatever barrier notes come later.
  store_->MarkFinished(1);
  store_->MarkAtBarrier(1, 9);
  store_->ClearBarrier(9);
  DoPush(Push(1, 0, v), 0);
  ASSERT_FALSE(reported.empty());
  EXPECT_EQ(reported.back().second.kind, Absence::kFinished);
}

TEST_F(KeyStoreTest, NothingIsReportedWhileEveryWorkerRuns) {
  int reported = 0;
  KeyStoreOptions options{2, false, false, nullptr, nullptr};
  options.on_orphaned_round = [&](uint64_t, uint64_t, int, Absence) { ++reported; };
  store_ = std::make_unique<KeyStore>(options, &engine_, &pool_);
  const std::vector<float> v = {1, 2, 3, 4};
  DoPush(Push(0, 0, v), 0);
  store_->CheckOrphanedRounds(kKey);
  store_->CheckOrphanedRounds(kKey + 1);  // a key it never saw
  EXPECT_EQ(reported, 0);
}

}  // namespace
}  // namespace syncline
