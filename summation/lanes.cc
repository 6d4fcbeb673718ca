#include "summation/lanes.h"

#include <deque>
#include <exception>
#include <string>
#include <thread>
#include <utility>

#include "common/logging.h"

namespace syncline {

struct SerialLanes::Lane {
  Mutex mu;
  CondVar has_work;    // lane thread: a task or stop arrived
  CondVar has_room;    // bounded submitters: a task was taken
  CondVar progressed;  // drainers: `finished` grew
  std::deque<std::function<void()>> queue GUARDED_BY(mu);
  uint64_t submitted GUARDED_BY(mu) = 0;
  uint64_t finished GUARDED_BY(mu) = 0;
  bool stopping GUARDED_BY(mu) = false;
  std::thread thread;
};

SerialLanes::SerialLanes(int num_lanes, size_t max_pending_per_lane)
    : max_pending_(max_pending_per_lane) {
  size_t n = num_lanes > 0 ? static_cast<size_t>(num_lanes) : std::thread::hardware_concurrency();
  if (n == 0) n = 1;
  lanes_.reserve(n);
  for (size_t i = 0; i < n; ++i) lanes_.push_back(std::make_unique<Lane>());
  // Threads start only once lanes_ is complete; it never changes afterwards.
  for (size_t i = 0; i < n; ++i) lanes_[i]->thread = std::thread([this, i] { RunLane(i); });
}

SerialLanes::~SerialLanes() { Shutdown(); }

size_t SerialLanes::LaneOf(uint64_t lane_key) const {
  // splitmix64's finalizer: every input bit affects the low bits we keep.
  uint64_t z = lane_key + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return static_cast<size_t>(z % lanes_.size());
}

Status SerialLanes::Submit(uint64_t lane_key, std::function<void()> task, Deadline deadline) {
  if (!task) return InvalidArgument("SerialLanes::Submit: empty task");
  Lane& lane = *lanes_[LaneOf(lane_key)];
  {
    MutexLock lock(lane.mu);
    if (max_pending_ > 0) {
      const bool room = lane.has_room.WaitUntil(lane.mu, deadline, [&]() REQUIRES(lane.mu) {
        return lane.stopping || lane.queue.size() < max_pending_;
      });
      if (!room) {
        return DeadlineExceeded("SerialLanes::Submit: lane " + std::to_string(LaneOf(lane_key)) +
                                " stayed full (" + std::to_string(max_pending_) + " tasks pending)");
      }
    }
    if (lane.stopping) return FailedPrecondition("SerialLanes::Submit after Shutdown");
    lane.queue.push_back(std::move(task));
    ++lane.submitted;
  }
  lane.has_work.NotifyOne();
  return Status::Ok();
}

void SerialLanes::RunLane(size_t index) {
  Lane& lane = *lanes_[index];
  for (;;) {
    std::function<void()> task;
    {
      MutexLock lock(lane.mu);
      lane.has_work.Wait(lane.mu, [&]() REQUIRES(lane.mu) { return lane.stopping || !lane.queue.empty(); });
      if (lane.queue.empty()) return;  // stopping and nothing left
      task = std::move(lane.queue.front());
      lane.queue.pop_front();
    }
    lane.has_room.NotifyOne();
    try {
      task();
    } catch (const std::exception& e) {
      RecordError(index, e.what());
    } catch (...) {
      RecordError(index, "unknown exception");
    }
    task = nullptr;  // release captures before reporting the task finished
    {
      MutexLock lock(lane.mu);
      ++lane.finished;
    }
    lane.progressed.NotifyAll();
  }
}

void SerialLanes::RecordError(size_t lane_index, const char* what) {
  SYNCLINE_LOG_ERROR("summation lane {}: task threw: {}", lane_index, what);
  MutexLock lock(error_mu_);
  if (first_error_.ok()) {
    first_error_ = Internal("summation task on lane " + std::to_string(lane_index) + " threw: " + what);
  }
}

Status SerialLanes::Drain(Deadline deadline) {
  // Snapshot first so tasks submitted while we wait do not extend the wait.
  std::vector<uint64_t> targets(lanes_.size());
  for (size_t i = 0; i < lanes_.size(); ++i) {
    MutexLock lock(lanes_[i]->mu);
    targets[i] = lanes_[i]->submitted;
  }
  for (size_t i = 0; i < lanes_.size(); ++i) {
    Lane& lane = *lanes_[i];
    MutexLock lock(lane.mu);
    if (!lane.progressed.WaitUntil(lane.mu, deadline, [&]() REQUIRES(lane.mu) { return lane.finished >= targets[i]; })) {
      return DeadlineExceeded("SerialLanes::Drain: lane " + std::to_string(i) + " has " +
                              std::to_string(targets[i] - lane.finished) + " tasks unfinished");
    }
  }
  MutexLock lock(error_mu_);
  return first_error_;
}

void SerialLanes::Shutdown() {
  MutexLock guard(shutdown_mu_);
  if (joined_) return;
  for (auto& lane : lanes_) {
    {
      MutexLock lock(lane->mu);
      lane->stopping = true;
    }
    lane->has_work.NotifyAll();
    lane->has_room.NotifyAll();  // bounded submitters give up with FailedPrecondition
  }
  for (auto& lane : lanes_) lane->thread.join();
  joined_ = true;
}

}  // namespace syncline
