// Messages and payloads shared by the transport backends' tests: the same
// PUSH shape and deterministic byte patterns, so every backend is checked
// against identical traffic.
#pragma once

#include <algorithm>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "transport/wire.h"

namespace syncline::testing {

inline Buffer Pattern(size_t n, uint32_t seed) {
  auto bytes = std::shared_ptr<uint8_t[]>(new uint8_t[n + 1]);
  std::mt19937 gen(seed);
  for (size_t i = 0; i < n; i += 4) {
    uint32_t v = gen();
    std::memcpy(bytes.get() + i, &v, std::min<size_t>(4, n - i));
  }
  const uint8_t* p = bytes.get();
  return Buffer(p, n, std::shared_ptr<const void>(bytes, p));
}

inline bool SameBytes(const Buffer& a, const Buffer& b) {
  return a.size() == b.size() && (a.size() == 0 || std::memcmp(a.data(), b.data(), a.size()) == 0);
}

inline Message Push(uint64_t key, std::vector<Buffer> payloads) {
  Message m = MakeMessage(proto::PUSH, 1);
  m.header.set_key(key);
  m.header.set_round(3);
  m.header.set_dtype(proto::BFLOAT16);  // 2-byte elements: frames of odd size must total an even count
  m.header.set_request_id(77);
  m.payloads = std::move(payloads);
  m.header.set_byte_length(PayloadBytes(m));
  return m;
}

}  // namespace syncline::testing
