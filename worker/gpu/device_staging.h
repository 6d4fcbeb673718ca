// DeviceStaging: the "copy to host" and "copy to device" stages of the worker
// pipeline for tensors that live in GPU memory. A device tensor is copied
// into pinned host memory, summed through the servers like any CPU tensor,
// and copied back. Built only with SYNCLINE_WITH_CUDA; without it every
// pointer is host memory and staging is never needed.
//
// Thread-safety: one DeviceStaging may be used from many threads; each copy
// runs on a stream of its own and waits for it.
#pragma once

#include <cstddef>
#include <memory>

#include "common/buffer.h"
#include "common/status.h"

namespace syncline {

// True when this process sees at least one CUDA device.
bool CudaDevicesPresent();
// True when `p` points into memory of a CUDA device (false without CUDA).
bool IsDevicePointer(const void* p);

class DeviceStaging {
 public:
  // Pinned host memory of `bytes` bytes holding a copy of `device_ptr`.
  static Result<Buffer> CopyToHost(const void* device_ptr, size_t bytes);
  // Copies `bytes` bytes of host memory at `host` to `device_ptr`.
  static Status CopyToDevice(void* device_ptr, const void* host, size_t bytes);
};

}  // namespace syncline
