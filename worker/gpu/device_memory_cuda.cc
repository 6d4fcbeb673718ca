// DeviceMemory over the CUDA runtime. Copies run on two streams per device
// that this object creates (one each way, non-blocking, so they never wait
// for the framework's unrelated work), each copy after the event that marked
// the framework's stream; the calling thread then sleeps until its copy is
// done (a blocking-sync event: a stage thread does not spin on a core while
// the GPU copies). Pinned buffers are portable (usable from every device's
// context).
//
// Every call leaves the calling thread's CUDA context as it found it, none
// included: a framework's thread keeps its device, and no thread gets a
// context on a device it never used (restoring the previous *device* would
// create one on device 0 in every thread that had none).
#include <cuda_runtime_api.h>

#include <map>
#include <string>
#include <utility>

#include "common/mutex.h"
#include "worker/gpu/device_memory.h"

namespace syncline {
namespace {

Status CudaError(cudaError_t err, const std::string& what) {
  cudaGetLastError();  // the thread's last error is this one: the framework's next check must not see it
  return Internal(what + ": " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
}

// The driver's calls that read and set the calling thread's current context
// (found through the runtime: nothing links libcuda itself, so the library
// still loads where no driver is installed).
struct ContextCalls {
  using Get = int (*)(void** context);
  using Set = int (*)(void* context);
  Get get = nullptr;
  Set set = nullptr;
};

ContextCalls FindContextCalls() {
  ContextCalls calls;
  void* get = nullptr;
  void* set = nullptr;
  cudaDriverEntryPointQueryResult found{};
  if (cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &get, 12000, cudaEnableDefault, &found) == cudaSuccess &&
      found == cudaDriverEntryPointSuccess &&
      cudaGetDriverEntryPointByVersion("cuCtxSetCurrent", &set, 12000, cudaEnableDefault, &found) == cudaSuccess &&
      found == cudaDriverEntryPointSuccess) {
    calls.get = reinterpret_cast<ContextCalls::Get>(get);
    calls.set = reinterpret_cast<ContextCalls::Set>(set);
  }
  cudaGetLastError();
  return calls;
}

// Makes `device` current for the scope, then gives the thread back the
// context it had (or, without the driver's calls, the device it had, if it
// was another).
class DeviceScope {
 public:
  DeviceScope(const ContextCalls& calls, int device) : calls_(calls) {
    if (calls_.get != nullptr && calls_.get(&context_) != 0) context_ = nullptr;
    if (calls_.get == nullptr && cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
    status_ = cudaSetDevice(device);
  }
  ~DeviceScope() {
    if (calls_.set != nullptr) {
      calls_.set(context_);
    } else if (previous_ >= 0) {
      int now = -1;
      if (cudaGetDevice(&now) == cudaSuccess && now != previous_) cudaSetDevice(previous_);
    }
  }
  cudaError_t status() const { return status_; }

 private:
  const ContextCalls& calls_;
  void* context_ = nullptr;
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

// One direction's copies on one device: its stream, and the event a caller
// sleeps on until its copy is done.
struct CopyLane {
  cudaStream_t stream = nullptr;
  cudaEvent_t done = nullptr;
};

Status MakeLane(CopyLane* lane) {
  if (cudaError_t err = cudaStreamCreateWithFlags(&lane->stream, cudaStreamNonBlocking); err != cudaSuccess)
    return CudaError(err, "creating a CUDA stream");
  if (cudaError_t err = cudaEventCreateWithFlags(&lane->done, cudaEventBlockingSync | cudaEventDisableTiming);
      err != cudaSuccess) {
    cudaStreamDestroy(lane->stream);
    return CudaError(err, "creating a CUDA event");
  }
  return Status::Ok();
}

class CudaDeviceMemory final : public DeviceMemory {
 public:
  CudaDeviceMemory() {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
      cudaGetLastError();  // no driver or no device: not an error here
      count = 0;
    }
    present_ = count > 0;
    if (present_) calls_ = FindContextCalls();
  }
  ~CudaDeviceMemory() override {
    MutexLock lock(mu_);
    for (auto& [device, lanes] : lanes_) {
      DeviceScope scope(calls_, device);
      for (CopyLane* lane : {&lanes.first, &lanes.second}) {
        cudaEventDestroy(lane->done);
        cudaStreamDestroy(lane->stream);
      }
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

  Result<Buffer> AllocatePinned(const void* device_ptr, size_t bytes) override {
    SYNCLINE_ASSIGN_OR_RETURN(int device, DeviceOf(device_ptr));
    DeviceScope scope(calls_, device);  // under the tensor's context, not whatever the thread had
    if (scope.status() != cudaSuccess) return CudaError(scope.status(), "selecting the tensor's device");
    void* host = nullptr;
    if (cudaError_t err = cudaHostAlloc(&host, bytes > 0 ? bytes : 1, cudaHostAllocPortable); err != cudaSuccess)
      return CudaError(err, "allocating " + std::to_string(bytes) + " bytes of pinned host memory");
    std::shared_ptr<const void> owner(host, [](const void* p) { cudaFreeHost(const_cast<void*>(p)); });
    return Buffer(host, bytes, std::move(owner));
  }

  Result<std::shared_ptr<const Mark>> MarkStream(const void* device_ptr, void* stream) override {
    SYNCLINE_ASSIGN_OR_RETURN(int device, DeviceOf(device_ptr));
    DeviceScope scope(calls_, device);
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
  // On `device` (current): its lanes to the host (first) and to the device.
  Result<std::pair<CopyLane, CopyLane>> LanesOf(int device) {
    MutexLock lock(mu_);
    if (auto it = lanes_.find(device); it != lanes_.end()) return it->second;
    std::pair<CopyLane, CopyLane> lanes;
    SYNCLINE_RETURN_IF_ERROR(MakeLane(&lanes.first));
    if (Status st = MakeLane(&lanes.second); !st.ok()) {
      cudaEventDestroy(lanes.first.done);
      cudaStreamDestroy(lanes.first.stream);
      return st;
    }
    lanes_[device] = lanes;
    return lanes;
  }

  Status Copy(void* to, const void* from, size_t bytes, const void* device_ptr, const Mark* after,
              cudaMemcpyKind kind) {
    const std::string way = kind == cudaMemcpyDeviceToHost ? "to the host" : "to the device";
    SYNCLINE_ASSIGN_OR_RETURN(int device, DeviceOf(device_ptr));
    DeviceScope scope(calls_, device);
    if (scope.status() != cudaSuccess) return CudaError(scope.status(), "selecting the tensor's device");
    SYNCLINE_ASSIGN_OR_RETURN(auto lanes, LanesOf(device));
    const CopyLane& lane = kind == cudaMemcpyDeviceToHost ? lanes.first : lanes.second;
    if (after != nullptr) {
      const auto* mark = dynamic_cast<const CudaMark*>(after);
      if (mark == nullptr) return InvalidArgument("a copy was given a mark of another backend");
      if (cudaError_t err = cudaStreamWaitEvent(lane.stream, mark->event(), 0); err != cudaSuccess)
        return CudaError(err, "ordering a copy after the framework's stream");
    }
    if (cudaError_t err = cudaMemcpyAsync(to, from, bytes, kind, lane.stream); err != cudaSuccess)
      return CudaError(err, "copying " + std::to_string(bytes) + " bytes " + way);
    // Two threads sharing a lane (a stage and a broadcast) may wait on each
    // other's record: later on the same stream, so never too early.
    if (cudaError_t err = cudaEventRecord(lane.done, lane.stream); err != cudaSuccess)
      return CudaError(err, "marking the end of a copy " + way);
    if (cudaError_t err = cudaEventSynchronize(lane.done); err != cudaSuccess)
      return CudaError(err, "waiting for a copy " + way);
    return Status::Ok();
  }

  bool present_ = false;  // set in the constructor, then only read
  ContextCalls calls_;    // likewise
  Mutex mu_;
  std::map<int, std::pair<CopyLane, CopyLane>> lanes_ GUARDED_BY(mu_);
};

}  // namespace

std::unique_ptr<DeviceMemory> CreateDeviceMemory() { return std::make_unique<CudaDeviceMemory>(); }

}  // namespace syncline
