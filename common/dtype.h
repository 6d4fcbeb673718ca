// DType: the element types Syncline sums, with their sizes and names, and the
// mapping to and from the wire enum.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"
#include "syncline.pb.h"

namespace syncline {

enum class DType : uint8_t { kFloat32 = 1, kFloat64 = 2, kFloat16 = 3, kBFloat16 = 4 };

size_t DTypeSize(DType t);
const char* DTypeName(DType t);  // "fp32", "fp64", "fp16", "bf16"
// Accepts "fp32"/"float32"/"float", "fp64"/"float64"/"double", "fp16"/"float16"/"half", "bf16"/"bfloat16".
Result<DType> ParseDType(std::string_view name);
// The wire enum value (proto::DType) of `t`, and back. Unknown wire values are an error.
proto::DType DTypeToWire(DType t);
Result<DType> DTypeFromWire(int wire);

}  // namespace syncline
