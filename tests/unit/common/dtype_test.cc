// DType: sizes, names, parsing, and the mapping to and from the wire enum.
#include "common/dtype.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace syncline {
namespace {

using ::testing::HasSubstr;

const DType kAll[] = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16};

TEST(DTypeTest, Sizes) {
  EXPECT_EQ(DTypeSize(DType::kFloat32), 4u);
  EXPECT_EQ(DTypeSize(DType::kFloat64), 8u);
  EXPECT_EQ(DTypeSize(DType::kFloat16), 2u);
  EXPECT_EQ(DTypeSize(DType::kBFloat16), 2u);
  EXPECT_EQ(DTypeSize(static_cast<DType>(0)), 0u);
}

TEST(DTypeTest, Names) {
  EXPECT_STREQ(DTypeName(DType::kFloat32), "fp32");
  EXPECT_STREQ(DTypeName(DType::kFloat64), "fp64");
  EXPECT_STREQ(DTypeName(DType::kFloat16), "fp16");
  EXPECT_STREQ(DTypeName(DType::kBFloat16), "bf16");
  EXPECT_STREQ(DTypeName(static_cast<DType>(77)), "unknown");
}

TEST(DTypeTest, ParseAcceptsEverySpelling) {
  const std::pair<const char*, DType> cases[] = {
      {"fp32", DType::kFloat32},  {"float32", DType::kFloat32}, {"float", DType::kFloat32},
      {"fp64", DType::kFloat64},  {"float64", DType::kFloat64}, {"double", DType::kFloat64},
      {"fp16", DType::kFloat16},  {"float16", DType::kFloat16}, {"half", DType::kFloat16},
      {"bf16", DType::kBFloat16}, {"bfloat16", DType::kBFloat16},
  };
  for (const auto& [name, want] : cases) {
    auto got = ParseDType(name);
    ASSERT_TRUE(got.ok()) << name << ": " << got.status().ToString();
    EXPECT_EQ(*got, want) << name;
  }
}

TEST(DTypeTest, NamesParseBackToTheSameType) {
  for (DType t : kAll) {
    auto got = ParseDType(DTypeName(t));
    ASSERT_TRUE(got.ok());
    EXPECT_EQ(*got, t);
  }
}

TEST(DTypeTest, ParseRejectsUnknownNamesNamingThem) {
  for (const char* bad : {"int8", "", "FP32", "fp 32", "float128"}) {
    auto got = ParseDType(bad);
    ASSERT_FALSE(got.ok()) << bad;
    EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(got.status().message(), HasSubstr("'" + std::string(bad) + "'"));
  }
}

TEST(DTypeTest, WireRoundTrip) {
  EXPECT_EQ(DTypeToWire(DType::kFloat32), proto::FLOAT32);
  EXPECT_EQ(DTypeToWire(DType::kFloat64), proto::FLOAT64);
  EXPECT_EQ(DTypeToWire(DType::kFloat16), proto::FLOAT16);
  EXPECT_EQ(DTypeToWire(DType::kBFloat16), proto::BFLOAT16);
  for (DType t : kAll) {
    auto back = DTypeFromWire(DTypeToWire(t));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, t);
  }
  EXPECT_EQ(DTypeToWire(static_cast<DType>(0)), proto::DTYPE_UNKNOWN);
}

TEST(DTypeTest, UnknownWireValuesAreErrors) {
  for (int wire : {0, 5, 99, -1, 1 << 30}) {
    auto got = DTypeFromWire(wire);
    ASSERT_FALSE(got.ok()) << wire;
    EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(got.status().message(), HasSubstr(std::to_string(wire)));
  }
}

}  // namespace
}  // namespace syncline
