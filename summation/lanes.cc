#include "summation/lanes.h"

#include <condition_variable>
#include <deque>
#include <exception>
#include <string>
#include <thread>
#include <utility>

#include "common/logging.h"

namespace syncline {

struct SerialLanes::Lane {
  std::mutex mu;
  std::condition_variable has_work;   // lane thread: a task or stop arrived
  std::condition_variable has_room;   // bounded submitters: a task was taken
  std::condition_variable progressed; // drainers: `finished` grew
  std::deque<std::function<void()>> queue;  // guarded by mu
  uint64_t submitted = 0;                   // guarded by mu
  uint64_t finished = 0;                    // guarded by mu
  bool stopping = false;                    // guarded by mu
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
    std::unique_lock<std::mutex> lock(lane.mu);
    if (max_pending_ > 0) {
      const bool room = lane.has_room.wait_until(lock, deadline.at(), [&] {
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
  lane.has_work.notify_one();
  return Status::Ok();
}

void SerialLanes::RunLane(size_t index) {
  Lane& lane = *lanes_[index];
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(lane.mu);
      lane.has_work.wait(lock, [&] { return lane.stopping || !lane.queue.empty(); });
      if (lane.queue.empty()) return;  // stopping and nothing left
      task = std::move(lane.queue.front());
      lane.queue.pop_front();
    }
    lane.has_room.notify_one();
    try {
      task();
    } catch (const std::exception& e) {
      RecordError(index, e.what());
    } catch (...) {
      RecordError(index, "unknown exception");
    }
    task = nullptr;  // release captures before reporting the task finished
    {
      std::lock_guard<std::mutex> lock(lane.mu);
      ++lane.finished;
    }
    lane.progressed.notify_all();
  }
}

void SerialLanes::RecordError(size_t lane_index, const char* what) {
  SYNCLINE_LOG_ERROR("summation lane {}: task threw: {}", lane_index, what);
  std::lock_guard<std::mutex> lock(error_mu_);
  if (first_error_.ok()) {
    first_error_ = Internal("summation task on lane " + std::to_string(lane_index) + " threw: " + what);
  }
}

Status SerialLanes::Drain(Deadline deadline) {
  // Snapshot first so tasks submitted while we wait do not extend the wait.
  std::vector<uint64_t> targets(lanes_.size());
  for (size_t i = 0; i < lanes_.size(); ++i) {
    std::lock_guard<std::mutex> lock(lanes_[i]->mu);
    targets[i] = lanes_[i]->submitted;
  }
  for (size_t i = 0; i < lanes_.size(); ++i) {
    Lane& lane = *lanes_[i];
    std::unique_lock<std::mutex> lock(lane.mu);
    if (!lane.progressed.wait_until(lock, deadline.at(), [&] { return lane.finished >= targets[i]; })) {
      return DeadlineExceeded("SerialLanes::Drain: lane " + std::to_string(i) + " has " +
                              std::to_string(targets[i] - lane.finished) + " tasks unfinished");
    }
  }
  std::lock_guard<std::mutex> lock(error_mu_);
  return first_error_;
}

void SerialLanes::Shutdown() {
  std::lock_guard<std::mutex> guard(shutdown_mu_);
  if (joined_) return;
  for (auto& lane : lanes_) {
    {
      std::lock_guard<std::mutex> lock(lane->mu);
      lane->stopping = true;
    }
    lane->has_work.notify_all();
    lane->has_room.notify_all();  // bounded submitters give up with FailedPrecondition
  }
  for (auto& lane : lanes_) lane->thread.join();
  joined_ = true;
}

}  // namespace syncline
