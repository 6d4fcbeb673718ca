// Mutex, MutexLock and CondVar: std::mutex and std::condition_variable with
// clang's thread-safety annotations, so that the compiler checks which lock
// guards which state (scripts/thread-safety builds the tree with clang and
// -Werror=thread-safety). Other compilers see plain wrappers: the macros
// below expand to nothing there.
//
//   class Queue {
//     Mutex mu_;
//     CondVar ready_;
//     std::deque<Job> jobs_ GUARDED_BY(mu_);
//     void PopLocked() REQUIRES(mu_);
//   };
//   MutexLock lock(mu_);
//   ready_.WaitUntil(mu_, deadline, [&]() REQUIRES(mu_) { return !jobs_.empty(); });
//
// A wait predicate is a lambda annotated REQUIRES(the mutex): the analysis
// then checks its body as running with the lock held (which it does), and an
// unannotated predicate that reads guarded state is flagged. Reference:
// https://clang.llvm.org/docs/ThreadSafetyAnalysis.html
#pragma once

#include <condition_variable>
#include <mutex>

#include "common/deadline.h"

#if defined(__clang__)
#define SYNCLINE_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define SYNCLINE_THREAD_ANNOTATION(x)
#endif

// On a class: its objects are capabilities (locks) named `x` in messages.
#define CAPABILITY(x) SYNCLINE_THREAD_ANNOTATION(capability(x))
// On a class: RAII objects that hold a capability for their lifetime.
#define SCOPED_CAPABILITY SYNCLINE_THREAD_ANNOTATION(scoped_lockable)
// On a member: read and written only with `x` held.
#define GUARDED_BY(x) SYNCLINE_THREAD_ANNOTATION(guarded_by(x))
// On a pointer member: what it points to is accessed only with `x` held.
#define PT_GUARDED_BY(x) SYNCLINE_THREAD_ANNOTATION(pt_guarded_by(x))
// On a mutex member: the order in which locks must be taken.
#define ACQUIRED_BEFORE(...) SYNCLINE_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))
#define ACQUIRED_AFTER(...) SYNCLINE_THREAD_ANNOTATION(acquired_after(__VA_ARGS__))
// On a function: the caller must hold these (exclusively / at least shared).
#define REQUIRES(...) SYNCLINE_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define REQUIRES_SHARED(...) SYNCLINE_THREAD_ANNOTATION(requires_shared_capability(__VA_ARGS__))
// On a function: it takes / gives back these (no argument: `this`).
#define ACQUIRE(...) SYNCLINE_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define ACQUIRE_SHARED(...) SYNCLINE_THREAD_ANNOTATION(acquire_shared_capability(__VA_ARGS__))
#define RELEASE(...) SYNCLINE_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define RELEASE_SHARED(...) SYNCLINE_THREAD_ANNOTATION(release_shared_capability(__VA_ARGS__))
// On a function: it takes the capability only if it returns the first argument.
#define TRY_ACQUIRE(...) SYNCLINE_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
// On a function: the caller must not hold these (it takes them itself).
#define EXCLUDES(...) SYNCLINE_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
// On a function: tells the analysis that the capability is held from here on.
#define ASSERT_CAPABILITY(x) SYNCLINE_THREAD_ANNOTATION(assert_capability(x))
// On a function: it returns a reference to this capability.
#define RETURN_CAPABILITY(x) SYNCLINE_THREAD_ANNOTATION(lock_returned(x))
// On a function: not checked. Say why beside each use.
#define NO_THREAD_SAFETY_ANALYSIS SYNCLINE_THREAD_ANNOTATION(no_thread_safety_analysis)

namespace syncline {

class CondVar;

// A std::mutex the analysis knows as a capability. Not recursive.
class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ACQUIRE() { mu_.lock(); }
  void Unlock() RELEASE() { mu_.unlock(); }
  bool TryLock() TRY_ACQUIRE(true) { return mu_.try_lock(); }
  // For code the analysis cannot follow (a lock taken in a callback's
  // caller): states that the calling thread holds this mutex. Not checked at
  // run time (std::mutex does not know its owner).
  void AssertHeld() const ASSERT_CAPABILITY(this) {}

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds a Mutex for its scope; Unlock/Lock release and retake it early.
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) ACQUIRE(mu) : mu_(mu) { mu_.Lock(); }
  ~MutexLock() RELEASE() {
    if (held_) mu_.Unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void Unlock() RELEASE() {
    mu_.Unlock();
    held_ = false;
  }
  void Lock() ACQUIRE() {
    mu_.Lock();
    held_ = true;
  }

 private:
  Mutex& mu_;
  bool held_ = true;
};

// A condition variable waited on with a Mutex held; every wait atomically
// releases it and holds it again on return, as std::condition_variable does.
// Wakeups may be spurious: wait in a loop, or with a predicate.
class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  void NotifyOne() { cv_.notify_one(); }
  void NotifyAll() { cv_.notify_all(); }

  // Waits for a notification, with no time limit: only for waits that a
  // shutdown is sure to end.
  void Wait(Mutex& mu) REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu.mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();  // still held: ownership goes back to the caller's scope
  }
  // Waits for a notification or the deadline; false once the deadline passed.
  bool WaitUntil(Mutex& mu, Deadline deadline) REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu.mu_, std::adopt_lock);
    const bool notified = cv_.wait_until(lock, deadline.at()) == std::cv_status::no_timeout;
    lock.release();
    return notified;
  }

  // Waits until `ready()` (a lambda annotated REQUIRES(mu)) holds.
  // The analysis cannot see that `ready` runs with `mu` held; its own
  // annotation makes the lambda's body checked instead.
  template <typename Ready>
  void Wait(Mutex& mu, Ready ready) REQUIRES(mu) NO_THREAD_SAFETY_ANALYSIS {
    while (!ready()) Wait(mu);
  }
  // Waits until `ready()` holds or the deadline passes; returns `ready()`.
  template <typename Ready>
  bool WaitUntil(Mutex& mu, Deadline deadline, Ready ready) REQUIRES(mu) NO_THREAD_SAFETY_ANALYSIS {
    while (!ready()) {
      if (!WaitUntil(mu, deadline)) return ready();
    }
    return true;
  }

 private:
  std::condition_variable cv_;
};

}  // namespace syncline
