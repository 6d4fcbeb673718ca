#include "examples/synthetic_values.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "summation/half.h"

namespace syncline::example {
namespace {

constexpr int kPeriod = 13;

// Small integers in [-4, 8]: their sums over up to 16 workers stay within
// the integers bf16 holds exactly (|x| <= 256).
double ExactValue(int rank, uint64_t round, int tensor, uint64_t i) {
  return static_cast<double>((rank * 7 + round * 3 + tensor * 5 + i) % kPeriod) - 4;
}

// A counter-based generator: the same (rank, round, tensor, i) always gives the same value.
double RandomValue(int rank, uint64_t round, int tensor, uint64_t i) {
  uint64_t x = (uint64_t(rank) << 48) ^ (round << 32) ^ (uint64_t(tensor) << 24) ^ i;
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  x ^= x >> 31;
  return static_cast<double>(x >> 11) / static_cast<double>(1ull << 53) * 2.0 - 1.0;
}

void RepeatHead(size_t element, uint64_t n, uint64_t head, uint8_t* out);

}  // namespace

double ElementAt(DType t, const uint8_t* data, uint64_t i) {
  switch (t) {
    case DType::kFloat32: { float v; std::memcpy(&v, data + 4 * i, 4); return v; }
    case DType::kFloat64: { double v; std::memcpy(&v, data + 8 * i, 8); return v; }
    case DType::kFloat16: { uint16_t h; std::memcpy(&h, data + 2 * i, 2); return HalfToFloat(h); }
    case DType::kBFloat16: { uint16_t h; std::memcpy(&h, data + 2 * i, 2); return Bf16ToFloat(h); }
  }
  return 0;
}

void StoreElement(DType t, uint8_t* data, uint64_t i, double v) {
  switch (t) {
    case DType::kFloat32: { float f = static_cast<float>(v); std::memcpy(data + 4 * i, &f, 4); return; }
    case DType::kFloat64: std::memcpy(data + 8 * i, &v, 8); return;
    case DType::kFloat16: { uint16_t h = FloatToHalf(static_cast<float>(v)); std::memcpy(data + 2 * i, &h, 2); return; }
    case DType::kBFloat16: { uint16_t h = FloatToBf16(static_cast<float>(v)); std::memcpy(data + 2 * i, &h, 2); return; }
  }
}

void FillGradient(ValueKind kind, DType t, uint64_t n, int rank, uint64_t round, int tensor, uint8_t* out) {
  if (kind == ValueKind::kRandom) {
    for (uint64_t i = 0; i < n; ++i) StoreElement(t, out, i, RandomValue(rank, round, tensor, i));
    return;
  }
  // Exact values repeat with period 13: encode one period, then copy it along.
  const size_t element = DTypeSize(t);
  const uint64_t head = std::min<uint64_t>(n, kPeriod);
  for (uint64_t i = 0; i < head; ++i) StoreElement(t, out, i, ExactValue(rank, round, tensor, i));
  RepeatHead(element, n, head, out);
}

namespace {
// Fills `out` with one period of `head` elements repeated along n.
void RepeatHead(size_t element, uint64_t n, uint64_t head, uint8_t* out) {
  for (uint64_t done = head; done < n;) {
    const uint64_t copy = std::min(done, n - done);
    std::memcpy(out + done * element, out, copy * element);
    done += copy;
  }
}

double Tolerance(DType t, int workers) {
  const double eps = t == DType::kFloat64 ? 1e-15 : t == DType::kFloat32 ? 1e-7 : t == DType::kFloat16 ? 1e-3 : 8e-3;
  return eps * 4 * workers;
}
}  // namespace

bool VerifySum(ValueKind kind, DType t, uint64_t n, int workers, uint64_t round, int tensor, const uint8_t* got,
               std::string* why) {
  if (kind == ValueKind::kExact) {
    const size_t element = DTypeSize(t);
    std::vector<uint8_t> expected(n * element);
    const uint64_t head = std::min<uint64_t>(n, kPeriod);
    for (uint64_t i = 0; i < head; ++i) {
      double sum = 0;
      for (int r = 0; r < workers; ++r) sum += ExactValue(r, round, tensor, i);
      StoreElement(t, expected.data(), i, sum);
    }
    RepeatHead(element, n, head, expected.data());
    if (std::memcmp(expected.data(), got, expected.size()) == 0) return true;
    for (uint64_t i = 0; i < n; ++i) {
      if (std::memcmp(expected.data() + i * element, got + i * element, element) != 0) {
        *why = "element " + std::to_string(i) + " is " + std::to_string(ElementAt(t, got, i)) + ", expected " +
               std::to_string(ElementAt(t, expected.data(), i));
        return false;
      }
    }
    return true;
  }
  const double tolerance = Tolerance(t, workers);
  for (uint64_t i = 0; i < n; ++i) {
    double sum = 0;
    for (int r = 0; r < workers; ++r) sum += RandomValue(r, round, tensor, i);
    const double value = ElementAt(t, got, i);
    if (!(std::abs(value - sum) <= tolerance)) {
      *why = "element " + std::to_string(i) + " is " + std::to_string(value) + ", expected " + std::to_string(sum);
      return false;
    }
  }
  return true;
}

bool VerifyAsyncTotal(ValueKind kind, DType t, uint64_t n, int workers, uint64_t rounds, int tensor,
                      const uint8_t* got, std::string* why) {
  const double additions = static_cast<double>(rounds) * workers;
  for (uint64_t i = 0; i < n; ++i) {
    double sum = 0, magnitude = 0;
    for (uint64_t round = 0; round < rounds; ++round)
      for (int r = 0; r < workers; ++r) {
        const double v = kind == ValueKind::kExact ? ExactValue(r, round, tensor, i) : RandomValue(r, round, tensor, i);
        sum += v;
        magnitude += std::abs(v);
      }
    const bool exact = kind == ValueKind::kExact && (t == DType::kFloat32 || t == DType::kFloat64);
    const double tolerance = exact ? 0 : Tolerance(t, 1) * magnitude * additions;
    const double value = ElementAt(t, got, i);
    if (!(std::abs(value - sum) <= tolerance)) {
      *why = "element " + std::to_string(i) + " is " + std::to_string(value) + ", expected " + std::to_string(sum);
      return false;
    }
  }
  return true;
}

}  // namespace syncline::example
