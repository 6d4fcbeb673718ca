#include "common/dtype.h"

#include "syncline.pb.h"

namespace syncline {

size_t DTypeSize(DType t) {
  switch (t) {
    case DType::kFloat32: return 4;
    case DType::kFloat64: return 8;
    case DType::kFloat16: return 2;
    case DType::kBFloat16: return 2;
  }
  return 0;
}

const char* DTypeName(DType t) {
  switch (t) {
    case DType::kFloat32: return "fp32";
    case DType::kFloat64: return "fp64";
    case DType::kFloat16: return "fp16";
    case DType::kBFloat16: return "bf16";
  }
  return "unknown";
}

Result<DType> ParseDType(std::string_view n) {
  if (n == "fp32" || n == "float32" || n == "float") return DType::kFloat32;
  if (n == "fp64" || n == "float64" || n == "double") return DType::kFloat64;
  if (n == "fp16" || n == "float16" || n == "half") return DType::kFloat16;
  if (n == "bf16" || n == "bfloat16") return DType::kBFloat16;
  return InvalidArgument("unknown dtype '" + std::string(n) + "' (expected fp32, fp64, fp16 or bf16)");
}

proto::DType DTypeToWire(DType t) {
  switch (t) {
    case DType::kFloat32: return proto::FLOAT32;
    case DType::kFloat64: return proto::FLOAT64;
    case DType::kFloat16: return proto::FLOAT16;
    case DType::kBFloat16: return proto::BFLOAT16;
  }
  return proto::DTYPE_UNKNOWN;
}

Result<DType> DTypeFromWire(int wire) {
  switch (wire) {
    case proto::FLOAT32: return DType::kFloat32;
    case proto::FLOAT64: return DType::kFloat64;
    case proto::FLOAT16: return DType::kFloat16;
    case proto::BFLOAT16: return DType::kBFloat16;
    default: return InvalidArgument("unknown wire dtype " + std::to_string(wire));
  }
}

}  // namespace syncline
