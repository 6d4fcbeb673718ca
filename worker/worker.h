// Worker: the Syncline worker runtime a training process links (libsyncline).
// It joins the job, declares tensors with ids agreed by every worker, and
// sums tensors across workers through the servers: push_pull cuts a tensor
// into chunks (partition_bytes), posts them to its ChunkScheduler, which
// admits them to the network (all at once by default; by priority under a
// credit with proxy/credit_scheduler.h), and writes each chunk's sum back in
// place.
//
//   auto worker = Worker::Create(settings).value();
//   TensorId w = worker->Declare("layer1.weight.grad", DType::kFloat32, n).value();
//   OpHandle h = worker->PushPull(w, grad.data(), /*average=*/true).value();
//   ... compute ...
//   h.Wait(Deadline::AfterMs(60000));
//   worker->Shutdown();
//
// Thread-safety: all methods may be called from any thread. Every worker
// must declare the same tensors and call PushPull on a tensor the same number
// of times (the n-th calls of all workers are summed together).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <optional>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/dtype.h"
#include "common/mutex.h"
#include "common/settings.h"
#include "common/timeline.h"
#include "control/client.h"
#include "metrics/registry.h"
#include "node/node_runtime.h"
#include "transport/transport.h"
#include "worker/chunk.h"
#include "worker/chunk_codec.h"
#include "worker/device_stages.h"
#include "worker/gpu/device_memory.h"
#include "worker/kv_client.h"
#include "worker/local_reduce.h"
#include "control/local_group.h"
#include "worker/operation.h"
#include "worker/stall_watch.h"

namespace syncline {

struct PushPullOptions {
  bool average = false;
  // Larger is more urgent; ties go to the earlier push_pull.
  int64_t priority = 0;
  // Runs once when this push_pull ends (after the GPU copy-back, for device
  // tensors), on a Syncline thread: quick, non-blocking work only.
  Operation::DoneCallback on_done;
  // Where the sum goes, when not into the pushed memory itself (host memory
  // of the tensor's size; the pushed memory is then only read). Spares a
  // caller with an immutable input (a TensorFlow tensor) a copy per call.
  void* output = nullptr;
  // Async and ssp modes: the servers sum this round as in bsp (every worker's
  // push) instead of adding it to their running value. For broadcasts.
  bool whole_round = false;
  // A device tensor: the framework's stream (a cudaStream_t) whose work
  // produces it; its copies to the host wait for what is queued there now.
  // Null: the device's default stream.
  void* stream = nullptr;
};

struct DeclareOptions {
  // How the tensor's chunks travel (compression/compressor.h ParseSpec:
  // "none", "int8", "topk:0.01", ...); unset: the job's setting
  // (SYNCLINE_COMPRESSION), which applies to fp32 tensors only. Either way
  // a tensor below SYNCLINE_MIN_COMPRESS_BYTES travels uncompressed.
  std::optional<std::string> compression;
};

class Worker {
 public:
  // Listens, registers with the scheduler and waits for the job to start.
  static Result<std::unique_ptr<Worker>> Create(const Settings& settings);
  // Same, with an endpoint of the caller's choosing (tests: loopback, faults).
  // `chunk_scheduler` decides when chunks go out (null: SendAtOnce);
  // `device` is the accelerator's memory (null: the build's, CUDA's where
  // it has it; tests: an in-memory device).
  static Result<std::unique_ptr<Worker>> Create(const Settings& settings, std::unique_ptr<Endpoint> endpoint,
                                                const std::string& listen_address,
                                                const std::string& scheduler_address = "",
                                                std::unique_ptr<ChunkScheduler> chunk_scheduler = nullptr,
                                                std::unique_ptr<DeviceMemory> device = nullptr);
  // Shuts down (if not done yet) without waiting long.
  ~Worker();

  int rank() const { return client_.my_rank(); }
  int num_workers() const { return settings_.num_workers; }
  // The job's workers on this worker's host, from registration.
  const LocalGroup& local_group() const { return local_group_; }
  // This worker's place among its host's workers as the framework sees it
  // (local_rank() picks the GPU): the launcher's SYNCLINE_LOCAL_RANK/_SIZE
  // where given, else registration's.
  int local_rank() const { return settings_.local_given ? settings_.local_rank : local_group_.local_rank; }
  int local_size() const { return settings_.local_given ? settings_.local_size : local_group_.local_size; }
  const Settings& settings() const { return settings_; }

  // Declares a tensor of `num_elements` elements of `dtype`. Every worker
  // declares it alike; returns when all have. A different declaration by
  // another worker aborts the job with an error naming the tensor.
  // A compression the dtype cannot take, or one in ssp or async mode, is an
  // InvalidArgument saying why.
  // Whether a tensor declared with these would travel compressed (the
  // compression Declare chooses is not none); an invalid choice is an error.
  Result<bool> WouldCompress(DType dtype, uint64_t num_elements, const DeclareOptions& options = {}) const;
  Result<TensorId> Declare(const std::string& name, DType dtype, uint64_t num_elements,
                           const DeclareOptions& options = {});
  // Starts summing the declared tensor `id` at `data` across all workers, in
  // place. With `average`, the sum is divided by the number of workers.
  // `data` must stay valid and untouched until the handle's Wait returns.
  // `data` may be device memory (CUDA builds): each chunk is copied to a
  // pinned host buffer of the tensor's, after the work queued on
  // `options.stream`, and its sum back, before the push_pull ends
  // (worker/device_stages.h).
  Result<OpHandle> PushPull(TensorId id, void* data, bool average) {
    return PushPull(id, data, PushPullOptions{average, 0, nullptr});
  }
  Result<OpHandle> PushPull(TensorId id, void* data, PushPullOptions options);
  // Cuts tensor `id` into chunks of `partition_bytes` (on the wire: a
  // compressed tensor's chunks hold more values, see ChunkBytes) from its next
  // push_pull on (new keys on the servers; push_pulls in flight keep theirs).
  // Every worker must call it between the same two push_pulls of the tensor
  // (the tuner switches all workers at one step); the first switch to a size
  // waits until every worker declared it. Sums stay exact across switches.
  Status Repartition(TensorId id, uint64_t partition_bytes);
  // The ids of every declared tensor, and a declared tensor's size.
  std::vector<TensorId> TensorIds() const;
  Result<uint64_t> TensorBytes(TensorId id);
  // Copies `data` of worker `root` into `data` of every worker (blocking).
  // In async and ssp modes too (its rounds are summed whole). Not on a
  // compressed tensor (the copy would not be exact).
  Status Broadcast(TensorId id, void* data, int root);
  // Waits for this worker's operations in flight, then until every worker
  // reached this barrier.
  Status Barrier();
  // Waits for operations in flight, then tells the scheduler this worker is
  // done, also when one of them failed (the result is then that failure);
  // not when the job is over already or one is still stuck past the request
  // deadline. The result is the job's health when this worker finished: an
  // abort after that (one its finish provokes, say) is not its result. Later
  // calls return the first result.
  Status Shutdown();

  // The trace of this worker (settings: trace), or null when tracing is off.
  // Framework glue calls BeginStep at each training step and reports its
  // compute as spans; Shutdown writes the file.
  Timeline* timeline() { return timeline_.get(); }
  // Where this worker's chunks wait to be admitted (the tuner sets its credit).
  ChunkScheduler* chunk_scheduler() { return chunk_scheduler_.get(); }

  // What this worker counts (served over HTTP when settings.metrics_port is set).
  const MetricsRegistry& metrics() const { return *metrics_; }
  // The same registry, for a layer above to count in (the proxy's tuner).
  MetricsRegistry& metrics() { return *metrics_; }

  // Traffic through shared memory (zeros when it is off or unused).
  ShmEndpoint::ShmStats shm_stats() const {
    return runtime_.shm() ? runtime_.shm()->shm_stats() : ShmEndpoint::ShmStats{};
  }

  // Deadline for one blocking call (settings: request_timeout_ms).
  Deadline DefaultDeadline() const { return Deadline::AfterMs(settings_.request_timeout_ms); }

 private:
  // A tensor's chunks under one partition size, with their own keys.
  struct Placement {
    std::vector<proto::ChunkPlacement> chunks;
    uint64_t rounds = 0;  // push_pulls started on these keys so far
    std::shared_ptr<ChunkCodec> codec;  // compressed tensors: how these chunks travel
  };
  struct Tensor {
    std::string name;
    DType dtype;
    uint64_t num_elements = 0;
    uint64_t partition = 0;                      // its chunks' bytes push_pull uses now (ChunkBytes)
    std::map<uint64_t, Placement> by_partition;  // every one used so far, by chunk bytes
    compression::Spec compression;               // kNone: uncompressed
    std::shared_ptr<Residual> residual;          // compressed: what its pushes have not carried yet
    std::shared_ptr<StagingBuffers> staging;     // pushed from a device: its pinned host buffers
  };
  // The compression a declaration of `name` ends up with (see Declare).
  Result<compression::Spec> ChooseCompression(const std::string& name, DType dtype, uint64_t num_elements,
                                              const DeclareOptions& options) const;
  // The bytes of a tensor's chunks for `partition_bytes` (more for a
  // compressed tensor: its chunks take partition_bytes on the wire).
  uint64_t ChunkBytes(const compression::Spec& form, uint64_t partition_bytes) const;
  // Records the scheduler's placement of a tensor under one partition size.
  void SetPlacement(Tensor& t, uint64_t partition, const proto::DeclareReply& reply) REQUIRES(mu_);
  Worker(const Settings& settings, std::unique_ptr<Endpoint> endpoint, const std::string& scheduler_address,
         std::unique_ptr<ChunkScheduler> chunk_scheduler, std::unique_ptr<DeviceMemory> device);
  // PushPull of host memory at `data`; with `route`, the staging buffer of
  // a device tensor (route->host == data), whose chunks start on the device.
  Result<std::shared_ptr<Operation>> PushPullHost(TensorId id, void* data, const PushPullOptions& options,
                                                  std::shared_ptr<const DeviceRoute> route = nullptr);
  // PushPull of device memory (worker_device.cc).
  Result<std::shared_ptr<Operation>> PushPullDevice(TensorId id, void* data, PushPullOptions options);
  // How a broadcast is posted: a sum of the root's tensor and zeros.
  static PushPullOptions BroadcastOptions();
  // Broadcast of device memory, staged whole (worker_device.cc).
  Status BroadcastDevice(TensorId id, void* data, int root, uint64_t bytes);
  // Hands chunks on the host to their next stage: local reduce where this
  // host has other workers, else admission.
  void Dispatch(std::vector<ChunkTask> chunks);
  Status Start(const std::string& listen_address);
  void OnMessage(Message&& m);
  void FailAll(const Status& status);
  // Waits (up to the request timeout) for every operation in flight; the first failure.
  Status WaitForOperationsInFlight();

  // Wraps the caller's callback: counts the push_pull and its latency, and
  // notes when it ended (for the stall watch).
  Operation::DoneCallback Measured(Operation::DoneCallback on_done);
  // The stall watch's look at this worker, and its report to the scheduler
  // (worker_stalls.cc).
  StallWatch::Sample StallSample() const;
  void ReportStall(const StallWatch::Report& report);
  void AddSchedulerMetrics();

  const Settings settings_;
  // Before everything that registers in it. Shared with each push_pull's done
  // callback, which may run after the worker is gone (a failed push_pull
  // ends once the transport releases its memory).
  const std::shared_ptr<MetricsRegistry> metrics_ = std::make_shared<MetricsRegistry>();
  Counter& push_pulls_done_;
  Counter& push_pulls_failed_;
  Counter& unexpected_messages_;
  Histogram& push_pull_seconds_;
  // The endpoint stack, the scheduler client and the common metrics; its
  // exporter stops at the end of the destructor, before the rest goes.
  NodeRuntime runtime_;
  SchedulerClient& client_;  // runtime_'s
  std::unique_ptr<Timeline> timeline_;  // set in Start, before any push_pull
  KvClient kv_;
  std::unique_ptr<ChunkScheduler> chunk_scheduler_;  // after kv_: stops sending before kv_ goes
  std::atomic<uint64_t> next_sequence_{0};
  const std::unique_ptr<DeviceMemory> device_;
  const bool device_present_;  // pointers may be device memory
  // When a push_pull last ended (Clock ticks); shared with the done
  // callbacks, which may outlive the worker.
  const std::shared_ptr<std::atomic<Clock::rep>> last_ended_ =
      std::make_shared<std::atomic<Clock::rep>>(Clock::now().time_since_epoch().count());
  std::unique_ptr<StallWatch> stall_watch_;  // from Start; stopped first in the destructor
  LocalGroup local_group_;  // from Start, then only read

  mutable Mutex mu_;
  std::vector<Tensor> tensors_ GUARDED_BY(mu_);  // index = TensorId
  std::map<std::string, TensorId> by_name_ GUARDED_BY(mu_);
  std::vector<std::weak_ptr<Operation>> ops_ GUARDED_BY(mu_);  // to wait for at shutdown
  std::optional<Status> shutdown_ GUARDED_BY(mu_);
  // Shutdown gave up on push_pulls in flight: the job cannot finish without
  // them, so the destructor ends it, naming this worker.
  bool shutdown_gave_up_ GUARDED_BY(mu_) = false;
  std::thread closer_ GUARDED_BY(mu_);  // closes the endpoint after an abort
  bool leaving_ GUARDED_BY(mu_) = false;  // the destructor has begun; it closes the endpoint itself

  // Sets up local reduce with the other workers of this host (from Start,
  // where settings and the group call for it).
  Status StartLocalReduce();
  // Last: destroyed first, its thread stopped while what it feeds is alive.
  // Set once in Start (before any push_pull); local_ reads it lock-free
  // (null: every chunk goes to the chunk scheduler).
  std::unique_ptr<LocalReducer> local_reducer_;
  std::atomic<LocalReducer*> local_{nullptr};
  // Only where a device is present; destroyed before what it feeds (local
  // reduce, admission).
  std::unique_ptr<DeviceStages> device_stages_;
};

}  // namespace syncline
