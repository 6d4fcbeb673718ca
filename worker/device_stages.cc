#include "worker/device_stages.h"

#include <string>

namespace syncline {

DeviceStages::DeviceStages(DeviceMemory* device, Next next, Fatal fatal)
    : device_(device),
      next_(std::move(next)),
      fatal_(std::move(fatal)),
      gate_(std::make_shared<Gate>()),
      to_host_([this](ChunkTask&& chunk) { ServeToHost(std::move(chunk)); },
               [](ChunkTask&& chunk, const Status& why) { chunk.op->Fail(why); }),
      to_device_([this](ToDevice&& chunk) { ServeToDevice(std::move(chunk)); },
                 [](ToDevice&& chunk, const Status& why) { chunk.op->Delivered(chunk.index, why); }) {
  MutexLock lock(gate_->mu);
  gate_->stages = this;
}

DeviceStages::~DeviceStages() {
  {
    MutexLock lock(gate_->mu);
    gate_->stages = nullptr;
  }
  Stop(Aborted("the worker's device stages were destroyed"));
}

void DeviceStages::Stop(const Status& status) {
  to_host_.Stop(status);
  to_device_.Stop(status);
}

void DeviceStages::CopyToHost(ChunkTask&& chunk) {
  if (timeline_) chunk.posted_us = Timeline::NowUs();
  to_host_.Post(std::move(chunk));
}

void DeviceStages::ServeToHost(ChunkTask&& chunk) {
  const DeviceRoute& route = *chunk.device;
  // A failed push_pull's chunk is not copied, but still goes on: the stages
  // after this one tell whoever waits for it (local peers, the credit).
  if (std::shared_ptr<void> hold = chunk.op->Hold()) {
    Status copied = device_->CopyToHost(route.host + chunk.offset, route.device + chunk.offset, chunk.length,
                                        route.after.get());
    if (!copied.ok()) {
      Status why = copied.WithContext("copying chunk " + std::to_string(chunk.index) + " of tensor '" +
                                      chunk.op->tensor_name() + "' from its device to the host");
      chunk.op->Fail(why);
      fatal_(why);
    }
    Trace("to host", *chunk.op, chunk.index, chunk.posted_us);
  }
  chunk.posted_us = timeline_ ? Timeline::NowUs() : 0;  // the next stage's queue starts now
  next_(std::move(chunk));
}

Operation::Deliver DeviceStages::DeliverTo(std::shared_ptr<const DeviceRoute> route, int64_t priority,
                                           uint64_t first_sequence) {
  return [gate = gate_, route = std::move(route), priority, first_sequence](std::shared_ptr<Operation> op, size_t i) {
    ToDevice chunk{op, i, route, priority, first_sequence + i, 0};
    std::optional<Status> refused;
    {
      MutexLock lock(gate->mu);
      if (gate->stages == nullptr) {
        refused = Aborted("the worker is gone: its device stages stopped");
      } else {
        if (gate->stages->timeline_) chunk.posted_us = Timeline::NowUs();
        refused = gate->stages->to_device_.TryPost(chunk);
      }
    }
    // Outside the gate: the chunk may end the push_pull, whose done callback is the caller's code.
    if (refused) op->Delivered(i, *refused);
  };
}

void DeviceStages::ServeToDevice(ToDevice&& chunk) {
  // A failed push_pull's sum is not written: its caller is told of the failure instead.
  const uint64_t offset = chunk.op->chunk_offset(chunk.index);
  Status copied = chunk.op->failure() ? Status::Ok()
                                      : device_->CopyToDevice(chunk.route->device + offset, chunk.route->host + offset,
                                                              chunk.op->chunk_length(chunk.index));
  Trace("to device", *chunk.op, chunk.index, chunk.posted_us);
  chunk.op->Delivered(chunk.index, copied.ok() ? copied : copied.WithContext("copying its sum to the device"));
}

void DeviceStages::Trace(const char* stage, const Operation& op, size_t index, int64_t posted_us) const {
  if (!timeline_ || posted_us == 0 || !timeline_->recording()) return;
  timeline_->Span(stage, "chunk", op.tensor_name() + " #" + std::to_string(index), posted_us, Timeline::NowUs());
}

Result<Buffer> StagingBuffers::Take(const void* device_ptr) {
  {
    MutexLock lock(mu_);
    for (Entry& e : entries_) {
      if (e.taken) continue;
      std::shared_ptr<Operation> user = e.user.lock();
      if (user && !user->Done()) continue;
      e.taken = true;
      e.user.reset();
      return e.buffer;
    }
  }
  SYNCLINE_ASSIGN_OR_RETURN(Buffer fresh, device_->AllocatePinned(device_ptr, bytes_));
  MutexLock lock(mu_);
  entries_.push_back(Entry{fresh, true, {}});
  return fresh;
}

StagingBuffers::Entry* StagingBuffers::EntryOfLocked(const Buffer& buffer) {
  for (Entry& e : entries_)
    if (e.buffer.data() == buffer.data()) return &e;
  return nullptr;
}

void StagingBuffers::Lend(const Buffer& buffer, std::weak_ptr<Operation> op) {
  MutexLock lock(mu_);
  if (Entry* e = EntryOfLocked(buffer)) {
    e->user = std::move(op);
    e->taken = false;
  }
}

void StagingBuffers::Give(const Buffer& buffer) {
  MutexLock lock(mu_);
  if (Entry* e = EntryOfLocked(buffer)) e->taken = false;
}

}  // namespace syncline
