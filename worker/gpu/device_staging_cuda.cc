#include <cuda_runtime_api.h>

#include "worker/gpu/device_staging.h"

namespace syncline {
namespace {

Status CudaError(cudaError_t err, const char* what) {
  return Internal(std::string(what) + ": " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
}

// A stream that is destroyed with its scope.
class ScopedStream {
 public:
  ScopedStream() { status_ = cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking); }
  ~ScopedStream() {
    if (status_ == cudaSuccess) cudaStreamDestroy(stream_);
  }
  cudaError_t status() const { return status_; }
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
  cudaError_t status_;
};

// Selects the device that owns `ptr` for the calling thread, so the copy runs there.
cudaError_t UseDeviceOf(const void* ptr) {
  cudaPointerAttributes attr{};
  cudaError_t err = cudaPointerGetAttributes(&attr, ptr);
  if (err != cudaSuccess) return err;
  return cudaSetDevice(attr.device);
}

}  // namespace

bool CudaDevicesPresent() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return count > 0;
}

bool IsDevicePointer(const void* p) {
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error of a host pointer query on old drivers
    return false;
  }
  return attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged;
}

Result<Buffer> DeviceStaging::CopyToHost(const void* device_ptr, size_t bytes) {
  if (cudaError_t err = UseDeviceOf(device_ptr); err != cudaSuccess) return CudaError(err, "finding the tensor's device");
  void* host = nullptr;
  if (cudaError_t err = cudaMallocHost(&host, bytes > 0 ? bytes : 1); err != cudaSuccess)
    return CudaError(err, "allocating pinned host memory");
  std::shared_ptr<const void> owner(host, [](const void* p) { cudaFreeHost(const_cast<void*>(p)); });
  ScopedStream stream;
  if (stream.status() != cudaSuccess) return CudaError(stream.status(), "creating a CUDA stream");
  if (cudaError_t err = cudaMemcpyAsync(host, device_ptr, bytes, cudaMemcpyDeviceToHost, stream.get());
      err != cudaSuccess)
    return CudaError(err, "copying a tensor to the host");
  if (cudaError_t err = cudaStreamSynchronize(stream.get()); err != cudaSuccess)
    return CudaError(err, "waiting for the copy to the host");
  return Buffer(host, bytes, std::move(owner));
}

Status DeviceStaging::CopyToDevice(void* device_ptr, const void* host, size_t bytes) {
  if (cudaError_t err = UseDeviceOf(device_ptr); err != cudaSuccess) return CudaError(err, "finding the tensor's device");
  ScopedStream stream;
  if (stream.status() != cudaSuccess) return CudaError(stream.status(), "creating a CUDA stream");
  if (cudaError_t err = cudaMemcpyAsync(device_ptr, host, bytes, cudaMemcpyHostToDevice, stream.get());
      err != cudaSuccess)
    return CudaError(err, "copying a tensor to the device");
  if (cudaError_t err = cudaStreamSynchronize(stream.get()); err != cudaSuccess)
    return CudaError(err, "waiting for the copy to the device");
  return Status::Ok();
}

}  // namespace syncline
