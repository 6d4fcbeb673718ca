// ScopedTls: sets UCX_TLS for the UCX endpoints a test creates while it
// lives (UCX reads it when each endpoint's context is made), then restores it.
#pragma once

#include <cstdlib>
#include <optional>
#include <string>

namespace syncline::testing {

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

}  // namespace syncline::testing
