// DeviceStaging for builds without CUDA: no pointer is device memory.
#include "worker/gpu/device_staging.h"

namespace syncline {

bool CudaDevicesPresent() { return false; }
bool IsDevicePointer(const void*) { return false; }

Result<Buffer> DeviceStaging::CopyToHost(const void*, size_t) {
  return FailedPrecondition("this build of Syncline has no CUDA support (SYNCLINE_WITH_CUDA=OFF)");
}

Status DeviceStaging::CopyToDevice(void*, const void*, size_t) {
  return FailedPrecondition("this build of Syncline has no CUDA support (SYNCLINE_WITH_CUDA=OFF)");
}

}  // namespace syncline
