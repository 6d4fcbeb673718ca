// compression/compressor.h: parsing, the error each form may make per value,
// sums of decoded chunks (sparse ones too), and chunks that do not match.
#include "compression/compressor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "chunk.h"

namespace syncline::compression {
namespace {

using ::testing::HasSubstr;
using testing::Encode;
using testing::RandomValues;

constexpr size_t kSizes[] = {0, 1, 7, 255, 256, 257, 1000, 65536 + 3};

Spec Parse(std::string_view text) {
  Result<Spec> spec = ParseSpec(text);
  EXPECT_TRUE(spec.ok()) << text;
  return spec.ok() ? *spec : Spec{};
}

std::vector<float> Decoded(const Spec& spec, const std::vector<float>& values, uint64_t seed = 7) {
  testing::Chunk c = Encode(spec, values, seed);
  std::vector<float> out(values.size(), 123.0f);
  Status st = Decompress(spec, c.data(), c.bytes, out.data(), out.size());
  EXPECT_TRUE(st.ok()) << st.ToString();
  return out;
}

TEST(ParseSpecTest, ReadsEveryFormAndRefusesWhatIsNotOne) {
  EXPECT_EQ(Parse("int8").kind, Kind::kInt8);
  EXPECT_EQ(Parse("onebit").kind, Kind::kOnebit);
  EXPECT_EQ(Parse("topk:0.01").ratio, 0.01);
  EXPECT_EQ(Parse("randomk:1").kind, Kind::kRandomK);
  EXPECT_EQ(Parse("topk:0.25").Name(), "topk:0.25");
  EXPECT_EQ(Parse("bf16").Name(), "bf16");
  for (const char* bad : {"int9", "topk", "topk:", "topk:0", "topk:1.5", "topk:-0.1", "topk:0.1x", "fp16:0.5", ""}) {
    Result<Spec> spec = ParseSpec(bad);
    ASSERT_FALSE(spec.ok()) << bad;
    EXPECT_THAT(spec.status().message(), HasSubstr("compression")) << bad;
  }
  EXPECT_THAT(ParseSpec("int9").status().message(), HasSubstr("expected none, fp16, bf16, int8, onebit"));
  EXPECT_THAT(ParseSpec("topk:2").status().message(), HasSubstr("in (0, 1]"));
}

TEST(CheckDTypeTest, OnlyFp32IsCompressedAndTheOthersAreRefusedWithTheReason) {
  for (const char* form : {"fp16", "bf16", "int8", "onebit", "topk:0.1", "randomk:0.1"}) {
    EXPECT_TRUE(CheckDType(Parse(form), DType::kFloat32).ok());
    Status st = CheckDType(Parse(form), DType::kFloat64);
    EXPECT_THAT(st.message(), HasSubstr(std::string(form) + " takes fp32 values, not fp64"));
    EXPECT_THAT(CheckDType(Parse(form), DType::kBFloat16).message(), HasSubstr("16-bit tensor"));
  }
  EXPECT_TRUE(CheckDType(Parse("none"), DType::kFloat16).ok());
}

TEST(CompressTest, SizesAreAsDocumented) {
  EXPECT_EQ(CompressedBytes(Parse("fp16"), 1000), kHeaderBytes + 2000);
  EXPECT_EQ(CompressedBytes(Parse("int8"), 1000), kHeaderBytes + 4 * 4 + 1000);
  EXPECT_EQ(CompressedBytes(Parse("onebit"), 1001), kHeaderBytes + 4 + 128);  // 126 bytes of bits, padded to 4
  EXPECT_EQ(CompressedBytes(Parse("fp16"), 1001), kHeaderBytes + 2004);
  EXPECT_EQ(CompressedBytes(Parse("topk:0.01"), 1001), kHeaderBytes + 8 * 11);
  EXPECT_EQ(CompressedBytes(Parse("randomk:0.01"), 1001), kHeaderBytes + 8 + 4 * 11);
  EXPECT_EQ(SentValues(Parse("topk:0.001"), 5), 1u);  // at least one value
  EXPECT_EQ(SentValues(Parse("topk:0.001"), 0), 0u);
}

TEST(CompressTest, AChunkTakesAPartitionOnTheWireUpToTheLargestChunk) {
  constexpr uint64_t kPartition = 256 << 10, kLargest = 4 << 20;
  EXPECT_EQ(ChunkBytesForWireBytes(Parse("none"), kPartition, kLargest), kPartition);
  for (const char* form : {"fp16", "bf16", "int8", "onebit", "topk:0.01", "randomk:0.01", "topk:0.4"}) {
    const Spec spec = Parse(form);
    const uint64_t chunk = ChunkBytesForWireBytes(spec, kPartition, kLargest);
    EXPECT_EQ(chunk % 4096, 0u) << form;
    EXPECT_GE(chunk, kPartition) << form;
    EXPECT_LE(chunk, kLargest) << form;
    const size_t wire = CompressedBytes(spec, chunk / 4);
    // No more than a partition on the wire; less only where the largest chunk
    // is reached, or by the rounding to 4 KiB.
    EXPECT_LE(wire, kPartition) << form;
    if (chunk < kLargest) {
      EXPECT_GT(CompressedBytes(spec, chunk / 4 + 1024), kPartition) << form;
    }
  }
  EXPECT_EQ(ChunkBytesForWireBytes(Parse("fp16"), kPartition, kLargest), 508u << 10);  // the header: not quite 2 x
  EXPECT_EQ(ChunkBytesForWireBytes(Parse("int8"), kPartition, kLargest), 1008u << 10);
  EXPECT_EQ(ChunkBytesForWireBytes(Parse("onebit"), kPartition, kLargest), kLargest);
  // Partitions at or above the largest chunk, and those too small to grow by
  // a whole 4 KiB, stay as they are.
  EXPECT_EQ(ChunkBytesForWireBytes(Parse("int8"), kLargest, kLargest), kLargest);
  EXPECT_EQ(ChunkBytesForWireBytes(Parse("fp16"), 1024, kLargest), 1024u);
}

TEST(CompressTest, PaddingIsZerosWhateverTheBufferHeld) {
  const std::vector<float> v(1001, 0.5f);
  for (const char* form : {"fp16", "onebit", "int8"}) {
    const size_t bytes = CompressedBytes(Parse(form), v.size());
    std::vector<uint32_t> words(bytes / 4, 0xABABABABu);  // 4-byte aligned, not clean
    auto* out = reinterpret_cast<std::byte*>(words.data());
    ASSERT_TRUE(Compress(Parse(form), v.data(), v.size(), 1, out).ok());
    EXPECT_EQ(std::to_integer<int>(out[bytes - 1]), 0) << form;
  }
}

TEST(CompressTest, CastsRoundEachValueToNearest) {
  for (size_t n : kSizes) {
    const std::vector<float> v = RandomValues(n, 1, 3.0f);
    const std::vector<float> fp16 = Decoded(Parse("fp16"), v);
    const std::vector<float> bf16 = Decoded(Parse("bf16"), v);
    for (size_t i = 0; i < n; ++i) {
      // Relative error at most half an ulp: 2^-11 for fp16, 2^-8 for bf16 (normal values).
      if (std::fabs(v[i]) > 1e-4f) {
        EXPECT_LE(std::fabs(fp16[i] - v[i]), std::fabs(v[i]) * 0x1p-11f) << i;
      }
      EXPECT_LE(std::fabs(bf16[i] - v[i]), std::fabs(v[i]) * 0x1p-8f) << i;
    }
  }
}

TEST(CompressTest, Int8ErrsByAtMostHalfItsBlocksStep) {
  const Spec int8 = Parse("int8");
  for (size_t n : kSizes) {
    std::vector<float> v = RandomValues(n, 2);
    for (size_t i = 300; i < std::min<size_t>(n, 600); ++i) v[i] *= 1000;  // blocks of other magnitudes
    for (size_t i = 700; i < std::min<size_t>(n, 1000); ++i) v[i] = 0;      // an all-zero block
    const std::vector<float> d = Decoded(int8, v);
    for (size_t start = 0; start < n; start += kInt8Block) {
      const size_t end = std::min(n, start + kInt8Block);
      float max = 0;
      for (size_t i = start; i < end; ++i) max = std::max(max, std::fabs(v[i]));
      for (size_t i = start; i < end; ++i)
        ASSERT_LE(std::fabs(d[i] - v[i]), max / 127 * 0.5f * 1.0001f) << "n " << n << " value " << i;
    }
    if (n >= 1000) {
      EXPECT_EQ(d[800], 0.0f);
    }
  }
  // A block of values too small to divide by (127 / max overflows) is sent as zeros.
  const std::vector<float> tiny(300, 1e-40f);
  for (float x : Decoded(int8, tiny)) ASSERT_EQ(x, 0.0f);
}

TEST(CompressTest, OnebitSendsEachSignWithTheMeanMagnitude) {
  for (size_t n : kSizes) {
    const std::vector<float> v = RandomValues(n, 3);
    double mean = 0;
    for (float x : v) mean += std::fabs(x);
    mean /= std::max<size_t>(n, 1);
    const std::vector<float> d = Decoded(Parse("onebit"), v);
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(std::signbit(d[i]), std::signbit(v[i])) << i;
      ASSERT_NEAR(std::fabs(d[i]), mean, mean * 1e-5) << i;
    }
  }
}

TEST(CompressTest, OnebitAddsFactorTimesEachSignedScaleIntoTheSum) {
  // The sum path (DecompressAdd) unpacks the bits as Decompress does, lane
  // for lane, whole bytes and the tail: out[i] + factor * decoded[i], bit for bit.
  const Spec onebit = Parse("onebit");
  for (size_t n : kSizes) {
    const std::vector<float> v = RandomValues(n, 5), base = RandomValues(n, 6);
    const std::vector<float> d = Decoded(onebit, v);
    testing::Chunk c = Encode(onebit, v);
    std::vector<float> sum = base;
    ASSERT_TRUE(DecompressAdd(onebit, c.data(), c.bytes, 0.25f, sum.data(), n).ok());
    for (size_t i = 0; i < n; ++i)
      ASSERT_EQ(std::bit_cast<uint32_t>(sum[i]), std::bit_cast<uint32_t>(base[i] + 0.25f * d[i])) << n << " " << i;
  }
}

TEST(CompressTest, TopkKeepsExactlyTheLargestMagnitudes) {
  for (size_t n : kSizes) {
    if (n == 0) continue;
    const Spec topk = Parse("topk:0.05");
    const std::vector<float> v = RandomValues(n, 4);
    const std::vector<float> d = Decoded(topk, v);
    const size_t k = SentValues(topk, n);
    std::vector<float> magnitudes;
    for (float x : v) magnitudes.push_back(std::fabs(x));
    std::sort(magnitudes.begin(), magnitudes.end(), std::greater<float>());
    size_t kept = 0;
    for (size_t i = 0; i < n; ++i) {
      if (d[i] == 0) continue;
      ++kept;
      ASSERT_EQ(d[i], v[i]) << i;  // sent exactly
      ASSERT_GE(std::fabs(v[i]), magnitudes[k - 1]) << i;
    }
    EXPECT_EQ(kept, k) << n;
  }
}

TEST(CompressTest, TopkBreaksTiesTowardLowerIndicesAndNeverSendsNaN) {
  std::vector<float> v(40000, 0.5f);  // large enough for the sampled threshold
  v[39999] = -2.0f;
  v[7] = NAN;
  const Spec topk = Parse("topk:0.001");  // 40 values
  const std::vector<float> d = Decoded(topk, v);
  EXPECT_EQ(d[39999], -2.0f);
  EXPECT_EQ(d[7], 0.0f);
  size_t kept = 0;
  for (size_t i = 0; i < 41; ++i) kept += d[i] == 0.5f;
  EXPECT_EQ(kept, 39u);  // 0..40 without 7
  EXPECT_EQ(d[41], 0.0f);
}

// The definition topk follows, by brute force: the k values largest in
// magnitude, ties toward lower indices, NaN never while k values are not NaN.
std::vector<float> TopkReference(const std::vector<float>& v, size_t k) {
  std::vector<uint32_t> order;
  for (uint32_t i = 0; i < v.size(); ++i)
    if (!std::isnan(v[i])) order.push_back(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t a, uint32_t b) { return std::fabs(v[a]) > std::fabs(v[b]); });
  std::vector<float> d(v.size(), 0.0f);
  for (size_t j = 0; j < k && j < order.size(); ++j) d[order[j]] = v[order[j]];
  return d;
}

TEST(CompressTest, TopkMatchesABruteForceSelectionWhateverTheSampleFinds) {
  // Spread values (the sampled threshold's candidates suffice), values on a
  // coarse grid (many ties at the threshold), a few huge ones the sample
  // misses, infinities and NaN among them, and sizes off the 16-value blocks.
  for (size_t n : {size_t{16385}, size_t{70001}, size_t{262144}}) {
    for (int shape = 0; shape < 4; ++shape) {
      std::vector<float> v = RandomValues(n, 11 + shape);
      if (shape == 1)
        for (float& x : v) x = std::round(x * 4.0f) / 4.0f;
      if (shape == 2)
        for (size_t i = 5; i < n; i += n / 37) v[i] = 1e6f * (i % 2 ? 1.0f : -1.0f);
      if (shape == 3) {
        v[3] = INFINITY;
        v[n - 1] = -INFINITY;
        for (size_t i = 1; i < n; i += n / 50) v[i] = NAN;
      }
      for (const char* form : {"topk:0.01", "topk:0.001", "topk:0.1"}) {
        const Spec topk = Parse(form);
        const std::vector<float> d = Decoded(topk, v);
        const std::vector<float> want = TopkReference(v, SentValues(topk, n));
        for (size_t i = 0; i < n; ++i)
          ASSERT_EQ(std::bit_cast<uint32_t>(d[i]), std::bit_cast<uint32_t>(want[i])) << form << " n " << n
                                                                                    << " shape " << shape << " i " << i;
      }
    }
  }
}

TEST(CompressTest, TopkSendsTheFirstNaNsOnlyWhenFewerThanKValuesAreNot) {
  std::vector<float> v(20000, NAN);
  v[100] = 3.0f;
  v[19000] = -1.0f;
  const Spec topk = Parse("topk:0.0002");  // 4 values: the two numbers, then NaNs at 0 and 1
  const std::vector<float> d = Decoded(topk, v);
  EXPECT_EQ(d[100], 3.0f);
  EXPECT_EQ(d[19000], -1.0f);
  EXPECT_TRUE(std::isnan(d[0]) && std::isnan(d[1]));
  EXPECT_EQ(d[2], 0.0f);
}

TEST(CompressTest, RandomkIndicesStayInsideTheChunkForEverySeed) {
  // This seed's offset is 1 - 2^-53: in doubles, (k - 1 + u) n / k rounded
  // up to n, and decoding wrote one value past the end of the sum (a peer
  // picks the seed that travels in its chunk).
  constexpr uint64_t kEdgeSeed = 3558559446808474027ull;
  const Spec randomk = Parse("randomk:0.25");
  const std::vector<float> v(1024, 1.0f);
  for (uint64_t seed : {kEdgeSeed, uint64_t{0}, ~uint64_t{0}}) {
    testing::Chunk c = Encode(randomk, v, seed);
    std::vector<float> out(v.size() + 1, 0.0f);
    ASSERT_TRUE(DecompressAdd(randomk, c.data(), c.bytes, 1.0f, out.data(), v.size()).ok());
    EXPECT_EQ(out.back(), 0.0f) << "seed " << seed << " wrote past the chunk";
    EXPECT_EQ(std::count(out.begin(), out.end() - 1, 1.0f), 256) << "seed " << seed;
  }
}

TEST(CompressTest, RandomkSendsKValuesChosenByTheSeed) {
  const Spec randomk = Parse("randomk:0.1");
  const std::vector<float> v = RandomValues(1000, 5);
  const std::vector<float> a = Decoded(randomk, v, 1), again = Decoded(randomk, v, 1), b = Decoded(randomk, v, 2);
  EXPECT_EQ(a, again);
  std::set<std::vector<float>> chosen;  // 10 offsets are possible at 1 in 10
  for (uint64_t seed = 0; seed < 50; ++seed) chosen.insert(Decoded(randomk, v, seed));
  EXPECT_EQ(chosen.size(), 10u);
  for (const std::vector<float>* d : {&a, &b}) {
    size_t kept = 0;
    for (size_t i = 0; i < v.size(); ++i)
      if ((*d)[i] != 0) {
        ++kept;
        ASSERT_EQ((*d)[i], v[i]);
      }
    EXPECT_EQ(kept, 100u);
  }
  // Over many seeds every value is sent about as often as any other.
  std::vector<int> times(1000, 0);
  for (uint64_t seed = 0; seed < 400; ++seed) {
    const std::vector<float> d = Decoded(randomk, v, seed);
    for (size_t i = 0; i < v.size(); ++i) times[i] += d[i] != 0;
  }
  EXPECT_GT(*std::min_element(times.begin(), times.end()), 10);
  EXPECT_LT(*std::max_element(times.begin(), times.end()), 80);
}

TEST(DecompressAddTest, SumsChunksOfSeveralWorkersDenseAndSparse) {
  for (const char* form : {"fp16", "bf16", "int8", "onebit", "topk:0.1", "randomk:0.1"}) {
    const Spec spec = Parse(form);
    const size_t n = 1000 + 3;
    std::vector<float> sum(n, 0.0f), expected(n, 0.0f);
    for (uint32_t worker = 0; worker < 3; ++worker) {
      const std::vector<float> v = RandomValues(n, 10 + worker);
      testing::Chunk c = Encode(spec, v, worker);
      ASSERT_TRUE(DecompressAdd(spec, c.data(), c.bytes, 1.0f, sum.data(), n).ok()) << form;
      const std::vector<float> d = Decoded(spec, v, worker);
      for (size_t i = 0; i < n; ++i) expected[i] += d[i];
    }
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(sum[i], expected[i]) << form << " " << i;
  }
  // The factor scales what is added: -1 takes a decoded chunk back out.
  const std::vector<float> v = RandomValues(64, 20);
  std::vector<float> out(64, 0.0f);
  testing::Chunk c = Encode(Parse("int8"), v);
  const std::vector<float> d = Decoded(Parse("int8"), v);
  ASSERT_TRUE(DecompressAdd(Parse("int8"), c.data(), c.bytes, 2.0f, out.data(), 64).ok());
  for (size_t i = 0; i < 64; ++i) EXPECT_EQ(out[i], 2 * d[i]);
  ASSERT_TRUE(DecompressAdd(Parse("int8"), c.data(), c.bytes, -2.0f, out.data(), 64).ok());
  for (float x : out) EXPECT_EQ(x, 0.0f);
}

TEST(DecompressAddTest, AChunkThatDoesNotMatchIsRefusedAndNothingIsWritten) {
  const std::vector<float> v = RandomValues(100, 30);
  const Spec int8 = Parse("int8"), topk = Parse("topk:0.1");
  std::vector<float> out(100, 1.0f);
  auto refused = [&](const Spec& spec, testing::Chunk& c, size_t bytes, size_t n, const char* why) {
    Status st = DecompressAdd(spec, c.data(), bytes, 1.0f, out.data(), n);
    EXPECT_FALSE(st.ok()) << why;
    EXPECT_THAT(st.message(), HasSubstr(why));
    Status cleared = Decompress(spec, c.data(), bytes, out.data(), n);
    EXPECT_FALSE(cleared.ok());
    EXPECT_TRUE(std::all_of(out.begin(), out.end(), [](float x) { return x == 1.0f; })) << why;
  };
  testing::Chunk c = Encode(int8, v);
  refused(Parse("onebit"), c, c.bytes, 100, "it holds form 3 (int8)");
  refused(int8, c, c.bytes, 99, "it holds 100 values");
  refused(int8, c, c.bytes - 1, 100, "bytes, expected");
  refused(int8, c, 3, 100, "shorter than its header");
  c.data()[1] = std::byte{9};
  refused(int8, c, c.bytes, 100, "format version 9");
  testing::Chunk sparse = Encode(topk, v);
  uint32_t* indices = reinterpret_cast<uint32_t*>(sparse.data() + kHeaderBytes);
  const uint32_t first = indices[0];
  indices[0] = 100;
  refused(topk, sparse, sparse.bytes, 100, "index 100 at position 0 is out of range");
  indices[0] = first;
  indices[1] = indices[0];
  refused(topk, sparse, sparse.bytes, 100, "out of order");
  testing::Chunk good = Encode(int8, v);
  std::vector<std::byte> shifted(good.bytes + 1);
  std::memcpy(shifted.data() + (reinterpret_cast<uintptr_t>(shifted.data()) % 4 == 0 ? 1 : 0), good.data(),
              good.bytes);
  std::byte* odd = shifted.data() + (reinterpret_cast<uintptr_t>(shifted.data()) % 4 == 0 ? 1 : 0);
  EXPECT_THAT(DecompressAdd(int8, odd, good.bytes, 1.0f, out.data(), 100).message(), HasSubstr("aligned"));
}

TEST(CompressTest, NonFiniteValuesAreNotHidden) {
  std::vector<float> v = RandomValues(600, 40);
  v[10] = INFINITY;
  v[400] = NAN;
  const std::vector<float> int8 = Decoded(Parse("int8"), v);
  EXPECT_TRUE(std::isnan(int8[0]) && std::isnan(int8[255]) && std::isnan(int8[256 + 144]));
  EXPECT_FALSE(std::isnan(int8[599]));  // the third block is finite
  EXPECT_TRUE(std::isnan(Decoded(Parse("onebit"), v)[599]));
  EXPECT_TRUE(std::isinf(Decoded(Parse("fp16"), v)[10]));
  EXPECT_TRUE(std::isnan(Decoded(Parse("bf16"), v)[400]));
  EXPECT_THAT(Compress(Parse("none"), v.data(), v.size(), 0, nullptr).message(), HasSubstr("none"));
}

}  // namespace
}  // namespace syncline::compression
