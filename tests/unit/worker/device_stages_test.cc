// The device stages of a worker's chunk pipeline (worker/device_stages.h) in
// whole in-process jobs, an in-memory device standing for each worker's GPU:
// exact sums and averages of device tensors in every dtype, flat and reduced
// within emulated hosts, through one pinned buffer per tensor; a tensor's
// first chunk pushed while its last is still on the device; the most urgent
// chunk copied first; copies that wait for the framework's stream; a copy to
// the host that fails ending the job, named; a copy back that fails failing
// only that push_pull; an abort while a sum is copied back holding the
// caller until the copy ends; compressed device tensors; two push_pulls of a tensor
// in flight at once; broadcasts.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <utility>

#include "tests/unit/testing/dtype_values.h"
#include "tests/unit/testing/in_memory_device.h"
#include "tests/unit/testing/in_process_job.h"

namespace syncline {
namespace {

using testing::ExpectAllOk;
using testing::ForwardingDevice;
using testing::InMemoryDevice;
using testing::InProcessJob;
using testing::Load;
using testing::OnAllWorkers;
using testing::Store;

constexpr uint64_t kPartition = 256;

// Each worker's device, kept by the test while the workers use it.
struct Devices {
  explicit Devices(int n) {
    for (int r = 0; r < n; ++r) of.push_back(std::make_shared<InMemoryDevice>());
  }
  std::function<std::unique_ptr<DeviceMemory>(int)> Factory() const {
    return [devices = of](int rank) { return std::make_unique<ForwardingDevice>(devices[rank]); };
  }
  std::vector<std::shared_ptr<InMemoryDevice>> of;
};

InProcessJob::Options JobOf(int workers, const Devices& devices, int workers_per_host = 1) {
  InProcessJob::Options o;
  o.workers = workers;
  o.servers = 2;
  o.partition_bytes = kPartition;
  o.host_label = [workers_per_host](int rank) { return "host-" + std::to_string(rank / workers_per_host); };
  o.device = devices.Factory();
  return o;
}

// Runs `body` on every worker of a job of `workers` workers (`per_host` to
// a host), each with an in-memory device, and expects every body and the
// job to end well. `adjust` changes the job's options first.
using Body = std::function<Status(Worker& w, InMemoryDevice& device, int rank)>;
void RunOnDevices(int workers, const Body& body, int per_host = 1,
                  const std::function<void(InProcessJob::Options&)>& adjust = nullptr) {
  Devices devices(workers);
  InProcessJob::Options o = JobOf(workers, devices, per_host);
  if (adjust) adjust(o);
  InProcessJob job(o);
  ASSERT_TRUE(job.Start().ok());
  ExpectAllOk(OnAllWorkers(job, [&](int rank) { return body(job.worker(rank), *devices.of[rank], rank); }));
  EXPECT_TRUE(job.Finish().ok());
}

// Value `i` of worker `rank`'s tensor in `round`: small integers, exact in
// every dtype and in any order of summation.
double ValueOf(int rank, size_t i, int round) { return double((rank + 1) * ((i % 5) + 1) + round); }

Status ExpectNear(double got, double want, double tolerance, const std::string& what) {
  if (std::abs(got - want) <= tolerance) return Status::Ok();
  return Internal(what + ": " + std::to_string(got) + " instead of " + std::to_string(want));
}

// A ChunkScheduler that admits every chunk at once, as SendAtOnce, and
// records which it admitted, for the test to wait on.
class AdmissionLog {
 public:
  void Add(TensorId tensor, size_t index) {
    MutexLock lock(mu_);
    admitted_.emplace_back(tensor, index);
    cv_.NotifyAll();
  }
  bool AwaitAdmitted(TensorId tensor, size_t index, Deadline deadline) {
    MutexLock lock(mu_);
    return cv_.WaitUntil(mu_, deadline, [&]() REQUIRES(mu_) {
      return std::find(admitted_.begin(), admitted_.end(), std::make_pair(tensor, index)) != admitted_.end();
    });
  }

 private:
  Mutex mu_;
  CondVar cv_;
  std::vector<std::pair<TensorId, size_t>> admitted_ GUARDED_BY(mu_);
};

class LoggedAdmission final : public ChunkScheduler {
 public:
  explicit LoggedAdmission(std::shared_ptr<AdmissionLog> log) : log_(std::move(log)) {}
  void Start(Admit admit) override {
    inner_.Start([log = log_, admit = std::move(admit)](ChunkTask&& chunk) {
      log->Add(chunk.tensor, chunk.index);
      admit(std::move(chunk));
    });
  }
  void Post(std::vector<ChunkTask> chunks) override { inner_.Post(std::move(chunks)); }
  void Release(uint64_t bytes) override { inner_.Release(bytes); }
  void Stop(const Status& status) override { inner_.Stop(status); }

 private:
  const std::shared_ptr<AdmissionLog> log_;
  SendAtOnce inner_;
};

// Workers per host: 1 (flat: every worker pushes its own) and 2 (local reduce).
class DeviceTensors : public ::testing::TestWithParam<int> {};

TEST_P(DeviceTensors, SumExactlyAndAverageInEveryDTypeThroughOnePinnedBufferPerTensor) {
  const int per_host = GetParam();
  constexpr int kWorkers = 4;
  // 7 chunks (the last one short) of 4-byte types, 13 of 8-byte, 4 of 2-byte.
  constexpr size_t kElements = 430;
  const std::vector<DType> dtypes = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16};
  constexpr int kRounds = 3;
  RunOnDevices(kWorkers, [&](Worker& w, InMemoryDevice& device, int rank) -> Status {
    if (w.local_group().local_size != per_host) return Internal("local size " + std::to_string(w.local_group().local_size));
    for (DType dtype : dtypes) {
      SYNCLINE_ASSIGN_OR_RETURN(TensorId id, w.Declare(std::string("grad-") + DTypeName(dtype), dtype, kElements));
      uint8_t* tensor = device.Allocate(kElements * DTypeSize(dtype));
      for (int round = 0; round < kRounds; ++round) {
        const bool average = round == 1;
        for (size_t i = 0; i < kElements; ++i) Store(dtype, tensor, i, ValueOf(rank, i, round));
        SYNCLINE_ASSIGN_OR_RETURN(OpHandle h, w.PushPull(id, tensor, average));
        SYNCLINE_RETURN_IF_ERROR(h.Wait(w.DefaultDeadline()));
        for (size_t i = 0; i < kElements; ++i) {
          double sum = 0;
          for (int r = 0; r < kWorkers; ++r) sum += ValueOf(r, i, round);
          double want = average ? sum / kWorkers : sum;
          if (average) Store(dtype, &want, 0, want), want = Load(dtype, &want, 0);  // as the dtype holds it
          SYNCLINE_RETURN_IF_ERROR(ExpectNear(Load(dtype, tensor, i), want, average ? std::abs(want) * 1e-2 : 0.0,
                                              std::string(DTypeName(dtype)) + " round " + std::to_string(round) +
                                                  " element " + std::to_string(i)));
        }
      }
    }
    // One staging buffer per tensor, however many push_pulls it had.
    if (device.pinned_allocations() != dtypes.size())
      return Internal(std::to_string(device.pinned_allocations()) + " pinned buffers for " +
                      std::to_string(dtypes.size()) + " tensors");
    return Status::Ok();
  }, per_host);
}

INSTANTIATE_TEST_SUITE_P(WorkersPerHost, DeviceTensors, ::testing::Values(1, 2),
                         [](const auto& info) { return std::to_string(info.param) + "PerHost"; });

TEST(DeviceStages, ATensorsFirstChunkIsPushedWhileItsLastIsStillOnTheDevice) {
  auto log = std::make_shared<AdmissionLog>();
  auto logged = [log](InProcessJob::Options& o) {
    o.chunk_scheduler = [log](int rank) -> std::unique_ptr<ChunkScheduler> {
      if (rank == 0) return std::make_unique<LoggedAdmission>(log);
      return std::make_unique<SendAtOnce>();
    };
  };
  constexpr size_t kElements = 640;  // 10 chunks
  RunOnDevices(2, [&](Worker& w, InMemoryDevice& device, int rank) -> Status {
    SYNCLINE_ASSIGN_OR_RETURN(TensorId id, w.Declare("grad", DType::kFloat32, kElements));
    auto* tensor = reinterpret_cast<float*>(device.Allocate(kElements * 4));
    std::fill(tensor, tensor + kElements, float(rank + 1));
    if (rank == 0) {
      // Worker 0's last chunk leaves the device only once its first was admitted to the network.
      const uint8_t* last = reinterpret_cast<uint8_t*>(tensor) + 9 * kPartition;
      device.SetBeforeCopy([log, id, last](const InMemoryDevice::Copy& copy) -> Status {
        if (copy.way != InMemoryDevice::Way::kToHost || copy.device != last) return Status::Ok();
        if (log->AwaitAdmitted(id, 0, Deadline::AfterMs(10000))) return Status::Ok();
        return Internal("chunk 0 was not pushed while chunk 9 was still on the device");
      });
    }
    SYNCLINE_ASSIGN_OR_RETURN(OpHandle h, w.PushPull(id, tensor, false));
    SYNCLINE_RETURN_IF_ERROR(h.Wait(w.DefaultDeadline()));
    for (size_t i = 0; i < kElements; ++i)
      SYNCLINE_RETURN_IF_ERROR(ExpectNear(tensor[i], 3, 0, "element " + std::to_string(i)));
    return Status::Ok();
  }, 1, logged);
}

TEST(DeviceStages, TheMostUrgentChunkLeavesTheDeviceFirst) {
  Devices devices(1);
  InProcessJob job(JobOf(1, devices));
  ASSERT_TRUE(job.Start().ok());
  Worker& w = job.worker(0);
  InMemoryDevice& device = *devices.of[0];
  constexpr size_t kElements = 512;  // 8 chunks
  auto bulk = w.Declare("bulk", DType::kFloat32, kElements);
  auto urgent = w.Declare("urgent", DType::kFloat32, kElements);
  ASSERT_TRUE(bulk.ok() && urgent.ok());
  uint8_t* bulk_tensor = device.Allocate(kElements * 4);
  uint8_t* urgent_tensor = device.Allocate(kElements * 4);
  // The first copy holds the stage until both tensors are queued; the order
  // of copies to the host is recorded as (tensor, chunk).
  Mutex mu;
  CondVar cv;
  bool holding = false, go = false;
  std::vector<std::string> order;
  device.SetBeforeCopy([&](const InMemoryDevice::Copy& copy) -> Status {
    if (copy.way != InMemoryDevice::Way::kToHost) return Status::Ok();
    const bool is_bulk = copy.device >= bulk_tensor && copy.device < bulk_tensor + kElements * 4;
    const uint8_t* base = is_bulk ? bulk_tensor : urgent_tensor;
    MutexLock lock(mu);
    order.push_back((is_bulk ? "bulk#" : "urgent#") + std::to_string((copy.device - base) / kPartition));
    if (order.size() == 1) {
      holding = true;
      cv.NotifyAll();
      if (!cv.WaitUntil(mu, Deadline::AfterMs(10000), [&]() REQUIRES(mu) { return go; }))
        return Internal("the test never let the first copy go");
    }
    return Status::Ok();
  });
  auto first = w.PushPull(*bulk, bulk_tensor, PushPullOptions{false, /*priority=*/0, nullptr});
  ASSERT_TRUE(first.ok());
  {
    MutexLock lock(mu);
    ASSERT_TRUE(cv.WaitUntil(mu, Deadline::AfterMs(10000), [&]() REQUIRES(mu) { return holding; }));
  }
  auto second = w.PushPull(*urgent, urgent_tensor, PushPullOptions{false, /*priority=*/5, nullptr});
  ASSERT_TRUE(second.ok());
  {
    MutexLock lock(mu);
    go = true;
    cv.NotifyAll();
  }
  ASSERT_TRUE(first->Wait(w.DefaultDeadline()).ok());
  ASSERT_TRUE(second->Wait(w.DefaultDeadline()).ok());
  std::vector<std::string> want = {"bulk#0"};
  for (int i = 0; i < 8; ++i) want.push_back("urgent#" + std::to_string(i));
  for (int i = 1; i < 8; ++i) want.push_back("bulk#" + std::to_string(i));
  MutexLock lock(mu);
  EXPECT_EQ(order, want);
}

TEST(DeviceStages, CopiesWaitForTheWorkQueuedOnTheFrameworksStream) {
  constexpr size_t kElements = 300;  // 5 chunks
  RunOnDevices(2, [&](Worker& w, InMemoryDevice& device, int rank) -> Status {
    SYNCLINE_ASSIGN_OR_RETURN(TensorId id, w.Declare("grad", DType::kFloat32, kElements));
    auto* tensor = reinterpret_cast<float*>(device.Allocate(kElements * 4));
    PushPullOptions options;
    if (rank == 0) {
      // The gradient is what the framework's queued work writes; until it
      // has run the tensor holds 1000s, which a copy made too early would sum.
      std::fill(tensor, tensor + kElements, 1000.0f);
      options.stream = device.NewStream();
      device.Enqueue(options.stream, [tensor, n = kElements] { std::fill(tensor, tensor + n, 1.0f); });
    } else {
      std::fill(tensor, tensor + kElements, 2.0f);
    }
    SYNCLINE_ASSIGN_OR_RETURN(OpHandle h, w.PushPull(id, tensor, options));
    if (rank == 0) {
      if (!device.AwaitCopiesWaitingForStreams(1, Deadline::AfterMs(10000)))
        return Internal("no copy waited for the framework's stream");
      device.Complete(options.stream);
    }
    SYNCLINE_RETURN_IF_ERROR(h.Wait(w.DefaultDeadline()));
    for (size_t i = 0; i < kElements; ++i)
      SYNCLINE_RETURN_IF_ERROR(ExpectNear(tensor[i], 3, 0, "element " + std::to_string(i)));
    return Status::Ok();
  });
}

TEST(DeviceStages, ACopyToTheHostThatFailsEndsTheJobNamingTheWorkerAndTheTensor) {
  Devices devices(2);
  devices.of[1]->SetBeforeCopy([](const InMemoryDevice::Copy& copy) -> Status {
    if (copy.way == InMemoryDevice::Way::kToHost) return Internal("injected: the device fell off the bus");
    return Status::Ok();
  });
  InProcessJob job(JobOf(2, devices));
  ASSERT_TRUE(job.Start().ok());
  auto statuses = OnAllWorkers(job, [&](int rank) -> Status {
    Worker& w = job.worker(rank);
    SYNCLINE_ASSIGN_OR_RETURN(TensorId id, w.Declare("layer1.grad", DType::kFloat32, 1000));
    uint8_t* tensor = devices.of[rank]->Allocate(4000);
    SYNCLINE_ASSIGN_OR_RETURN(OpHandle h, w.PushPull(id, tensor, false));
    return h.Wait(w.DefaultDeadline());
  });
  for (int rank = 0; rank < 2; ++rank) {
    SCOPED_TRACE("worker " + std::to_string(rank));
    const std::string message = statuses[rank].ToString();
    EXPECT_FALSE(statuses[rank].ok());
    // Ended by the abort, not by a deadline.
    EXPECT_NE(statuses[rank].code(), StatusCode::kDeadlineExceeded) << message;
    EXPECT_NE(message.find("'layer1.grad' from its device to the host"), std::string::npos) << message;
    EXPECT_NE(message.find("injected: the device fell off the bus"), std::string::npos) << message;
  }
  EXPECT_NE(statuses[0].ToString().find("worker 1"), std::string::npos) << statuses[0].ToString();
}

TEST(DeviceStages, ACopyBackThatFailsFailsOnlyThatPushPullAndTheJobGoesOn) {
  Devices devices(2);
  std::atomic<bool> fail_copies_back{true};
  devices.of[1]->SetBeforeCopy([&](const InMemoryDevice::Copy& copy) -> Status {
    if (copy.way == InMemoryDevice::Way::kToDevice && fail_copies_back) return Internal("injected: ECC error");
    return Status::Ok();
  });
  InProcessJob job(JobOf(2, devices));
  ASSERT_TRUE(job.Start().ok());
  constexpr size_t kElements = 300;
  std::vector<TensorId> ids(2);
  std::vector<float*> tensors(2);
  auto round = [&](int rank) -> Status {
    Worker& w = job.worker(rank);
    std::fill(tensors[rank], tensors[rank] + kElements, float(rank + 1));
    SYNCLINE_ASSIGN_OR_RETURN(OpHandle h, w.PushPull(ids[rank], tensors[rank], false));
    SYNCLINE_RETURN_IF_ERROR(h.Wait(w.DefaultDeadline()));
    for (size_t i = 0; i < kElements; ++i)
      SYNCLINE_RETURN_IF_ERROR(ExpectNear(tensors[rank][i], 3, 0, "element " + std::to_string(i)));
    return Status::Ok();
  };
  auto declared = OnAllWorkers(job, [&](int rank) -> Status {
    SYNCLINE_ASSIGN_OR_RETURN(ids[rank], job.worker(rank).Declare("grad", DType::kFloat32, kElements));
    tensors[rank] = reinterpret_cast<float*>(devices.of[rank]->Allocate(kElements * 4));
    return Status::Ok();
  });
  ExpectAllOk(declared);
  auto first = OnAllWorkers(job, round);
  EXPECT_TRUE(first[0].ok()) << first[0].ToString();
  ASSERT_FALSE(first[1].ok());
  EXPECT_NE(first[1].ToString().find("tensor 'grad'"), std::string::npos) << first[1].ToString();
  EXPECT_NE(first[1].ToString().find("copying its sum to the device: injected: ECC error"), std::string::npos)
      << first[1].ToString();
  fail_copies_back = false;
  ExpectAllOk(OnAllWorkers(job, round));
}

TEST(DeviceStages, AnAbortWhileASumIsCopiedBackHoldsTheWaitUntilTheCopyEnds) {
  Devices devices(2);
  InProcessJob job(JobOf(2, devices));
  ASSERT_TRUE(job.Start().ok());
  constexpr size_t kElements = 300;  // 5 chunks of 256 bytes (the last one short)
  // Worker 0's first copy back holds until the test lets it go; meanwhile
  // worker 1's last chunk fails to leave its device, which ends the job
  // while worker 0 still waits for that chunk's sum.
  Mutex mu;
  CondVar cv;
  bool copying = false, go = false;
  devices.of[0]->SetBeforeCopy([&](const InMemoryDevice::Copy& copy) -> Status {
    if (copy.way != InMemoryDevice::Way::kToDevice) return Status::Ok();
    MutexLock lock(mu);
    copying = true;
    cv.NotifyAll();
    cv.WaitUntil(mu, Deadline::AfterMs(20000), [&]() REQUIRES(mu) { return go; });
    return Status::Ok();
  });
  std::vector<uint8_t*> tensors = {devices.of[0]->Allocate(kElements * 4), devices.of[1]->Allocate(kElements * 4)};
  devices.of[1]->SetBeforeCopy([&](const InMemoryDevice::Copy& copy) -> Status {
    if (copy.way != InMemoryDevice::Way::kToHost || copy.device != tensors[1] + 4 * kPartition) return Status::Ok();
    MutexLock lock(mu);
    cv.WaitUntil(mu, Deadline::AfterMs(10000), [&]() REQUIRES(mu) { return copying; });
    return Internal("injected: the last chunk cannot leave the device");
  });
  std::vector<OpHandle> handles(2);
  ExpectAllOk(OnAllWorkers(job, [&](int rank) -> Status {
    Worker& w = job.worker(rank);
    SYNCLINE_ASSIGN_OR_RETURN(TensorId id, w.Declare("grad", DType::kFloat32, kElements));
    SYNCLINE_ASSIGN_OR_RETURN(handles[rank], w.PushPull(id, tensors[rank], false));
    return Status::Ok();
  }));
  // Failed by the abort, but a copy still writes the tensor: the wait holds, saying why.
  const Status held = handles[0].Wait(Deadline::AfterMs(3000));
  EXPECT_EQ(held.code(), StatusCode::kDeadlineExceeded) << held.ToString();
  EXPECT_NE(held.message().find("injected: the last chunk cannot leave the device"), std::string::npos)
      << held.ToString();
  {
    MutexLock lock(mu);
    go = true;
    cv.NotifyAll();
  }
  const Status ended = handles[0].Wait(Deadline::AfterMs(10000));
  EXPECT_FALSE(ended.ok());
  EXPECT_NE(ended.code(), StatusCode::kDeadlineExceeded) << ended.ToString();
  EXPECT_NE(ended.message().find("injected: the last chunk cannot leave the device"), std::string::npos)
      << ended.ToString();
  for (auto& device : devices.of) device->SetBeforeCopy(nullptr);
}

TEST(DeviceStages, ACompressedDeviceTensorIsEncodedFromItsStagingBufferAndDecodedBackToTheDevice) {
  constexpr size_t kElements = 300;  // 5 chunks
  RunOnDevices(2, [&](Worker& w, InMemoryDevice& device, int rank) -> Status {
    DeclareOptions fp16;
    fp16.compression = "fp16";  // small integers and their sums are exact in fp16
    SYNCLINE_ASSIGN_OR_RETURN(TensorId id, w.Declare("grad", DType::kFloat32, kElements, fp16));
    auto* tensor = reinterpret_cast<float*>(device.Allocate(kElements * 4));
    for (int round = 0; round < 2; ++round) {
      for (size_t i = 0; i < kElements; ++i) tensor[i] = float(ValueOf(rank, i, round));
      SYNCLINE_ASSIGN_OR_RETURN(OpHandle h, w.PushPull(id, tensor, false));
      SYNCLINE_RETURN_IF_ERROR(h.Wait(w.DefaultDeadline()));
      for (size_t i = 0; i < kElements; ++i)
        SYNCLINE_RETURN_IF_ERROR(ExpectNear(tensor[i], ValueOf(0, i, round) + ValueOf(1, i, round), 0,
                                            "round " + std::to_string(round) + " element " + std::to_string(i)));
    }
    return Status::Ok();
  }, 1, [](InProcessJob::Options& o) { o.min_compress_bytes = 0; });
}

TEST(DeviceStages, TwoPushPullsOfATensorInFlightAtOnceTakeTwoStagingBuffersAndKeepThem) {
  constexpr size_t kElements = 300;
  RunOnDevices(2, [&](Worker& w, InMemoryDevice& device, int rank) -> Status {
    SYNCLINE_ASSIGN_OR_RETURN(TensorId id, w.Declare("grad", DType::kFloat32, kElements));
    std::vector<float*> tensors;
    for (int t = 0; t < 2; ++t) tensors.push_back(reinterpret_cast<float*>(device.Allocate(kElements * 4)));
    // The first push_pull's copies wait until the second is posted: it is then in flight for sure.
    Mutex mu;
    CondVar cv;
    bool second_posted = false;
    const uint8_t* first = reinterpret_cast<uint8_t*>(tensors[0]);
    device.SetBeforeCopy([&](const InMemoryDevice::Copy& copy) -> Status {
      if (copy.way != InMemoryDevice::Way::kToHost || copy.device < first || copy.device >= first + kElements * 4)
        return Status::Ok();
      MutexLock lock(mu);
      if (cv.WaitUntil(mu, Deadline::AfterMs(10000), [&]() REQUIRES(mu) { return second_posted; })) return Status::Ok();
      return Internal("the second push_pull was never posted");
    });
    for (int pass = 0; pass < 3; ++pass) {
      std::vector<OpHandle> handles;
      for (int t = 0; t < 2; ++t) {
        std::fill(tensors[t], tensors[t] + kElements, float(rank + 1 + 10 * t));
        SYNCLINE_ASSIGN_OR_RETURN(OpHandle h, w.PushPull(id, tensors[t], false));
        handles.push_back(h);
      }
      {
        MutexLock lock(mu);
        second_posted = true;
        cv.NotifyAll();
      }
      for (int t = 0; t < 2; ++t) {
        SYNCLINE_RETURN_IF_ERROR(handles[t].Wait(w.DefaultDeadline()));
        for (size_t i = 0; i < kElements; ++i)
          SYNCLINE_RETURN_IF_ERROR(ExpectNear(tensors[t][i], 3 + 20 * t, 0, "element " + std::to_string(i)));
      }
    }
    device.SetBeforeCopy(nullptr);  // before `mu` goes
    if (device.pinned_allocations() != 2)
      return Internal(std::to_string(device.pinned_allocations()) + " pinned buffers for 2 push_pulls in flight");
    return Status::Ok();
  });
}

TEST(DeviceStages, ABroadcastOfADeviceTensorReachesEveryWorkersDevice) {
  constexpr size_t kElements = 700;
  RunOnDevices(3, [&](Worker& w, InMemoryDevice& device, int rank) -> Status {
    SYNCLINE_ASSIGN_OR_RETURN(TensorId id, w.Declare("weights", DType::kFloat64, kElements));
    auto* tensor = reinterpret_cast<double*>(device.Allocate(kElements * 8));
    for (size_t i = 0; i < kElements; ++i) tensor[i] = 100.0 * rank + double(i);
    SYNCLINE_RETURN_IF_ERROR(w.Broadcast(id, tensor, /*root=*/1));
    for (size_t i = 0; i < kElements; ++i)
      SYNCLINE_RETURN_IF_ERROR(ExpectNear(tensor[i], 100.0 + double(i), 0, "element " + std::to_string(i)));
    return Status::Ok();
  });
}

}  // namespace
}  // namespace syncline
