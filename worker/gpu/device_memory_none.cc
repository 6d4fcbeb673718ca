// DeviceMemory for builds without CUDA: no pointer is device memory.
#include "worker/gpu/device_memory.h"

namespace syncline {
namespace {

Status NoCuda() { return FailedPrecondition("this build of Syncline has no CUDA support (SYNCLINE_WITH_CUDA=OFF)"); }

class NoDevices final : public DeviceMemory {
 public:
  bool Present() const override { return false; }
  bool IsDevicePointer(const void*) const override { return false; }
  Result<Buffer> AllocatePinned(const void*, size_t) override { return NoCuda(); }
  Result<std::shared_ptr<const Mark>> MarkStream(const void*, void*) override { return NoCuda(); }
  Status CopyToHost(void*, const void*, size_t, const Mark*) override { return NoCuda(); }
  Status CopyToDevice(void*, const void*, size_t) override { return NoCuda(); }
};

}  // namespace

std::unique_ptr<DeviceMemory> CreateDeviceMemory() { return std::make_unique<NoDevices>(); }

}  // namespace syncline
