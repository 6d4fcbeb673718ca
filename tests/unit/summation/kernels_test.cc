// summation/kernels.h: exact sums for every dtype and awkward size, correctly
// rounded 16-bit sums, bounds, and Scale.
#include "summation/kernels.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "reference.h"
#include "summation/half.h"

namespace syncline {
namespace {

using testing::kAllDTypes;
using testing::LoadAs;
using testing::StoreAs;

// Small integers and quarters: exact in every dtype (bf16 keeps 8 bits), and
// so are their sums.
double DstValue(size_t i) { return static_cast<double>(static_cast<int>(i % 17) - 8) * 0.25; }
double SrcValue(size_t i) { return static_cast<double>(static_cast<int>(i % 13) - 6) * 0.5; }

constexpr size_t kSizes[] = {0, 1, 7, 63, 64, 1000, (size_t{1} << 20) + 3};

class SumIntoExactTest : public ::testing::TestWithParam<std::tuple<DType, size_t>> {};

TEST_P(SumIntoExactTest, SumsExactly) {
  const auto [t, n] = GetParam();
  const size_t es = DTypeSize(t);
  // One guard element on each side, and dst offset by one element so the
  // vector loops also meet an unaligned start.
  for (size_t offset : {size_t{0}, size_t{1}}) {
    std::vector<uint8_t> dst((n + 2 + offset) * es), src((n + 1) * es);
    void* d = dst.data() + (1 + offset) * es;
    void* s = src.data() + es;
    StoreAs(t, dst.data(), offset, 99);
    StoreAs(t, dst.data(), n + 1 + offset, 99);
    for (size_t i = 0; i < n; ++i) {
      StoreAs(t, d, i, DstValue(i));
      StoreAs(t, s, i, SrcValue(i));
    }
    kernels::SumInto(t, d, s, n);
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(LoadAs(t, d, i), DstValue(i) + SrcValue(i)) << "i=" << i << " offset=" << offset;
      ASSERT_EQ(LoadAs(t, s, i), SrcValue(i));
    }
    EXPECT_EQ(LoadAs(t, dst.data(), offset), 99);
    EXPECT_EQ(LoadAs(t, dst.data(), n + 1 + offset), 99);
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllDTypesAndSizes, SumIntoExactTest,
    ::testing::Combine(::testing::ValuesIn(kAllDTypes), ::testing::ValuesIn(kSizes)),
    [](const auto& info) {
      return std::string(DTypeName(std::get<0>(info.param))) + "_n" +
             std::to_string(std::get<1>(info.param));
    });

bool IsNan16(DType t, uint16_t v) {
  return t == DType::kFloat16 ? std::isnan(HalfToFloat(v)) : std::isnan(Bf16ToFloat(v));
}

// Random 16-bit patterns (subnormals, inf and NaN included): every element
// must be the correctly rounded sum. The exact sum of two halves or two bf16
// fits a double, so the reference rounds that exact value once.
TEST(SumIntoTest, SixteenBitSumsAreCorrectlyRounded) {
  std::mt19937 rng(4242);
  std::uniform_int_distribution<uint32_t> bits(0, 0xffff);
  for (DType t : {DType::kFloat16, DType::kBFloat16}) {
    const size_t n = 100003;
    std::vector<uint16_t> dst(n), src(n);
    for (size_t i = 0; i < n; ++i) {
      dst[i] = static_cast<uint16_t>(bits(rng));
      src[i] = static_cast<uint16_t>(bits(rng));
      if (i % 3 == 0) src[i] = static_cast<uint16_t>((dst[i] ^ 0x8000) + (bits(rng) % 5) - 2);  // near cancellation
    }
    std::vector<uint16_t> out = dst;
    kernels::SumInto(t, out.data(), src.data(), n);
    for (size_t i = 0; i < n; ++i) {
      const double exact = LoadAs(t, dst.data(), i) + LoadAs(t, src.data(), i);
      if (std::isnan(exact)) {
        ASSERT_TRUE(IsNan16(t, out[i])) << DTypeName(t) << " i=" << i;
        continue;
      }
      const uint16_t want =
          t == DType::kFloat16 ? testing::RefDoubleToHalf(exact) : testing::RefDoubleToBf16(exact);
      // (Zero signs need no care: double addition follows the same IEEE rule.)
      ASSERT_EQ(out[i], want)
          << DTypeName(t) << " i=" << i << std::hex << " a=" << dst[i] << " b=" << src[i];
    }
  }
}

// A sum that lands below the smallest normal bf16 keeps its subnormal value
// (fast paths whose conversion flushes subnormals must not be visible), in any
// position of a long buffer, next to ordinary sums.
TEST(SumIntoTest, Bf16SubnormalSumsAreKept) {
  constexpr uint16_t kOne = 0x3f80, kTwo = 0x4000;
  constexpr uint16_t kMinNormalPlusUlp = 0x0081, kMinusMinNormal = 0x8080;  // sum: 2^-133 = bf16 0x0001
  for (size_t where : {size_t{0}, size_t{31}, size_t{32}, size_t{77}, size_t{99}}) {
    std::vector<uint16_t> dst(100, kOne), src(100, kOne);
    dst[where] = kMinNormalPlusUlp;
    src[where] = kMinusMinNormal;
    kernels::SumInto(DType::kBFloat16, dst.data(), src.data(), dst.size());
    for (size_t i = 0; i < dst.size(); ++i) {
      ASSERT_EQ(dst[i], i == where ? 0x0001 : kTwo) << "i=" << i << " where=" << where;
    }
  }
}

TEST(SumIntoTest, WideTypesMatchScalarAdd) {
  std::mt19937 rng(99);
  std::normal_distribution<double> val(0.0, 1e3);
  const size_t n = 4097;
  std::vector<float> f(n), fs(n);
  std::vector<double> d(n), ds(n);
  for (size_t i = 0; i < n; ++i) {
    f[i] = static_cast<float>(val(rng));
    fs[i] = static_cast<float>(val(rng));
    d[i] = val(rng);
    ds[i] = val(rng);
  }
  std::vector<float> fo = f;
  std::vector<double> dout = d;
  kernels::SumInto(DType::kFloat32, fo.data(), fs.data(), n);
  kernels::SumInto(DType::kFloat64, dout.data(), ds.data(), n);
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(fo[i], f[i] + fs[i]);
    ASSERT_EQ(dout[i], d[i] + ds[i]);
  }
}

TEST(ScaleTest, ScalesEveryDType) {
  for (DType t : kAllDTypes) {
    for (size_t n : {size_t{0}, size_t{1}, size_t{63}, size_t{1001}}) {
      std::vector<uint8_t> buf((n + 1) * DTypeSize(t));
      for (size_t i = 0; i < n; ++i) StoreAs(t, buf.data(), i, DstValue(i));
      StoreAs(t, buf.data(), n, 7);
      kernels::Scale(t, buf.data(), n, 0.25);
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(LoadAs(t, buf.data(), i), DstValue(i) * 0.25) << DTypeName(t);
      EXPECT_EQ(LoadAs(t, buf.data(), n), 7);
    }
  }
}

TEST(ScaleTest, SixteenBitScaleRoundsOnceFromFloat) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<uint32_t> bits(0, 0xffff);
  const float factor = 1.0f / 3.0f;
  for (DType t : {DType::kFloat16, DType::kBFloat16}) {
    std::vector<uint16_t> v(5000);
    for (auto& x : v) x = static_cast<uint16_t>(bits(rng));
    std::vector<uint16_t> out = v;
    kernels::Scale(t, out.data(), out.size(), 1.0 / 3.0);
    for (size_t i = 0; i < v.size(); ++i) {
      // Contract: multiply in fp32 by float(factor), round once.
      const uint16_t want = t == DType::kFloat16 ? FloatToHalf(HalfToFloat(v[i]) * factor)
                                                 : FloatToBf16(Bf16ToFloat(v[i]) * factor);
      if (IsNan16(t, want)) {
        ASSERT_TRUE(IsNan16(t, out[i]));
      } else {
        ASSERT_EQ(out[i], want) << DTypeName(t) << " i=" << i;
      }
    }
  }
}

TEST(SumIntoTest, UnknownDTypeIsANoOp) {
  float dst[4] = {1, 2, 3, 4};
  const float src[4] = {1, 1, 1, 1};
  kernels::SumInto(static_cast<DType>(0), dst, src, 4);
  kernels::Scale(static_cast<DType>(99), dst, 4, 2.0);
  EXPECT_EQ(dst[3], 4.0f);
}

}  // namespace
}  // namespace syncline
