// Deliberately wrong locking, not built by CMake: scripts/thread-safety
// compiles it with clang and expects each line marked "expect:" to be
// flagged, which proves the annotations in common/mutex.h are live (a
// macro that silently expanded to nothing would pass every other file).
#include "common/mutex.h"

namespace syncline {

class Misuse {
 public:
  int ReadUnlocked() { return n_; }  // expect: reading variable 'n_' requires holding mutex 'mu_'
  void CallUnlocked() { BumpLocked(); }  // expect: calling function 'BumpLocked' requires holding mutex 'mu_'
  void WaitUnlocked() { cv_.WaitUntil(mu_, Deadline::AfterMs(1)); }  // expect: calling function 'WaitUntil' requires holding mutex 'mu_'
  void PredicateUnannotated() {
    MutexLock lock(mu_);
    cv_.Wait(mu_, [this] { return n_ > 0; });  // expect: reading variable 'n_' requires holding mutex 'mu_'
  }
  void LockedTwice() {
    MutexLock lock(mu_);
    mu_.Lock();  // expect: acquiring mutex 'mu_' that is already held
  }
  void Fine() {
    MutexLock lock(mu_);
    BumpLocked();
    cv_.Wait(mu_, [this]() REQUIRES(mu_) { return n_ > 0; });
  }

 private:
  void BumpLocked() REQUIRES(mu_) { ++n_; }
  Mutex mu_;
  CondVar cv_;
  int n_ GUARDED_BY(mu_) = 0;
};

}  // namespace syncline
