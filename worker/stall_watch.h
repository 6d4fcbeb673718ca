// StallWatch: notices when a worker's push_pulls stop moving, and when they
// move again. Stalled: a push_pull has been in flight for the timeout and
// none ended meanwhile. Workers that did not make the same push_pull calls
// (one skipped a tensor the others push, then went on) end up all stalled,
// each waiting for a push another will never make; told by each worker, the
// scheduler ends such a job naming what differs (scheduler/stalls.cc)
// instead of leaving it to the request timeout.
//
// Tick() decides from a Sample, at a time it is given (tests drive it);
// Start() runs it on a thread of its own, every quarter of the timeout (at
// most a second apart).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <thread>

#include "common/deadline.h"
#include "common/mutex.h"

namespace syncline {

class StallWatch {
 public:
  struct Sample {
    std::optional<Clock::time_point> oldest_started;  // of the push_pulls in flight; none: nothing in flight
    std::string oldest_tensor;                        // that push_pull's tensor
    Clock::time_point last_ended;                     // a push_pull last ended (or the worker started)
    uint64_t push_pulls_started = 0;                  // of every tensor together, ever
  };
  struct Report {
    bool stalled = false;     // false: moving again
    std::string waiting_for;  // stalled: the tensor of the oldest push_pull in flight
    Millis waited{0};         // stalled: how long that one has been in flight
  };

  StallWatch(Millis timeout, std::function<Sample()> sample, std::function<void(const Report&)> report);
  ~StallWatch();
  StallWatch(const StallWatch&) = delete;
  StallWatch& operator=(const StallWatch&) = delete;

  // Looks every quarter timeout until destroyed; nothing when the timeout is 0.
  void Start();
  // One look at `now`: reports when the worker becomes stalled, when it
  // moves again, and while it stays stalled when it started more push_pulls
  // (the counts the scheduler compares changed) or once every timeout (the
  // scheduler looks again: other workers may have finished or stalled).
  void Tick(Clock::time_point now);

 private:
  const Millis timeout_;
  const std::function<Sample()> sample_;
  const std::function<void(const Report&)> report_;
  // The last report said stalled, at this time, with this many push_pulls
  // started then. Touched by Tick only (one thread at a time).
  struct Reported {
    Clock::time_point at;
    uint64_t push_pulls_started = 0;
  };
  std::optional<Reported> reported_;
  Mutex mu_;
  CondVar cv_;
  bool stopping_ GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace syncline
