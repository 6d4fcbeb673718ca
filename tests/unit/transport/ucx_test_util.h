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
#include "tests/unit/transport/messages.h"
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

}  // namespace syncline::testing
