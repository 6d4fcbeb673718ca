// Test helpers for compression/: random values, and a compressed chunk in
// 4-byte-aligned memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "compression/compressor.h"

namespace syncline::compression::testing {

// n values, normally distributed with standard deviation `spread`.
inline std::vector<float> RandomValues(size_t n, uint32_t seed, float spread = 1.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, spread);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

// A compressed chunk's bytes, in memory aligned as a pool buffer is.
struct Chunk {
  std::vector<uint32_t> words;
  size_t bytes = 0;
  std::byte* data() { return reinterpret_cast<std::byte*>(words.data()); }
};

inline Chunk Encode(const Spec& spec, const std::vector<float>& values, uint64_t seed = 7) {
  Chunk c;
  c.bytes = CompressedBytes(spec, values.size());
  c.words.assign((c.bytes + 3) / 4, 0);
  Status st = Compress(spec, values.data(), values.size(), seed, c.data());
  if (!st.ok()) c.bytes = 0;
  return c;
}

}  // namespace syncline::compression::testing
