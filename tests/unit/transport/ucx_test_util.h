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

#include "tests/unit/transport/ucx_scoped_tls.h"
#include "transport/ucx/ucx_endpoint.h"
#include "tests/unit/transport/messages.h"
#include "transport/wire.h"

namespace syncline::testing {

inline Deadline Soon() { return Deadline::AfterMs(10000); }

inline std::unique_ptr<Endpoint> NewEndpoint(const UcxOptions& options = {}) {
  auto e = CreateUcxEndpoint(options);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return e.ok() ? std::move(e).value() : nullptr;
}

}  // namespace syncline::testing
