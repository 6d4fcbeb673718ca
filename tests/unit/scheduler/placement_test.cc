// KeyPlacement: chunking of declared tensors and byte-balanced placement.
#include "scheduler/placement.h"

#include "transport/wire.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>

namespace syncline {
namespace {

using ::testing::HasSubstr;

proto::TensorSpec Spec(const std::string& name, proto::DType dtype, uint64_t elements, uint64_t partition) {
  proto::TensorSpec s;
  s.set_name(name);
  s.set_dtype(dtype);
  s.set_num_elements(elements);
  s.set_partition_bytes(partition);
  return s;
}

TEST(MakeKeyTest, TensorIdHighChunkIndexLow) {
  EXPECT_EQ(MakeKey(0, 0), 0u);
  EXPECT_EQ(MakeKey(1, 0), uint64_t{1} << 32);
  EXPECT_EQ(MakeKey(7, 3), (uint64_t{7} << 32) | 3);
  EXPECT_EQ(MakeKey(0xffffffffu, 0xffffffffu), ~uint64_t{0});
}

TEST(PlacementTest, PartitionIsRoundedDownToWholeElementsAndTheLastChunkIsShorter) {
  KeyPlacement p({10, 11, 12});
  // fp32 x 1000 = 4000 bytes; 1030-byte partitions become 1028 (257 elements).
  auto chunks = p.Place(7, Spec("w", proto::FLOAT32, 1000, 1030));
  ASSERT_TRUE(chunks.ok()) << chunks.status().ToString();
  ASSERT_EQ(chunks->size(), 4u);
  const uint64_t lengths[] = {1028, 1028, 1028, 916};
  uint64_t offset = 0;
  for (uint32_t i = 0; i < 4; ++i) {
    const auto& c = (*chunks)[i];
    EXPECT_EQ(c.key(), MakeKey(7, i));
    EXPECT_EQ(c.key(), (uint64_t{7} << 32) | i);
    EXPECT_EQ(c.offset_bytes(), offset);
    EXPECT_EQ(c.length_bytes(), lengths[i]);
    EXPECT_EQ(c.length_bytes() % 4, 0u);
    offset += c.length_bytes();
  }
  EXPECT_EQ(offset, 4000u);
}

TEST(PlacementTest, ExactMultipleHasNoShortChunk) {
  KeyPlacement p({1});
  auto chunks = p.Place(0, Spec("w", proto::FLOAT64, 512, 1024));  // 4096 bytes / 1024
  ASSERT_TRUE(chunks.ok());
  ASSERT_EQ(chunks->size(), 4u);
  for (const auto& c : *chunks) EXPECT_EQ(c.length_bytes(), 1024u);
}

TEST(PlacementTest, TensorSmallerThanAPartitionIsOneChunk) {
  KeyPlacement p({1, 2});
  auto chunks = p.Place(3, Spec("b", proto::FLOAT16, 5, 4096));
  ASSERT_TRUE(chunks.ok());
  ASSERT_EQ(chunks->size(), 1u);
  EXPECT_EQ((*chunks)[0].length_bytes(), 10u);
  EXPECT_EQ((*chunks)[0].offset_bytes(), 0u);
  EXPECT_EQ((*chunks)[0].key(), MakeKey(3, 0));
}

TEST(PlacementTest, ZeroElementTensorHasZeroChunks) {
  KeyPlacement p({1, 2});
  auto chunks = p.Place(0, Spec("empty", proto::FLOAT32, 0, 4096));
  ASSERT_TRUE(chunks.ok());
  EXPECT_TRUE(chunks->empty());
  EXPECT_EQ(p.loads(), (std::vector<uint64_t>{0, 0}));
}

TEST(PlacementTest, PartitionSmallerThanOneElementIsAnError) {
  KeyPlacement p({1});
  auto r = p.Place(0, Spec("w", proto::FLOAT64, 10, 7));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("partition_bytes 7"));
  EXPECT_THAT(r.status().message(), HasSubstr("fp64"));
  EXPECT_FALSE(p.Place(0, Spec("w", proto::FLOAT32, 10, 0)).ok());
  // Exactly one element is fine.
  auto one = p.Place(1, Spec("w", proto::FLOAT16, 3, 2));
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->size(), 3u);
}

TEST(PlacementTest, UnknownDtypeIsAnError) {
  KeyPlacement p({1});
  auto r = p.Place(0, Spec("w", proto::DTYPE_UNKNOWN, 10, 64));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
}

TEST(PlacementTest, NoServersIsFailedPrecondition) {
  KeyPlacement p({});
  auto r = p.Place(0, Spec("w", proto::FLOAT32, 10, 64));
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
}

TEST(PlacementTest, TooManyChunksIsAnErrorNamingTheTensorAndThePartitionItNeeds) {
  KeyPlacement p({1});
  // 2^33 fp32 elements in 4-byte chunks: refused before anything is allocated.
  auto r = p.Place(0, Spec("huge", proto::FLOAT32, uint64_t{1} << 33, 4));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("huge"));
  // A million fp32 elements in 64-byte chunks: 62500 chunks, whose placement
  // would not fit one reply header.
  r = p.Place(1, Spec("layer", proto::FLOAT32, 1000000, 64));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("'layer'"));
  EXPECT_THAT(r.status().message(), HasSubstr("SYNCLINE_PARTITION_BYTES"));
  // 4,000,000 / 32768 is 122.07: 123 bytes, rounded up to whole fp32 elements.
  EXPECT_THAT(r.status().message(), HasSubstr("at least 124"));
  EXPECT_TRUE(p.Place(2, Spec("fits", proto::FLOAT32, 1000000, 124)).ok());
  EXPECT_FALSE(p.Place(3, Spec("short", proto::FLOAT32, 1000000, 123)).ok()) << "123 rounds down to 120";
}

TEST(PlacementTest, ThePlacementOfTheMostChunksFitsOneReplyHeader) {
  // Worst case per chunk: the largest keys, server ids and offsets.
  KeyPlacement p({1 << 30});
  auto chunks = p.Place(0xffffffffu, Spec("big", proto::FLOAT64, kMaxChunksPerTensor * (uint64_t{1} << 31),
                                          uint64_t{1} << 34));
  ASSERT_TRUE(chunks.ok()) << chunks.status().ToString();
  ASSERT_EQ(chunks->size(), kMaxChunksPerTensor);
  proto::Header h;
  h.set_op(proto::DECLARE_REPLY);
  auto* reply = h.mutable_declare_reply();
  reply->set_tensor_id(0xffffffffu);
  reply->set_name(std::string(256, 'n'));
  for (const auto& c : *chunks) *reply->add_chunks() = c;
  EXPECT_LT(h.ByteSizeLong(), kMaxHeaderBytes);
}

TEST(PlacementTest, TensorWhoseByteSizeOverflowsIsAnError) {
  // num_elements * element size does not fit 64 bits; the tensor is not
  // representable and must be refused, not silently wrapped to a small size.
  KeyPlacement p({1});
  auto r = p.Place(0, Spec("overflow", proto::FLOAT64, (uint64_t{1} << 61) + 1, 1 << 20));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
}

TEST(PlacementTest, TiesGoToTheLowestRankAndChunksSpreadOverServers) {
  KeyPlacement p({20, 21, 22});
  auto chunks = p.Place(0, Spec("w", proto::FLOAT32, 3 * 256, 1024));  // three equal chunks
  ASSERT_TRUE(chunks.ok());
  ASSERT_EQ(chunks->size(), 3u);
  EXPECT_EQ((*chunks)[0].server_id(), 20);
  EXPECT_EQ((*chunks)[1].server_id(), 21);
  EXPECT_EQ((*chunks)[2].server_id(), 22);
  EXPECT_EQ(p.loads(), (std::vector<uint64_t>{1024, 1024, 1024}));
  // The next chunk goes to the least-loaded server: after a small tensor on 20, a
  // big one avoids 20.
  auto small = p.Place(1, Spec("s", proto::FLOAT32, 1, 1024));
  ASSERT_TRUE(small.ok());
  EXPECT_EQ((*small)[0].server_id(), 20);
  auto next = p.Place(2, Spec("n", proto::FLOAT32, 256, 1024));
  ASSERT_TRUE(next.ok());
  EXPECT_EQ((*next)[0].server_id(), 21);
}

TEST(PlacementTest, ManyMixedTensorsEndBalancedWithinTheLargestChunk) {
  const std::vector<int32_t> servers = {5, 6, 7, 8};
  KeyPlacement p(servers);
  std::mt19937 gen(42);
  std::uniform_int_distribution<uint64_t> elements(1, 300000);
  const proto::DType dtypes[] = {proto::FLOAT32, proto::FLOAT64, proto::FLOAT16, proto::BFLOAT16};
  const uint64_t partition = 65536 + 3;  // not a multiple of any element size
  std::map<int32_t, uint64_t> bytes_by_server;
  uint64_t largest_chunk = 0, total = 0;
  std::set<uint64_t> keys;
  for (uint32_t t = 0; t < 300; ++t) {
    auto chunks = p.Place(t, Spec("t" + std::to_string(t), dtypes[t % 4], elements(gen), partition));
    ASSERT_TRUE(chunks.ok()) << chunks.status().ToString();
    for (const auto& c : *chunks) {
      EXPECT_TRUE(keys.insert(c.key()).second) << "duplicate key " << c.key();
      EXPECT_NE(std::find(servers.begin(), servers.end(), c.server_id()), servers.end());
      bytes_by_server[c.server_id()] += c.length_bytes();
      largest_chunk = std::max<uint64_t>(largest_chunk, c.length_bytes());
      total += c.length_bytes();
    }
  }
  const auto& loads = p.loads();
  ASSERT_EQ(loads.size(), servers.size());
  uint64_t sum = 0;
  for (size_t i = 0; i < servers.size(); ++i) {
    EXPECT_EQ(loads[i], bytes_by_server[servers[i]]) << "loads() disagrees with the placements";
    sum += loads[i];
  }
  EXPECT_EQ(sum, total);
  const auto [mn, mx] = std::minmax_element(loads.begin(), loads.end());
  EXPECT_LE(*mx - *mn, largest_chunk) << "max " << *mx << " min " << *mn;
}

}  // namespace
}  // namespace syncline
