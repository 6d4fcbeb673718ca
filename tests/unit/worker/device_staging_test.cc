// GPU tensors through the worker pipeline: copy to host, push, pull, copy
// back. Runs where a CUDA device is present; skips (saying so) elsewhere.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <future>
#include <vector>

#include "tests/unit/testing/in_process_job.h"
#include "worker/gpu/device_staging.h"

namespace syncline {
namespace {

#define SKIP_WITHOUT_GPU() \
  if (!CudaDevicesPresent()) GTEST_SKIP() << "no CUDA device on this machine"

TEST(DeviceStaging, RoundTripsThroughPinnedHostMemory) {
  SKIP_WITHOUT_GPU();
  std::vector<float> host(1 << 20);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(i % 1000);
  void* dev = nullptr;
  ASSERT_EQ(cudaSuccess, cudaMalloc(&dev, host.size() * 4));
  ASSERT_EQ(cudaSuccess, cudaMemcpy(dev, host.data(), host.size() * 4, cudaMemcpyHostToDevice));
  EXPECT_TRUE(IsDevicePointer(dev));
  EXPECT_FALSE(IsDevicePointer(host.data()));
  auto staged = DeviceStaging::CopyToHost(dev, host.size() * 4);
  ASSERT_TRUE(staged.ok()) << staged.status().ToString();
  EXPECT_EQ(0, std::memcmp(staged->data(), host.data(), host.size() * 4));
  std::vector<float> twice(host.size());
  for (size_t i = 0; i < host.size(); ++i) twice[i] = host[i] * 2;
  ASSERT_TRUE(DeviceStaging::CopyToDevice(dev, twice.data(), twice.size() * 4).ok());
  std::vector<float> back(host.size());
  ASSERT_EQ(cudaSuccess, cudaMemcpy(back.data(), dev, back.size() * 4, cudaMemcpyDeviceToHost));
  EXPECT_EQ(back, twice);
  cudaFree(dev);
}

TEST(DeviceStaging, PushPullAndBroadcastOfDeviceTensors) {
  SKIP_WITHOUT_GPU();
  testing::InProcessJob::Options o;
  o.workers = 2;
  testing::InProcessJob job(o);
  ASSERT_TRUE(job.Start().ok());
  constexpr size_t kN = 300000;
  std::vector<std::future<Status>> done;
  for (int rank = 0; rank < 2; ++rank) {
    done.push_back(std::async(std::launch::async, [&job, rank]() -> Status {
      Worker& w = job.worker(rank);
      SYNCLINE_ASSIGN_OR_RETURN(TensorId id, w.Declare("gpu.grad", DType::kFloat32, kN));
      std::vector<float> host(kN, static_cast<float>(rank + 1));
      void* dev = nullptr;
      if (cudaMalloc(&dev, kN * 4) != cudaSuccess) return Internal("cudaMalloc failed");
      cudaMemcpy(dev, host.data(), kN * 4, cudaMemcpyHostToDevice);
      SYNCLINE_ASSIGN_OR_RETURN(OpHandle h, w.PushPull(id, dev, /*average=*/false));
      SYNCLINE_RETURN_IF_ERROR(h.Wait(Deadline::AfterMs(20000)));
      cudaMemcpy(host.data(), dev, kN * 4, cudaMemcpyDeviceToHost);
      for (float v : host)
        if (v != 3.0f) return Internal("device sum is " + std::to_string(v));
      std::vector<float> mine(kN, static_cast<float>(10 + rank));
      cudaMemcpy(dev, mine.data(), kN * 4, cudaMemcpyHostToDevice);
      SYNCLINE_RETURN_IF_ERROR(w.Broadcast(id, dev, /*root=*/1));
      cudaMemcpy(mine.data(), dev, kN * 4, cudaMemcpyDeviceToHost);
      cudaFree(dev);
      for (float v : mine)
        if (v != 11.0f) return Internal("device broadcast gave " + std::to_string(v));
      return Status::Ok();
    }));
  }
  for (auto& d : done) EXPECT_TRUE(d.get().ok());
  EXPECT_TRUE(job.Finish().ok());
}

}  // namespace
}  // namespace syncline
