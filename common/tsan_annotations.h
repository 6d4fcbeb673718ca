// Tells ThreadSanitizer about an ordering it cannot see: one that a library
// it does not instrument provides (oneTBB's task queues), or one that runs
// through another mapping of shared memory (a peer's release of a slot).
// Outside a TSan build both calls are empty.
//
//   TsanRelease(token);  // this thread's writes so far ...
//   TsanAcquire(token);  // ... happen before what this thread does next
//
// `token` is any address standing for the hand-over; calls on different
// tokens stay unordered to TSan.
#pragma once

#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#endif

namespace syncline {

inline void TsanRelease(void* token) {
#if defined(__SANITIZE_THREAD__)
  __tsan_release(token);
#else
  (void)token;
#endif
}

inline void TsanAcquire(void* token) {
#if defined(__SANITIZE_THREAD__)
  __tsan_acquire(token);
#else
  (void)token;
#endif
}

}  // namespace syncline
