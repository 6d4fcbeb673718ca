// KeyStore with compressed keys (issue 32), driven directly: pushes in a
// key's compressed form are decoded into the round's fp32 sum, the complete
// sum is compressed once with the key's error feedback, and every pull gets
// those bytes, equal to the reference computed here from the same chunks;
// deterministic mode gives the same bytes in any order of arrival; a chunk
// that is not the key's form is refused, named, and the round goes on.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "compression/compressor.h"
#include "compression/error_feedback.h"
#include "server/key_store.h"
#include "tests/unit/server/key_store_testing.h"

namespace syncline {
namespace {

using namespace keystore_testing;
namespace cz = compression;

constexpr size_t kValues = 1000;  // not a multiple of int8's block or of 8 (onebit)

std::vector<float> RandomValues(uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(kValues);
  for (float& x : v) x = dist(rng);
  return v;
}

std::vector<std::byte> Encode(const cz::Spec& form, const std::vector<float>& values, uint64_t seed = 1) {
  std::vector<std::byte> out(cz::CompressedBytes(form, values.size()) + 4);
  // Compress writes 4-byte aligned chunks: start at an aligned address inside the vector.
  std::byte* at = out.data() + (4 - reinterpret_cast<uintptr_t>(out.data()) % 4) % 4;
  EXPECT_TRUE(cz::Compress(form, values.data(), values.size(), seed, at).ok());
  return std::vector<std::byte>(at, at + cz::CompressedBytes(form, values.size()));
}

std::vector<std::byte> BytesOf(const Message& reply) {
  const Buffer& b = reply.payloads.at(0);
  const auto* p = reinterpret_cast<const std::byte*>(b.data());
  return std::vector<std::byte>(p, p + b.size());
}

class KeyStoreCompressionTest : public KeyStoreTest, public ::testing::WithParamInterface<std::string> {
 protected:
  void MakeCompressed(int workers, const cz::Spec& form, bool deterministic = false, bool async = false) {
    KeyStoreOptions options{workers, async, deterministic, nullptr, nullptr, /*require_placement=*/true};
    store_ = std::make_unique<KeyStore>(options, &engine_, &pool_);
    store_->Place(kKey, kValues * sizeof(float), form);
  }
  std::vector<Reply> PushChunk(uint64_t round, int rank, const std::vector<std::byte>& chunk, uint32_t flags = 0) {
    return DoPush(PushBytes(kKey, round, rank, proto::FLOAT32, chunk.data(), chunk.size(),
                            flags | proto::FLAG_PULL_AFTER_PUSH),
                  rank);
  }
  cz::Spec Form() const { return cz::ParseSpec(GetParam()).value(); }
};

TEST_P(KeyStoreCompressionTest, TheSumOfDecodedPushesIsCompressedOnceWithTheServersErrorFeedback) {
  const cz::Spec form = Form();
  constexpr int kWorkers = 3;
  MakeCompressed(kWorkers, form);
  cz::ErrorFeedback reference_feedback(form);
  for (uint64_t round = 0; round < 4; ++round) {
    std::vector<float> reference(kValues, 0.0f);
    std::vector<Reply> replies;
    for (int rank = 0; rank < kWorkers; ++rank) {
      const auto chunk = Encode(form, RandomValues(uint32_t(round * 10 + rank)), round * 10 + rank);
      ASSERT_TRUE(cz::DecompressAdd(form, chunk.data(), chunk.size(), 1.0f, reference.data(), kValues).ok());
      auto out = PushChunk(round, rank, chunk);
      for (auto& r : OfOp(out, proto::PULL_REPLY)) replies.push_back(r);
      EXPECT_TRUE(OfOp(out, proto::ERROR).empty());
    }
    ASSERT_EQ(replies.size(), size_t(kWorkers)) << "every worker's pull, once the round is complete";
    // The reference: the fp32 sum of the decoded chunks, compressed with error feedback of its own.
    std::vector<std::byte> expected(cz::CompressedBytes(form, kValues) + 4);
    std::byte* at = expected.data() + (4 - reinterpret_cast<uintptr_t>(expected.data()) % 4) % 4;
    const uint64_t seed = kKey * 0x9E3779B97F4A7C15ull ^ round;  // the server's; only randomk reads it
    ASSERT_TRUE(reference_feedback.Compress(reference.data(), kValues, seed, at).ok());
    const std::vector<std::byte> want(at, at + cz::CompressedBytes(form, kValues));
    for (const Reply& r : replies) {
      EXPECT_TRUE(ValidateMessage(r.message).ok());
      EXPECT_EQ(r.message.header.byte_length(), want.size());
      EXPECT_TRUE(BytesOf(r.message) == want) << "round " << round << ": the reply is not the reference's bytes";
    }
  }
}

TEST_P(KeyStoreCompressionTest, DeterministicModeGivesTheSameBytesInAnyOrderOfArrival) {
  const cz::Spec form = Form();
  constexpr int kWorkers = 4;
  std::vector<std::vector<std::byte>> chunks;
  for (int rank = 0; rank < kWorkers; ++rank) chunks.push_back(Encode(form, RandomValues(100 + rank), 7 + rank));
  std::vector<std::byte> first;
  std::vector<int> order = {0, 1, 2, 3};
  std::mt19937 rng(5);
  for (int trial = 0; trial < 6; ++trial) {
    MakeCompressed(kWorkers, form, /*deterministic=*/true);
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<Reply> replies;
    for (int rank : order)
      for (auto& r : OfOp(PushChunk(0, rank, chunks[rank], proto::FLAG_AVERAGE), proto::PULL_REPLY))
        replies.push_back(r);
    ASSERT_EQ(replies.size(), size_t(kWorkers));
    if (first.empty()) first = BytesOf(replies[0].message);
    for (const Reply& r : replies) EXPECT_TRUE(BytesOf(r.message) == first) << "trial " << trial;
  }
}

INSTANTIATE_TEST_SUITE_P(Forms, KeyStoreCompressionTest,
                         ::testing::Values("fp16", "bf16", "int8", "onebit", "topk:0.05", "randomk:0.1"),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace_if(name.begin(), name.end(), [](char c) { return !std::isalnum(c); }, '_');
                           return name;
                         });

TEST_F(KeyStoreTest, AnAverageIsTakenBeforeTheSumIsCompressed) {
  const cz::Spec form = cz::ParseSpec("fp16").value();
  store_ = std::make_unique<KeyStore>(KeyStoreOptions{2, false, false, nullptr, nullptr, true}, &engine_, &pool_);
  store_->Place(kKey, 4 * sizeof(float), form);
  std::vector<Reply> replies;
  for (int rank = 0; rank < 2; ++rank) {
    const auto chunk = Encode(form, {1.0f, 2.0f, -4.0f, float(rank)});
    for (auto& r : OfOp(DoPush(PushBytes(kKey, 0, rank, proto::FLOAT32, chunk.data(), chunk.size(),
                                         proto::FLAG_PULL_AFTER_PUSH | proto::FLAG_AVERAGE),
                               rank),
                        proto::PULL_REPLY))
      replies.push_back(r);
  }
  ASSERT_EQ(replies.size(), 2u);
  std::vector<float> decoded(4);
  const Buffer& b = replies[0].message.payloads[0];
  ASSERT_TRUE(cz::Decompress(form, reinterpret_cast<const std::byte*>(b.data()), b.size(), decoded.data(), 4).ok());
  EXPECT_EQ(decoded, (std::vector<float>{1.0f, 2.0f, -4.0f, 0.5f}));
}

TEST_F(KeyStoreTest, AChunkThatIsNotTheKeysFormIsRefusedNamedAndTheRoundGoesOn) {
  const cz::Spec form = cz::ParseSpec("int8").value();
  store_ = std::make_unique<KeyStore>(KeyStoreOptions{2, false, false, nullptr, nullptr, true}, &engine_, &pool_);
  store_->Place(kKey, kValues * sizeof(float), form);
  const std::vector<float> ones(kValues, 1.0f);
  // Uncompressed bytes: the size says what was expected.
  ExpectError(DoPush(Push(0, 0, ones, proto::FLAG_PULL_AFTER_PUSH), 0), 0,
              {"push of 4000 bytes", "compressed as int8 to " + std::to_string(cz::CompressedBytes(form, kValues))});
  // The right size in another form (onebit's header on int8's bytes).
  auto chunk = Encode(form, ones);
  auto forged = chunk;
  forged[0] = std::byte{static_cast<uint8_t>(cz::Kind::kOnebit)};
  auto out = DoPush(PushBytes(kKey, 0, 0, proto::FLOAT32, forged.data(), forged.size(), proto::FLAG_PULL_AFTER_PUSH), 0);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].message.header.op(), proto::ERROR);
  // Another dtype on a compressed key.
  ExpectError(DoPush(PushBytes(kKey, 0, 0, proto::FLOAT64, chunk.data(), chunk.size(), proto::FLAG_PULL_AFTER_PUSH), 0),
              0, {"key holds fp32 but this PUSH is fp64"});
  // Nothing of those was taken: both workers' real chunks complete the round.
  EXPECT_TRUE(OfOp(DoPush(PushBytes(kKey, 0, 0, proto::FLOAT32, chunk.data(), chunk.size(), proto::FLAG_PULL_AFTER_PUSH), 0),
                   proto::ERROR)
                  .empty());
  auto replies = OfOp(DoPush(PushBytes(kKey, 0, 1, proto::FLOAT32, chunk.data(), chunk.size(), proto::FLAG_PULL_AFTER_PUSH), 1),
                      proto::PULL_REPLY);
  ASSERT_EQ(replies.size(), 2u);
  std::vector<float> decoded(kValues);
  const Buffer& b = replies[0].message.payloads[0];
  ASSERT_TRUE(cz::Decompress(form, reinterpret_cast<const std::byte*>(b.data()), b.size(), decoded.data(), kValues).ok());
  EXPECT_EQ(decoded, std::vector<float>(kValues, 2.0f));
}

TEST_F(KeyStoreTest, ACompressedKeyIsRefusedWhereServersKeepRunningValues) {
  const cz::Spec form = cz::ParseSpec("int8").value();
  store_ = std::make_unique<KeyStore>(KeyStoreOptions{2, /*async=*/true, false, nullptr, nullptr, true}, &engine_, &pool_);
  store_->Place(kKey, kValues * sizeof(float), form);
  const auto chunk = Encode(form, std::vector<float>(kValues, 1.0f));
  ExpectError(DoPush(PushBytes(kKey, 0, 0, proto::FLOAT32, chunk.data(), chunk.size(), proto::FLAG_PULL_AFTER_PUSH), 0), 0,
              {"compressed key is summed in whole rounds"});
}

}  // namespace
}  // namespace syncline
