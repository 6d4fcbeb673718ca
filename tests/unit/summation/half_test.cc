// summation/half.h against the IEEE definitions (tests/unit/summation/reference.h).
#include "summation/half.h"

#include <gtest/gtest.h>

#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <random>

#include "reference.h"

namespace syncline {
namespace {

using testing::RefDoubleToBf16;
using testing::RefDoubleToHalf;
using testing::RefHalfValue;

uint32_t Bits(float f) { return std::bit_cast<uint32_t>(f); }
bool IsHalfNan(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0; }
bool IsBf16Nan(uint16_t b) { return (b & 0x7f80) == 0x7f80 && (b & 0x7f) != 0; }

TEST(HalfTest, HalfToFloatIsExactForEveryPattern) {
  for (uint32_t p = 0; p <= 0xffff; ++p) {
    const auto h = static_cast<uint16_t>(p);
    const float f = HalfToFloat(h);
    if (IsHalfNan(h)) {
      // NaN keeps sign and payload, moved into the top of the float mantissa.
      EXPECT_EQ(Bits(f), ((p & 0x8000u) << 16) | 0x7f800000u | ((p & 0x3ffu) << 13)) << std::hex << p;
    } else {
      EXPECT_EQ(static_cast<double>(f), RefHalfValue(h)) << std::hex << p;
      EXPECT_EQ(std::signbit(f), (p & 0x8000) != 0) << std::hex << p;
    }
  }
}

TEST(HalfTest, EveryHalfRoundTrips) {
  for (uint32_t p = 0; p <= 0xffff; ++p) {
    const auto h = static_cast<uint16_t>(p);
    const uint16_t back = FloatToHalf(HalfToFloat(h));
    if (IsHalfNan(h)) {
      EXPECT_EQ(back, h | 0x0200) << std::hex << p;  // quieted, payload kept
    } else {
      EXPECT_EQ(back, h) << std::hex << p;
    }
  }
}

TEST(HalfTest, RoundingEdgeCases) {
  const float sub = std::ldexp(1.0f, -24);  // smallest half subnormal
  struct Case { float in; uint16_t want; };
  const Case cases[] = {
      {0.0f, 0x0000}, {-0.0f, 0x8000}, {1.0f, 0x3c00}, {-2.0f, 0xc000},
      {1.0f + std::ldexp(1.0f, -11), 0x3c00},      // tie between 1 and 1+2^-10: even (down)
      {1.0f + 3 * std::ldexp(1.0f, -11), 0x3c02},  // tie between odd and even: up to even
      {1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20), 0x3c01},  // just past the tie
      {65504.0f, 0x7bff},                          // largest finite
      {65519.0f, 0x7bff},                          // below the overflow tie
      {65520.0f, 0x7c00},                          // tie with max (odd mantissa): to inf
      {1e6f, 0x7c00}, {-1e6f, 0xfc00}, {FLT_MAX, 0x7c00},
      {INFINITY, 0x7c00}, {-INFINITY, 0xfc00},
      {sub, 0x0001}, {-sub, 0x8001},
      {sub / 2, 0x0000},                           // tie between 0 and 2^-24: even (0)
      {sub / 2 * 1.0001f, 0x0001},
      {3 * sub / 2, 0x0002},                       // tie between 1 and 2 ulps: even (2)
      {1023 * sub, 0x03ff},                        // largest subnormal
      {1023.5f * sub, 0x0400},                     // tie into the smallest normal (even)
      {std::ldexp(1.0f, -14), 0x0400},
      {1e-40f, 0x0000}, {-1e-40f, 0x8000},         // float subnormals
  };
  for (const Case& c : cases) {
    EXPECT_EQ(FloatToHalf(c.in), c.want) << c.in;
    EXPECT_EQ(FloatToHalf(c.in), RefDoubleToHalf(c.in)) << c.in;
  }
}

TEST(HalfTest, NanStaysNan) {
  EXPECT_TRUE(IsHalfNan(FloatToHalf(NAN)));
  EXPECT_TRUE(IsHalfNan(FloatToHalf(-NAN)));
  EXPECT_EQ(FloatToHalf(-NAN) & 0x8000, 0x8000);
  // A payload only in the low 13 bits must not become inf.
  EXPECT_EQ(FloatToHalf(std::bit_cast<float>(0x7f800001u)), 0x7e00);
  EXPECT_TRUE(std::isnan(HalfToFloat(0x7c01)));
}

TEST(HalfTest, FloatToHalfMatchesReferenceOnRandomFloats) {
  std::mt19937 rng(12345);
  // Mostly floats in and around the half range, plus arbitrary bit patterns.
  std::uniform_int_distribution<uint32_t> any;
  std::uniform_int_distribution<uint32_t> near_range(0x32000000u, 0x48000000u);
  for (int i = 0; i < 200000; ++i) {
    uint32_t u = (i % 4 == 0) ? any(rng) : near_range(rng) | (any(rng) & 0x80000000u);
    const float f = std::bit_cast<float>(u);
    if (std::isnan(f)) {
      EXPECT_TRUE(IsHalfNan(FloatToHalf(f)));
      continue;
    }
    ASSERT_EQ(FloatToHalf(f), RefDoubleToHalf(f)) << std::hex << u;
  }
}

TEST(Bf16Test, EveryBf16RoundTrips) {
  for (uint32_t p = 0; p <= 0xffff; ++p) {
    const auto b = static_cast<uint16_t>(p);
    const float f = Bf16ToFloat(b);
    EXPECT_EQ(Bits(f), p << 16);
    EXPECT_EQ(FloatToBf16(f), IsBf16Nan(b) ? (b | 0x0040) : b) << std::hex << p;
  }
}

TEST(Bf16Test, RoundingEdgeCases) {
  struct Case { float in; uint16_t want; };
  const Case cases[] = {
      {1.0f, 0x3f80}, {-0.0f, 0x8000},
      {1.0f + std::ldexp(1.0f, -8), 0x3f80},      // tie: even (down)
      {1.0f + 3 * std::ldexp(1.0f, -8), 0x3f82},  // tie: even (up)
      {1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -23), 0x3f81},
      {FLT_MAX, 0x7f80},                          // rounds past the largest bf16: inf
      {-FLT_MAX, 0xff80},
      {std::bit_cast<float>(0x7f7f7fffu), 0x7f7f},  // just below the overflow tie
      {INFINITY, 0x7f80},
      {std::bit_cast<float>(0x00008000u), 0x0000},  // subnormal tie: even (0)
      {std::bit_cast<float>(0x00018000u), 0x0002},  // subnormal tie: even (up)
  };
  for (const Case& c : cases) {
    EXPECT_EQ(FloatToBf16(c.in), c.want) << std::hex << Bits(c.in);
    EXPECT_EQ(FloatToBf16(c.in), RefDoubleToBf16(c.in)) << std::hex << Bits(c.in);
  }
}

TEST(Bf16Test, NanStaysNan) {
  // Payload only in the dropped bits: truncation alone would give inf.
  EXPECT_EQ(FloatToBf16(std::bit_cast<float>(0x7f800001u)), 0x7fc0);
  EXPECT_EQ(FloatToBf16(std::bit_cast<float>(0xff800001u)), 0xffc0);
  EXPECT_EQ(FloatToBf16(std::bit_cast<float>(0x7fc12345u)), 0x7fc1);  // payload top kept
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(NAN))));
}

TEST(Bf16Test, FloatToBf16MatchesReferenceOnRandomFloats) {
  std::mt19937 rng(777);
  std::uniform_int_distribution<uint32_t> any;
  for (int i = 0; i < 200000; ++i) {
    const uint32_t u = any(rng);
    const float f = std::bit_cast<float>(u);
    if (std::isnan(f)) {
      EXPECT_TRUE(IsBf16Nan(FloatToBf16(f)));
      continue;
    }
    ASSERT_EQ(FloatToBf16(f), RefDoubleToBf16(f)) << std::hex << u;
  }
}

}  // namespace
}  // namespace syncline
