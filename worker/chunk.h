// Chunk: one piece of one push_pull, the unit that flows through a worker.
// A tensor is cut into chunks at declaration (their keys and servers come
// from the scheduler's placement); each push_pull makes one ChunkTask per
// chunk, which waits in a ChunkScheduler until it is admitted to the
// network, is pushed by the KvClient, and is done when its sum is back.
//
// A chunk's route is the stages it passes through, in this order; a stage
// that does not apply is not on it and costs nothing:
//   copy to host      its tensor is in device memory (`device` set;
//                     worker/device_stages.h)
//   local reduce      its host has other workers (worker/local_reduce.h)
//   admission         the ChunkScheduler, below
//   push and pull     the KvClient; with local reduce only at the chunk's
//                     pusher, which passes the sum on (local broadcast)
//   copy to device    as the first
// Each stage serves its queue most urgent chunk first.
//
// ChunkScheduler is the seam between partitioning and the transport: the
// worker posts every chunk of a push_pull at once; the scheduler decides
// which goes next and when (proxy/credit_scheduler.h orders them by priority
// under a byte credit). SendAtOnce, here, admits every chunk immediately, in
// the order posted.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "common/buffer.h"
#include "common/dtype.h"
#include "common/status.h"
#include "worker/gpu/device_memory.h"

namespace syncline {

class Operation;
using TensorId = uint32_t;

// The device stages of a chunk's route: its tensor lives in accelerator
// memory at `device` and is summed through `host`, a pinned staging buffer
// of the tensor's size (the operation's memory). Each chunk is copied to the
// host once the framework's work before `after` has run, and its sum back.
struct DeviceRoute {
  uint8_t* device = nullptr;
  uint8_t* host = nullptr;
  std::shared_ptr<const DeviceMemory::Mark> after;
};

struct ChunkTask {
  TensorId tensor = 0;
  size_t index = 0;          // chunk number within the tensor
  uint64_t key = 0;          // the key the servers sum it under
  int32_t server = -1;       // node id of the owning server
  uint64_t offset = 0;       // in bytes, within the tensor
  uint64_t length = 0;       // in bytes, within the tensor
  uint64_t round = 0;        // the tensor's push_pull count
  DType dtype = DType::kFloat32;
  bool average = false;
  // Larger is more urgent (BytePS's convention); the proxy sets it from the
  // order in which the forward pass uses tensors.
  int64_t priority = 0;
  // Order of posting, per worker: ties of priority go to the earlier chunk.
  uint64_t sequence = 0;
  std::shared_ptr<Operation> op;  // the push_pull this chunk belongs to
  int64_t posted_us = 0;          // when it became ready (Timeline clock; set while tracing)
  bool whole_round = false;       // PushPullOptions::whole_round
  // Bytes it takes on the wire, each way, where that differs from `length`
  // (a compressed tensor); 0: `length`. The credit counts these.
  uint64_t wire_length = 0;
  // Local reduce: this worker pushes the chunk for its host, and passes the
  // sum (as the server sent it) on to the host's other workers with this,
  // before writing it back.
  std::function<void(const Buffer& sum)> on_sum = nullptr;
  // And its failure (the server's error, a send that failed), which they
  // would otherwise wait for in vain.
  std::function<void(const Status& error)> on_fail = nullptr;

  // Set: the chunk starts on a device (the route's first stage).
  std::shared_ptr<const DeviceRoute> device = nullptr;

  uint64_t WireBytes() const { return wire_length != 0 ? wire_length : length; }
};

class ChunkScheduler {
 public:
  // Puts a chunk on the network; its credit comes back through Release.
  using Admit = std::function<void(ChunkTask&&)>;

  virtual ~ChunkScheduler() = default;
  // Called once by the worker before the first Post.
  virtual void Start(Admit admit) = 0;
  // The chunks of one push_pull, ready to go.
  virtual void Post(std::vector<ChunkTask> chunks) = 0;
  // `bytes` (WireBytes) of admitted chunks no longer count against the credit: the
  // server took their pushes, or they ended otherwise (error, failure). Each
  // admitted chunk's bytes come back exactly once, possibly summed with others'.
  virtual void Release(uint64_t bytes) = 0;
  // The job is over: queued chunks fail with `status`; later posts too.
  virtual void Stop(const Status& status) = 0;
  // The tuner's knob: bytes of pushes in flight from the next admission on
  // (0 = unlimited). Schedulers without a credit ignore it.
  virtual void SetCredit(uint64_t credit_bytes) { (void)credit_bytes; }

  // What waits and what is in flight now (metrics); zeros where not tracked.
  struct Load {
    size_t queued_chunks = 0;
    uint64_t bytes_in_flight = 0;
    uint64_t credit_bytes = 0;  // 0 = unlimited
  };
  virtual Load load() const { return {}; }
};

// Admits every chunk at once, in the order posted, on the posting thread.
class SendAtOnce final : public ChunkScheduler {
 public:
  void Start(Admit admit) override { admit_ = std::move(admit); }
  void Post(std::vector<ChunkTask> chunks) override;
  void Release(uint64_t) override {}
  void Stop(const Status&) override {}

 private:
  Admit admit_;
};

}  // namespace syncline
