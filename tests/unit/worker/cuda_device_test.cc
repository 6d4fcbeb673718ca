// CUDA device memory (worker/gpu/device_memory_cuda.cc) and device tensors
// through the worker pipeline on a real GPU: copies ordered after the
// framework's stream, chunk by chunk through pinned buffers, push_pull and
// broadcast. Runs where a CUDA device is present; skips, saying so, elsewhere
// (scripts/gpu-check runs it on a lent GPU machine).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "tests/unit/testing/in_process_job.h"
#include "worker/gpu/device_memory.h"

namespace syncline {
namespace {

using testing::ExpectAllOk;
using testing::InProcessJob;
using testing::OnAllWorkers;

#define SKIP_WITHOUT_GPU(device) \
  if (!(device)->Present()) GTEST_SKIP() << "no CUDA device on this machine"

// A framework's stream that writes `values` into `dev` only once a host
// function queued before the write lets it go, 200 ms after the stream was
// made: a copy that does not wait for the stream reads zeros. (The delay is
// the fault a wrong copy would need to be caught, not synchronisation: a
// copy that waits is right whatever the timing.)
class HeldStream {
 public:
  HeldStream(float* dev, const std::vector<float>& values) {
    EXPECT_EQ(cudaSuccess, cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    EXPECT_EQ(cudaSuccess, cudaMallocHost(&pinned_, values.size() * 4));
    std::memcpy(pinned_, values.data(), values.size() * 4);
    EXPECT_EQ(cudaSuccess, cudaMemset(dev, 0, values.size() * 4));
    EXPECT_EQ(cudaSuccess, cudaLaunchHostFunc(stream, &HeldStream::Hold, this));
    EXPECT_EQ(cudaSuccess, cudaMemcpyAsync(dev, pinned_, values.size() * 4, cudaMemcpyHostToDevice, stream));
    releaser_ = std::thread([this] {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      std::lock_guard<std::mutex> lock(mu_);
      released_ = true;
      cv_.notify_all();
    });
  }
  ~HeldStream() {
    releaser_.join();
    cudaStreamSynchronize(stream);
    cudaFreeHost(pinned_);
    cudaStreamDestroy(stream);
  }
  cudaStream_t stream = nullptr;

 private:
  static void Hold(void* self) {
    auto* s = static_cast<HeldStream*>(self);
    std::unique_lock<std::mutex> lock(s->mu_);
    s->cv_.wait(lock, [s] { return s->released_; });
  }
  void* pinned_ = nullptr;
  std::mutex mu_;
  std::condition_variable cv_;
  bool released_ = false;
  std::thread releaser_;
};

TEST(CudaDeviceMemory, CopiesWaitForTheFrameworksStreamAndRoundTrip) {
  auto device = CreateDeviceMemory();
  SKIP_WITHOUT_GPU(device);
  std::vector<float> values(1 << 20);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 1000 + 1);
  float* dev = nullptr;
  ASSERT_EQ(cudaSuccess, cudaMalloc(reinterpret_cast<void**>(&dev), values.size() * 4));
  EXPECT_TRUE(device->IsDevicePointer(dev));
  EXPECT_FALSE(device->IsDevicePointer(values.data()));
  auto pinned = device->AllocatePinned(dev, values.size() * 4);
  ASSERT_TRUE(pinned.ok()) << pinned.status().ToString();
  {
    HeldStream framework(dev, values);
    auto mark = device->MarkStream(dev, framework.stream);
    ASSERT_TRUE(mark.ok()) << mark.status().ToString();
    ASSERT_TRUE(device->CopyToHost(pinned->mutable_data(), dev, values.size() * 4, mark->get()).ok());
    EXPECT_EQ(0, std::memcmp(pinned->data(), values.data(), values.size() * 4));
  }
  std::vector<float> twice(values.size());
  for (size_t i = 0; i < values.size(); ++i) twice[i] = values[i] * 2;
  ASSERT_TRUE(device->CopyToDevice(dev, twice.data(), twice.size() * 4).ok());
  std::vector<float> back(values.size());
  ASSERT_EQ(cudaSuccess, cudaMemcpy(back.data(), dev, back.size() * 4, cudaMemcpyDeviceToHost));
  EXPECT_EQ(back, twice);
  cudaFree(dev);
}

TEST(CudaDeviceMemory, PushPullAndBroadcastOfDeviceTensorsChunkByChunk) {
  SKIP_WITHOUT_GPU(CreateDeviceMemory());
  InProcessJob::Options o;
  o.workers = 2;
  o.partition_bytes = 64 * 1024;  // 19 chunks
  InProcessJob job(o);
  ASSERT_TRUE(job.Start().ok());
  constexpr size_t kN = 300000;
  auto statuses = OnAllWorkers(job, [&job](int rank) -> Status {
    Worker& w = job.worker(rank);
    SYNCLINE_ASSIGN_OR_RETURN(TensorId id, w.Declare("gpu.grad", DType::kFloat32, kN));
    float* dev = nullptr;
    if (cudaMalloc(reinterpret_cast<void**>(&dev), kN * 4) != cudaSuccess) return Internal("cudaMalloc failed");
    for (int round = 0; round < 3; ++round) {
      std::vector<float> host(kN, static_cast<float>(rank + 1 + round));
      HeldStream framework(dev, host);
      PushPullOptions options;
      options.stream = framework.stream;
      SYNCLINE_ASSIGN_OR_RETURN(OpHandle h, w.PushPull(id, dev, options));
      SYNCLINE_RETURN_IF_ERROR(h.Wait(Deadline::AfterMs(20000)));
      cudaMemcpy(host.data(), dev, kN * 4, cudaMemcpyDeviceToHost);
      for (float v : host)
        if (v != 3.0f + 2 * round) return Internal("device sum is " + std::to_string(v));
    }
    std::vector<float> mine(kN, static_cast<float>(10 + rank));
    cudaMemcpy(dev, mine.data(), kN * 4, cudaMemcpyHostToDevice);
    SYNCLINE_RETURN_IF_ERROR(w.Broadcast(id, dev, /*root=*/1));
    cudaMemcpy(mine.data(), dev, kN * 4, cudaMemcpyDeviceToHost);
    cudaFree(dev);
    for (float v : mine)
      if (v != 11.0f) return Internal("device broadcast gave " + std::to_string(v));
    return Status::Ok();
  });
  ExpectAllOk(statuses);
  EXPECT_TRUE(job.Finish().ok());
}

}  // namespace
}  // namespace syncline
