// DeviceMemory: what a worker needs of an accelerator to move a tensor's
// chunks between its memory and the host's: telling device pointers from
// host ones, page-locked (pinned) host buffers to stage chunks in, and
// per-chunk copies on Syncline's own streams, ordered after the framework's
// work that produced the tensor.
//
// Backends: CUDA (device_memory_cuda.cc, SYNCLINE_WITH_CUDA), one for builds
// without it (no pointer is device memory), and tests' in-memory device
// (tests/unit/testing/in_memory_device.h), which pretends host memory is a
// device and injects failures and delays.
//
// Thread-safety: every method may be called from any thread, and leaves the
// thread's current device as it found it. A copy blocks its thread until it
// is done; it has no deadline of its own (a device that never finishes the
// framework's work hangs the framework too).
#pragma once

#include <cstddef>
#include <memory>

#include "common/buffer.h"
#include "common/status.h"

namespace syncline {

class DeviceMemory {
 public:
  // A point in a framework's stream of device work (an event): copies that
  // are given it start only once the work before it has run.
  class Mark {
   public:
    virtual ~Mark() = default;
  };

  virtual ~DeviceMemory() = default;

  // This process sees a device; when false, no pointer is device memory and
  // callers may skip asking.
  virtual bool Present() const = 0;
  virtual bool IsDevicePointer(const void* p) const = 0;
  // `bytes` of page-locked host memory for a tensor at `device_ptr` (usable
  // from every device), freed when the last copy of the Buffer drops.
  virtual Result<Buffer> AllocatePinned(const void* device_ptr, size_t bytes) = 0;
  // Marks the framework's `stream` now, on the device of `device_ptr`
  // (`stream` null: that device's default stream).
  virtual Result<std::shared_ptr<const Mark>> MarkStream(const void* device_ptr, void* stream) = 0;
  // Copies `bytes` from device memory at `device` into host memory at `host`,
  // after `after` (may be null); returns once the bytes are on the host.
  virtual Status CopyToHost(void* host, const void* device, size_t bytes, const Mark* after) = 0;
  // Copies `bytes` from host memory at `host` into device memory at
  // `device`; returns once they are there.
  virtual Status CopyToDevice(void* device, const void* host, size_t bytes) = 0;
};

// The backend of this build: CUDA's where Syncline was built with it, else
// one without devices.
std::unique_ptr<DeviceMemory> CreateDeviceMemory();

}  // namespace syncline
