// DeviceMemory over the CUDA runtime. Copies run on two streams per device
// that this object creates (one each way, non-blocking, so they never wait
// for the framework's unrelated work), each copy waiting for the event that
// marked the framework's stream; the calling thread then waits for its copy.
// Pinned buffers are portable (usable from every device's context). The
// calling thread's current device is restored after every call: the
// framework's thread keeps the device it had.
#include <cuda_runtime_api.h>

#include <map>
#include <string>
#include <utility>

#include "common/mutex.h"
#include "worker/gpu/device_memory.h"

namespace syncline {
namespace {

Status CudaError(cudaError_t err, const std::string& what) {
  return Internal(what + ": " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
}

// Makes `device` current for the scope, then restores the thread's own.
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    if ((status_ = cudaGetDevice(&previous_)) != cudaSuccess) return;
    if (previous_ != device) status_ = cudaSetDevice(device);
  }
  ~DeviceScope() {
    int now = -1;
    if (cudaGetDevice(&now) == cudaSuccess && now != previous_ && previous_ >= 0) cudaSetDevice(previous_);
  }
  cudaError_t status() const { return status_; }

 private:
  int previous_ = -1;
  cudaError_t status_ = cudaSuccess;
};

Result<int> DeviceOf(const void* ptr) {
  cudaPointerAttributes attr{};
  if (cudaError_t err = cudaPointerGetAttributes(&attr, ptr); err != cudaSuccess)
    return CudaError(err, "finding the tensor's device");
  if (attr.type != cudaMemoryTypeDevice && attr.type != cudaMemoryTypeManaged)
    return InvalidArgument("the pointer is not device memory");
  return attr.device;
}

class CudaMark final : public DeviceMemory::Mark {
 public:
  explicit CudaMark(cudaEvent_t event) : event_(event) {}
  ~CudaMark() override { cudaEventDestroy(event_); }
  cudaEvent_t event() const { return event_; }

 private:
  const cudaEvent_t event_;
};

class CudaDeviceMemory final : public DeviceMemory {
 public:
  CudaDeviceMemory() {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
      cudaGetLastError();  // no driver or no device: not an error here
      count = 0;
    }
    present_ = count > 0;
  }
  ~CudaDeviceMemory() override {
    MutexLock lock(mu_);
    for (auto& [device, s] : streams_) {
      DeviceScope scope(device);
      cudaStreamDestroy(s.first);
      cudaStreamDestroy(s.second);
    }
  }

  bool Present() const override { return present_; }

  bool IsDevicePointer(const void* p) const override {
    if (!present_) return false;
    cudaPointerAttributes attr{};
    if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
      cudaGetLastError();  // clear the sticky error of a host pointer query on old drivers
      return false;
    }
    return attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged;
  }

  Result<Buffer> AllocatePinned(size_t bytes) override {
    void* host = nullptr;
    if (cudaError_t err = cudaHostAlloc(&host, bytes > 0 ? bytes : 1, cudaHostAllocPortable); err != cudaSuccess)
      return CudaError(err, "allocating " + std::to_string(bytes) + " bytes of pinned host memory");
    std::shared_ptr<const void> owner(host, [](const void* p) { cudaFreeHost(const_cast<void*>(p)); });
    return Buffer(host, bytes, std::move(owner));
  }

  Result<std::shared_ptr<const Mark>> MarkStream(const void* device_ptr, void* stream) override {
    SYNCLINE_ASSIGN_OR_RETURN(int device, DeviceOf(device_ptr));
    DeviceScope scope(device);
    if (scope.status() != cudaSuccess) return CudaError(scope.status(), "selecting the tensor's device");
    cudaEvent_t event;
    if (cudaError_t err = cudaEventCreateWithFlags(&event, cudaEventDisableTiming); err != cudaSuccess)
      return CudaError(err, "creating a CUDA event");
    auto mark = std::make_shared<const CudaMark>(event);
    cudaStream_t framework = stream != nullptr ? static_cast<cudaStream_t>(stream) : cudaStreamLegacy;
    if (cudaError_t err = cudaEventRecord(event, framework); err != cudaSuccess)
      return CudaError(err, "marking the framework's stream");
    return std::shared_ptr<const Mark>(mark);
  }

  Status CopyToHost(void* host, const void* device_ptr, size_t bytes, const Mark* after) override {
    return Copy(host, device_ptr, bytes, device_ptr, after, cudaMemcpyDeviceToHost);
  }

  Status CopyToDevice(void* device_ptr, const void* host, size_t bytes) override {
    return Copy(device_ptr, host, bytes, device_ptr, nullptr, cudaMemcpyHostToDevice);
  }

 private:
  // On `device`: its stream for copies to the host (first) and to the device.
  Result<std::pair<cudaStream_t, cudaStream_t>> StreamsOf(int device) {
    MutexLock lock(mu_);
    if (auto it = streams_.find(device); it != streams_.end()) return it->second;
    std::pair<cudaStream_t, cudaStream_t> s{};
    if (cudaError_t err = cudaStreamCreateWithFlags(&s.first, cudaStreamNonBlocking); err != cudaSuccess)
      return CudaError(err, "creating a CUDA stream");
    if (cudaError_t err = cudaStreamCreateWithFlags(&s.second, cudaStreamNonBlocking); err != cudaSuccess) {
      cudaStreamDestroy(s.first);
      return CudaError(err, "creating a CUDA stream");
    }
    streams_[device] = s;
    return s;
  }

  Status Copy(void* to, const void* from, size_t bytes, const void* device_ptr, const Mark* after,
              cudaMemcpyKind kind) {
    const char* way = kind == cudaMemcpyDeviceToHost ? "to the host" : "to the device";
    SYNCLINE_ASSIGN_OR_RETURN(int device, DeviceOf(device_ptr));
    DeviceScope scope(device);
    if (scope.status() != cudaSuccess) return CudaError(scope.status(), "selecting the tensor's device");
    SYNCLINE_ASSIGN_OR_RETURN(auto streams, StreamsOf(device));
    cudaStream_t stream = kind == cudaMemcpyDeviceToHost ? streams.first : streams.second;
    if (after != nullptr) {
      const auto* mark = dynamic_cast<const CudaMark*>(after);
      if (mark == nullptr) return InvalidArgument("a copy was given a mark of another backend");
      if (cudaError_t err = cudaStreamWaitEvent(stream, mark->event(), 0); err != cudaSuccess)
        return CudaError(err, "ordering a copy after the framework's stream");
    }
    if (cudaError_t err = cudaMemcpyAsync(to, from, bytes, kind, stream); err != cudaSuccess)
      return CudaError(err, std::string("copying ") + std::to_string(bytes) + " bytes " + way);
    if (cudaError_t err = cudaStreamSynchronize(stream); err != cudaSuccess)
      return CudaError(err, std::string("waiting for a copy ") + way);
    return Status::Ok();
  }

  bool present_ = false;  // set in the constructor, then only read
  Mutex mu_;
  std::map<int, std::pair<cudaStream_t, cudaStream_t>> streams_ GUARDED_BY(mu_);
};

}  // namespace

std::unique_ptr<DeviceMemory> CreateDeviceMemory() { return std::make_unique<CudaDeviceMemory>(); }

}  // namespace syncline
