// InMemoryDevice: a DeviceMemory (worker/gpu/device_memory.h) that pretends
// blocks of host memory are a device's, so the device stages of a worker's
// pipeline run, and fail, in tests without a GPU.
//
// "Device" tensors are blocks it allocates (Allocate). Copies are memcpy on
// the calling thread, after a hook (SetBeforeCopy) through which a test
// holds, orders, observes or fails them. NewStream makes a stand-in for a
// framework's stream: work queued on it runs only when the test completes
// it, and a copy given a mark of the stream waits until then (or fails after
// 20 s: a test must not hang).
//
// The worker takes ownership of what it is given, so a test keeps the
// device in a shared_ptr and hands each worker a ForwardingDevice to it.
//
// Thread-safety: every method may be called from any thread; the hook runs
// outside the lock.
#pragma once

#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "common/mutex.h"
#include "worker/gpu/device_memory.h"

namespace syncline::testing {

class InMemoryDevice final : public DeviceMemory {
 public:
  enum class Way { kToHost, kToDevice };
  struct Copy {
    Way way;
    const uint8_t* device;  // where in device memory
    size_t bytes;
  };
  // Runs before each copy; a failure fails the copy with it.
  using BeforeCopy = std::function<Status(const Copy&)>;

  // Device memory of `bytes` zero bytes, valid while this device lives.
  uint8_t* Allocate(size_t bytes) {
    auto block = std::make_unique<uint8_t[]>(bytes > 0 ? bytes : 1);
    std::memset(block.get(), 0, bytes);
    uint8_t* p = block.get();
    MutexLock lock(mu_);
    blocks_[p] = {std::move(block), bytes};
    return p;
  }
  // A framework's stream, as the `stream` a push_pull is given: work queued
  // on it has not run until Complete.
  void* NewStream() {
    MutexLock lock(mu_);
    return &streams_.emplace_back();
  }
  void Enqueue(void* stream, std::function<void()> work) {
    MutexLock lock(mu_);
    auto* s = static_cast<Stream*>(stream);
    s->pending.push_back(std::move(work));
    ++s->enqueued;
  }
  // Runs the work queued on `stream`; marks made so far are then reached.
  void Complete(void* stream) {
    auto* s = static_cast<Stream*>(stream);
    std::vector<std::function<void()>> work;
    {
      MutexLock lock(mu_);
      work.swap(s->pending);
    }
    for (auto& w : work) w();
    MutexLock lock(mu_);
    s->completed += work.size();
    cv_.NotifyAll();
  }
  void SetBeforeCopy(BeforeCopy hook) {
    MutexLock lock(mu_);
    before_copy_ = std::move(hook);
  }
  size_t pinned_allocations() const {
    MutexLock lock(mu_);
    return pinned_allocations_;
  }
  // Waits until `n` copies wait for a stream to reach their mark; false
  // if they do not by `deadline`.
  bool AwaitCopiesWaitingForStreams(size_t n, Deadline deadline) {
    MutexLock lock(mu_);
    return cv_.WaitUntil(mu_, deadline, [&]() REQUIRES(mu_) { return waiting_ >= n; });
  }

  bool Present() const override { return true; }
  bool IsDevicePointer(const void* p) const override {
    MutexLock lock(mu_);
    return BlockOfLocked(static_cast<const uint8_t*>(p)) != nullptr;
  }
  Result<Buffer> AllocatePinned(const void* device_ptr, size_t bytes) override {
    if (!IsDevicePointer(device_ptr)) return InvalidArgument("pinned memory for a tensor not in device memory");
    {
      MutexLock lock(mu_);
      ++pinned_allocations_;
    }
    return Buffer::Zeros(bytes);
  }
  Result<std::shared_ptr<const Mark>> MarkStream(const void* device_ptr, void* stream) override {
    if (!IsDevicePointer(device_ptr)) return InvalidArgument("not device memory");
    auto* s = static_cast<Stream*>(stream);
    MutexLock lock(mu_);
    return std::shared_ptr<const Mark>(std::make_shared<const StreamMark>(s, s ? s->enqueued : 0));
  }
  Status CopyToHost(void* host, const void* device, size_t bytes, const Mark* after) override {
    if (after != nullptr) SYNCLINE_RETURN_IF_ERROR(WaitFor(static_cast<const StreamMark&>(*after)));
    SYNCLINE_RETURN_IF_ERROR(Check(Copy{Way::kToHost, static_cast<const uint8_t*>(device), bytes}));
    std::memcpy(host, device, bytes);
    return Status::Ok();
  }
  Status CopyToDevice(void* device, const void* host, size_t bytes) override {
    SYNCLINE_RETURN_IF_ERROR(Check(Copy{Way::kToDevice, static_cast<const uint8_t*>(device), bytes}));
    std::memcpy(device, host, bytes);
    return Status::Ok();
  }

 private:
  // What streams_ holds (guarded by mu_).
  struct Stream {
    std::vector<std::function<void()>> pending;
    size_t enqueued = 0, completed = 0;
  };
  struct StreamMark final : Mark {
    StreamMark(Stream* s, size_t n) : stream(s), reached_at(n) {}
    Stream* stream;  // null: reached already
    size_t reached_at;   // the stream's work items completed by then
  };
  struct Block {
    std::unique_ptr<uint8_t[]> bytes;
    size_t size = 0;
  };

  const Block* BlockOfLocked(const uint8_t* p) const REQUIRES(mu_) {
    auto it = blocks_.upper_bound(p);
    if (it == blocks_.begin()) return nullptr;
    --it;
    return p < it->first + it->second.size ? &it->second : nullptr;
  }
  // Checks that the copy stays within one block, then runs the hook.
  Status Check(const Copy& copy) {
    BeforeCopy hook;
    {
      MutexLock lock(mu_);
      const Block* block = BlockOfLocked(copy.device);
      if (block == nullptr || copy.device + copy.bytes > block->bytes.get() + block->size)
        return InvalidArgument("a copy outside the device's memory");
      hook = before_copy_;
    }
    return hook ? hook(copy) : Status::Ok();
  }
  Status WaitFor(const StreamMark& mark) {
    if (mark.stream == nullptr) return Status::Ok();
    MutexLock lock(mu_);
    ++waiting_;
    cv_.NotifyAll();
    const bool reached = cv_.WaitUntil(mu_, Deadline::AfterMs(20000), [&]() REQUIRES(mu_) {
      return mark.stream->completed >= mark.reached_at;
    });
    --waiting_;
    return reached ? Status::Ok() : DeadlineExceeded("the framework's stream never reached the copy's mark");
  }

  mutable Mutex mu_;
  CondVar cv_;
  std::map<const uint8_t*, Block> blocks_ GUARDED_BY(mu_);
  std::deque<Stream> streams_ GUARDED_BY(mu_);  // a deque: their addresses are the streams' handles
  BeforeCopy before_copy_ GUARDED_BY(mu_);
  size_t pinned_allocations_ GUARDED_BY(mu_) = 0;
  size_t waiting_ GUARDED_BY(mu_) = 0;
};

// Forwards every call to a device the test keeps.
class ForwardingDevice final : public DeviceMemory {
 public:
  explicit ForwardingDevice(std::shared_ptr<DeviceMemory> target) : target_(std::move(target)) {}
  bool Present() const override { return target_->Present(); }
  bool IsDevicePointer(const void* p) const override { return target_->IsDevicePointer(p); }
  Result<Buffer> AllocatePinned(const void* device_ptr, size_t bytes) override {
    return target_->AllocatePinned(device_ptr, bytes);
  }
  Result<std::shared_ptr<const Mark>> MarkStream(const void* device_ptr, void* stream) override {
    return target_->MarkStream(device_ptr, stream);
  }
  Status CopyToHost(void* host, const void* device, size_t bytes, const Mark* after) override {
    return target_->CopyToHost(host, device, bytes, after);
  }
  Status CopyToDevice(void* device, const void* host, size_t bytes) override {
    return target_->CopyToDevice(device, host, bytes);
  }

 private:
  const std::shared_ptr<DeviceMemory> target_;
};

}  // namespace syncline::testing
