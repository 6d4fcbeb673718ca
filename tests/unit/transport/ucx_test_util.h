// Helpers shared by the UCX transport tests: UCX_TLS for a scope, endpoints,
// patterned payloads and PUSH messages.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "transport/ucx/ucx_endpoint.h"
#include "transport/wire.h"

namespace syncline::testing {

inline Deadline Soon() { return Deadline::AfterMs(10000); }

// Sets UCX_TLS for the endpoints a test creates (UCX reads it per context).
class ScopedTls {
 public:
  explicit ScopedTls(const std::string& tls) {
    if (const char* old = std::getenv("UCX_TLS")) old_ = old;
    if (tls == "default") {
      unsetenv("UCX_TLS");
    } else {
      setenv("UCX_TLS", tls.c_str(), 1);
    }
  }
  ~ScopedTls() {
    if (old_) {
      setenv("UCX_TLS", old_->c_str(), 1);
    } else {
      unsetenv("UCX_TLS");
    }
  }

 private:
  std::optional<std::string> old_;
};

inline std::unique_ptr<Endpoint> NewEndpoint(const UcxOptions& options = {}) {
  auto e = CreateUcxEndpoint(options);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return e.ok() ? std::move(e).value() : nullptr;
}

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
