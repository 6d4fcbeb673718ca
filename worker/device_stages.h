// DeviceStages: the two stages of a chunk's route (worker/chunk.h) that move
// it between accelerator and host memory: "copy to host", the first stage of
// a chunk of a device tensor, and "copy to device", the last, once its sum
// is written into the tensor's pinned staging buffer. Each is a StageQueue
// with a thread of its own serving the most urgent chunk first, and copies
// one chunk at a time, so a tensor's first chunks are on the wire while its
// last are still being copied, and its first sums are back on the device
// while its last are still in flight.
//
// A copy to the host that fails ends the job through `fatal`, naming the
// tensor: the servers would otherwise wait for this worker's push in vain.
// A copy to the device that fails fails that push_pull only: the sum exists,
// only this worker lacks it.
//
// StagingBuffers are the pinned host buffers of one tensor, allocated at its
// first push_pull from a device and reused by every later one.
//
// Thread-safety: all methods may be called from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "common/mutex.h"
#include "common/timeline.h"
#include "worker/chunk.h"
#include "worker/gpu/device_memory.h"
#include "worker/operation.h"
#include "worker/stage_queue.h"

namespace syncline {

class DeviceStages {
 public:
  // Where a chunk goes once it is on the host (local reduce or admission).
  using Next = std::function<void(ChunkTask&&)>;
  // Ends the job with `why`.
  using Fatal = std::function<void(const Status& why)>;

  // `device` must outlive this object.
  DeviceStages(DeviceMemory* device, Next next, Fatal fatal);
  // Stops both stages (what is queued fails) and joins their threads.
  ~DeviceStages();

  // Takes a chunk whose route starts on the device (`chunk.device` set).
  void CopyToHost(ChunkTask&& chunk);
  // What an Operation of a device push_pull delivers its written chunks to:
  // chunk i is copied back to `route`'s device memory, served by `priority`
  // and `first_sequence` + i. It may be called after this object is gone:
  // the chunk then fails.
  Operation::Deliver DeliverTo(std::shared_ptr<const DeviceRoute> route, int64_t priority, uint64_t first_sequence);
  // The job is over: queued chunks fail with `status`, and later ones.
  void Stop(const Status& status);
  // Records each chunk's copies as spans ("to host", "to device"); before
  // the first chunk, or never.
  void SetTimeline(Timeline* timeline) { timeline_ = timeline; }

 private:
  // A chunk whose sum is on the host, for the copy back.
  struct ToDevice {
    std::shared_ptr<Operation> op;
    size_t index = 0;
    std::shared_ptr<const DeviceRoute> route;
    int64_t priority = 0;
    uint64_t sequence = 0;
    int64_t posted_us = 0;  // while tracing
  };
  void ServeToHost(ChunkTask&& chunk);
  void ServeToDevice(ToDevice&& chunk);
  void Trace(const char* stage, const Operation& op, size_t index, int64_t posted_us) const;

  DeviceMemory* const device_;
  const Next next_;
  const Fatal fatal_;
  Timeline* timeline_ = nullptr;
  // What DeliverTo's callables reach this object through: null once it is gone.
  struct Gate {
    Mutex mu;
    DeviceStages* stages GUARDED_BY(mu) = nullptr;
  };
  const std::shared_ptr<Gate> gate_;
  // Last: their threads stop before the rest goes.
  StageQueue<ChunkTask> to_host_;
  StageQueue<ToDevice> to_device_;
};

// The pinned host buffers a device tensor is staged through: one in steady
// state, one more for each further push_pull of the tensor in flight at once.
// A buffer is free again once the push_pull it was lent to is Done (every
// chunk back on the device, or failed with nothing touching the buffer),
// which is before that push_pull's Wait returns.
// Thread-safe; `device` must outlive it.
class StagingBuffers {
 public:
  StagingBuffers(DeviceMemory* device, size_t bytes) : device_(device), bytes_(bytes) {}
  // A buffer no push_pull uses (a new one, for the tensor at `device_ptr`,
  // if none is), taken until Lend or Give.
  Result<Buffer> Take(const void* device_ptr);
  // The push_pull `op` works in `buffer` (from Take) until it is Done.
  void Lend(const Buffer& buffer, std::weak_ptr<Operation> op);
  // `buffer` (from Take) is free again, unused.
  void Give(const Buffer& buffer);

 private:
  struct Entry {
    Buffer buffer;
    bool taken = false;              // between Take and Lend or Give
    std::weak_ptr<Operation> user;   // lent to it; free once it is Done or gone
  };
  Entry* EntryOfLocked(const Buffer& buffer) REQUIRES(mu_);

  DeviceMemory* const device_;
  const size_t bytes_;
  Mutex mu_;
  std::vector<Entry> entries_ GUARDED_BY(mu_);
};

}  // namespace syncline
