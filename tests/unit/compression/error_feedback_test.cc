// compression/error_feedback.h: over many steps what was decoded plus the
// residual is what was given, and the residual stays bounded for every lossy
// form (without feedback the loss of a biased form grows with the steps).
#include "compression/error_feedback.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <vector>

#include "chunk.h"

namespace syncline::compression {
namespace {

using ::testing::HasSubstr;
using testing::RandomValues;

float MaxAbs(const std::vector<float>& v) {
  float m = 0;
  for (float x : v) m = std::max(m, std::fabs(x));
  return m;
}

class ErrorFeedbackTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ErrorFeedbackTest, DecodedSumTracksTheTrueSumWithinABoundedResidual) {
  const Spec spec = *ParseSpec(GetParam());
  constexpr size_t kN = 1000 + 7;
  constexpr int kSteps = 300;
  ErrorFeedback feedback(spec);
  std::vector<double> true_sum(kN, 0), decoded_sum(kN, 0);
  std::vector<float> decoded(kN);
  testing::Chunk chunk;
  chunk.bytes = CompressedBytes(spec, kN);
  chunk.words.assign((chunk.bytes + 3) / 4, 0);
  float largest_residual = 0;
  for (int step = 0; step < kSteps; ++step) {
    // A gradient with a steady direction (biased forms lose it without feedback) and noise.
    std::vector<float> g = RandomValues(kN, 100 + step, 0.5f);
    for (size_t i = 0; i < kN; ++i) g[i] += 0.01f * static_cast<float>(i % 7);
    ASSERT_TRUE(feedback.Compress(g.data(), kN, step, chunk.data()).ok());
    ASSERT_TRUE(Decompress(spec, chunk.data(), chunk.bytes, decoded.data(), kN).ok());
    for (size_t i = 0; i < kN; ++i) {
      true_sum[i] += g[i];
      decoded_sum[i] += decoded[i];
    }
    largest_residual = std::max(largest_residual, MaxAbs(feedback.residual()));
  }
  for (size_t i = 0; i < kN; ++i)
    ASSERT_NEAR(decoded_sum[i] + feedback.residual()[i], true_sum[i], 1e-3 * (1 + std::fabs(true_sum[i]))) << i;
  // Bounded: a step's gradient is at most ~2; topk:0.05 may hold a value back about 1/0.05 steps.
  const float bound = spec.kind == Kind::kTopK || spec.kind == Kind::kRandomK ? 2.0f / static_cast<float>(spec.ratio)
                                                                              : 8.0f;
  EXPECT_LT(largest_residual, bound) << GetParam();
  // The steady part arrives: the decoded sums of values 6 mod 7 are far above those of 0 mod 7.
  double high = 0, low = 0;
  size_t highs = 0, lows = 0;
  for (size_t i = 0; i < kN; ++i) {
    if (i % 7 == 6) high += decoded_sum[i], ++highs;
    if (i % 7 == 0) low += decoded_sum[i], ++lows;
  }
  EXPECT_GT(high / highs - low / lows, 0.06 * kSteps * 0.8) << GetParam();
}

// CompressWithResidual against the same one step at a time: c = values +
// residual; encode c; residual = c - decoded. The chunk and the new residual
// must be the same bits. A sparse form sends its values whole, so their
// residual is 0, an infinity's too (where c - decoded would be inf - inf).
void ExpectFusedEqualsSteps(const Spec& spec, const std::vector<float>& values, const std::vector<float>& start) {
  const size_t n = values.size();
  std::vector<float> residual = start;
  testing::Chunk fused;
  fused.bytes = CompressedBytes(spec, n);
  fused.words.assign((fused.bytes + 3) / 4, 0);
  ASSERT_TRUE(CompressWithResidual(spec, values.data(), residual.data(), n, 9, fused.data()).ok());
  std::vector<float> c(n);
  for (size_t i = 0; i < n; ++i) c[i] = values[i] + start[i];
  testing::Chunk plain = testing::Encode(spec, c, 9);
  ASSERT_EQ(fused.words, plain.words) << spec.Name() << " n " << n;
  std::vector<float> sent = c;
  ASSERT_TRUE(DecompressAdd(spec, plain.data(), plain.bytes, -1.0f, c.data(), n).ok());
  const bool sparse = spec.kind == Kind::kTopK || spec.kind == Kind::kRandomK;
  for (size_t i = 0; i < n; ++i) {
    const float want = sparse && std::isinf(sent[i]) && std::isnan(c[i]) ? 0.0f : c[i];
    ASSERT_EQ(std::bit_cast<uint32_t>(residual[i]), std::bit_cast<uint32_t>(want))
        << spec.Name() << " n " << n << " value " << i;
  }
}

TEST_P(ErrorFeedbackTest, TheFusedPassEqualsEncodingTheSumThenDecodingItBack) {
  const Spec spec = *ParseSpec(GetParam());
  for (size_t n : {size_t{1}, size_t{255}, size_t{1000 + 7}, size_t{70000}})
    ExpectFusedEqualsSteps(spec, RandomValues(n, 1), RandomValues(n, 2, 0.1f));
}

TEST_P(ErrorFeedbackTest, TheFusedPassEqualsTheStepsWithInfinitiesAndTinyBlocks) {
  // An infinity (int8: its block's scale is NaN; onebit: the whole chunk's)
  // and a block of values too small to scale (int8 sends zeros).
  std::vector<float> values = RandomValues(1000 + 7, 3), start = RandomValues(1000 + 7, 4, 0.1f);
  values[3] = INFINITY;
  for (size_t i = 256; i < 512; ++i) values[i] = start[i] = 1e-37f * static_cast<float>(i % 3);
  ExpectFusedEqualsSteps(*ParseSpec(GetParam()), values, start);
}

TEST_P(ErrorFeedbackTest, TheFusedPassEqualsTheStepsWhereTopkSampleLetsTooManyThrough) {
  // Mostly zeros, values and residuals alike: top-k's sampled threshold is 0,
  // every value passes it, and the selection falls back to the whole chunk
  // after the pass has already added the residual.
  std::vector<float> values(70000, 0.0f), start(70000, 0.0f);
  for (size_t i = 0; i < values.size(); i += 97) values[i] = float(i % 5) - 2.0f, start[i + 1] = 0.5f;
  ExpectFusedEqualsSteps(*ParseSpec(GetParam()), values, start);
}

INSTANTIATE_TEST_SUITE_P(LossyForms, ErrorFeedbackTest,
                         ::testing::Values("fp16", "bf16", "int8", "onebit", "topk:0.05", "topk:0.01", "randomk:0.05"));

TEST(ErrorFeedbackTest, AnotherSizeOrNoFormIsRefusedAndChangesNothing) {
  ErrorFeedback feedback(*ParseSpec("int8"));
  std::vector<float> g = RandomValues(100, 1);
  testing::Chunk chunk;
  chunk.words.assign(CompressedBytes(feedback.spec(), 100), 0);
  ASSERT_TRUE(feedback.Compress(g.data(), 100, 0, chunk.data()).ok());
  const std::vector<float> residual = feedback.residual();
  EXPECT_THAT(feedback.Compress(g.data(), 99, 0, chunk.data()).message(), HasSubstr("error feedback of 100 values"));
  EXPECT_EQ(feedback.residual(), residual);
  ErrorFeedback none(*ParseSpec("none"));
  EXPECT_THAT(none.Compress(g.data(), 100, 0, chunk.data()).message(), HasSubstr("has no compressed form"));
}

}  // namespace
}  // namespace syncline::compression
