// Mutex, MutexLock and CondVar behave as the std types they wrap: mutual
// exclusion, early unlock, timed waits that report the deadline, predicates.
// (That clang's analysis rejects misuse is checked by scripts/thread-safety
// against mutex_misuse.cc beside this file.)
#include "common/mutex.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace syncline {
namespace {

class Counter {
 public:
  void Add() {
    MutexLock lock(mu_);
    ++n_;
  }
  int Get() {
    MutexLock lock(mu_);
    return n_;
  }

 private:
  Mutex mu_;
  int n_ GUARDED_BY(mu_) = 0;
};

TEST(Mutex, MutexLockExcludesOtherThreads) {
  Counter c;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&c] {
      for (int i = 0; i < 10000; ++i) c.Add();
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(c.Get(), 40000);
}

// Whether another thread finds `mu` taken (its TryLock fails).
bool HeldElsewhere(Mutex& mu) {
  bool got = false;
  std::thread([&] {
    if (mu.TryLock()) {
      got = true;
      mu.Unlock();
    }
  }).join();
  return !got;
}

TEST(Mutex, TryLockFailsWhileHeldElsewhere) {
  Mutex mu;
  MutexLock lock(mu);
  EXPECT_TRUE(HeldElsewhere(mu));
  lock.Unlock();
  if (mu.TryLock()) {
    mu.Unlock();
  } else {
    ADD_FAILURE() << "still held after Unlock";
  }
}

TEST(Mutex, MutexLockUnlocksEarlyAndRelocks) {
  Mutex mu;
  MutexLock lock(mu);
  lock.Unlock();
  std::thread([&] { MutexLock other(mu); }).join();  // would deadlock if still held
  lock.Lock();
  EXPECT_TRUE(HeldElsewhere(mu));
}

TEST(CondVar, WaitUntilReturnsFalseAtTheDeadline) {
  Mutex mu;
  CondVar cv;
  MutexLock lock(mu);
  const auto start = Clock::now();
  EXPECT_FALSE(cv.WaitUntil(mu, Deadline::AfterMs(30), [] { return false; }));
  EXPECT_GE(Clock::now() - start, Millis(30));
}

TEST(CondVar, PredicateWaitSeesTheChangeOfAnotherThread) {
  Mutex mu;
  CondVar cv;
  bool ready = false;  // guarded by mu (a local cannot carry the annotation)
  std::thread setter([&] {
    std::this_thread::sleep_for(Millis(10));
    MutexLock lock(mu);
    ready = true;
    cv.NotifyAll();
  });
  {
    MutexLock lock(mu);
    EXPECT_TRUE(cv.WaitUntil(mu, Deadline::AfterMs(10000), [&] { return ready; }));
  }
  setter.join();
}

class Flag {
 public:
  void Set() {
    MutexLock lock(mu_);
    set_ = true;
    cv_.NotifyOne();
  }
  void WaitForever() {
    MutexLock lock(mu_);
    cv_.Wait(mu_, [this]() REQUIRES(mu_) { return set_; });
  }
  bool WaitFor(long long ms) {
    MutexLock lock(mu_);
    while (!set_) {
      if (!cv_.WaitUntil(mu_, Deadline::AfterMs(ms))) return set_;
    }
    return true;
  }

 private:
  Mutex mu_;
  CondVar cv_;
  bool set_ GUARDED_BY(mu_) = false;
};

TEST(CondVar, AnnotatedPredicateAndPlainWaitsWake) {
  Flag a;
  std::thread first([&] { a.Set(); });
  a.WaitForever();
  first.join();
  Flag b;
  EXPECT_FALSE(b.WaitFor(5));
  std::thread setter([&] { b.Set(); });
  EXPECT_TRUE(b.WaitFor(10000));
  setter.join();
}

}  // namespace
}  // namespace syncline
