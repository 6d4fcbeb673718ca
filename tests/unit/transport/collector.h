// Collector: an Endpoint::Receiver for tests that keeps what arrives and lets
// the test wait, with a deadline, for a number of messages.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "transport/transport.h"

namespace syncline::testing {

class Collector {
 public:
  Endpoint::Receiver receiver() {
    return [this](Message&& m) {
      std::lock_guard<std::mutex> lock(mu_);
      messages_.push_back(std::move(m));
      cv_.notify_all();
    };
  }

  // True once at least `n` messages arrived; false if not within `ms`.
  bool WaitFor(size_t n, int ms = 5000) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::milliseconds(ms), [&] { return messages_.size() >= n; });
  }

  size_t size() {
    std::lock_guard<std::mutex> lock(mu_);
    return messages_.size();
  }

  // A copy of message `i` (which must have arrived).
  Message at(size_t i) {
    std::lock_guard<std::mutex> lock(mu_);
    return messages_.at(i);
  }

  std::vector<Message> TakeAll() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::move(messages_);
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Message> messages_;
};

// Polls `condition` until it holds or `ms` pass.
inline bool Eventually(const std::function<bool()>& condition, int ms = 5000) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (!condition()) {
    if (std::chrono::steady_clock::now() >= end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

}  // namespace syncline::testing
