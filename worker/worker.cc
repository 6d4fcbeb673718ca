#include "worker/worker.h"

#include <cstring>
#include <limits>
#include <thread>

#include "common/log_limiter.h"
#include "common/logging.h"
#include "metrics/common_metrics.h"
#include "transport/factory.h"
#include "transport/wire.h"

namespace syncline {

Result<std::unique_ptr<Worker>> Worker::Create(const Settings& settings) {
  SYNCLINE_ASSIGN_OR_RETURN(auto endpoint, CreateEndpoint(settings.transport, NodeTransportOptions(settings)));
  SYNCLINE_ASSIGN_OR_RETURN(std::string address, ListenAddress(settings.transport, settings.host, settings.port));
  return Create(settings, std::move(endpoint), address);
}

Result<std::unique_ptr<Worker>> Worker::Create(const Settings& settings, std::unique_ptr<Endpoint> endpoint,
                                               const std::string& listen_address,
                                               const std::string& scheduler_address,
                                               std::unique_ptr<ChunkScheduler> chunk_scheduler,
                                               std::unique_ptr<DeviceMemory> device) {
  if (settings.role != Role::kWorker) return InvalidArgument("settings name the role " + std::string(RoleName(settings.role)) + ", not worker");
  SYNCLINE_RETURN_IF_ERROR(settings.Validate());
  if (auto form = compression::ParseSpec(settings.compression); !form.ok())
    return form.status().WithContext("SYNCLINE_COMPRESSION");
  if (!chunk_scheduler) chunk_scheduler = std::make_unique<SendAtOnce>();
  if (!device) device = CreateDeviceMemory();
  std::unique_ptr<Worker> worker(new Worker(settings, std::move(endpoint), scheduler_address,
                                            std::move(chunk_scheduler), std::move(device)));
  SYNCLINE_RETURN_IF_ERROR(worker->Start(listen_address));
  return worker;
}

Worker::Worker(const Settings& settings, std::unique_ptr<Endpoint> endpoint, const std::string& scheduler_address,
               std::unique_ptr<ChunkScheduler> chunk_scheduler, std::unique_ptr<DeviceMemory> device)
    : settings_(settings),
      push_pulls_done_(RoundsCompleted(*metrics_)),
      push_pulls_failed_(ErrorCounter(*metrics_, "push_pull_failed")),
      unexpected_messages_(ErrorCounter(*metrics_, "unexpected_message")),
      push_pull_seconds_(metrics_->AddHistogram("syncline_push_pull_seconds",
                                               "Time from a push_pull's start until its sum is back (or it failed)",
                                               ExponentialBuckets(1e-4, 4, 10))),
      runtime_(settings_, Role::kWorker, std::move(endpoint), *metrics_, scheduler_address),
      client_(runtime_.client()),
      kv_(&runtime_.endpoint(), &client_, settings_.request_timeout_ms,
          [this](uint64_t bytes) { chunk_scheduler_->Release(bytes); }, *metrics_),
      chunk_scheduler_(std::move(chunk_scheduler)),
      device_(std::move(device)),
      device_present_(device_->Present()) {
  chunk_scheduler_->Start([this](ChunkTask&& chunk) { kv_.Send(std::move(chunk)); });
  if (device_present_) {
    device_stages_ = std::make_unique<DeviceStages>(
        device_.get(),
        [this](ChunkTask&& chunk) {
          std::vector<ChunkTask> one;
          one.push_back(std::move(chunk));
          Dispatch(std::move(one));
        },
        [this](const Status& why) {
          if (client_.health().ok()) runtime_.Abort("worker " + std::to_string(rank()) + ": " + why.message());
        });
  }
  runtime_.AddCommonMetrics();
  AddSchedulerMetrics();
}

void Worker::AddSchedulerMetrics() {
  using Series = std::vector<std::pair<MetricLabels, double>>;
  metrics_->AddCollector("syncline_queued_chunks", "Chunks posted and waiting for the credit to go out",
                        [this] { return Series{{{}, double(chunk_scheduler_->load().queued_chunks)}}; });
  metrics_->AddCollector("syncline_credit_in_use_bytes", "Bytes of pushes sent and not yet acknowledged",
                        [this] { return Series{{{}, double(chunk_scheduler_->load().bytes_in_flight)}}; });
  metrics_->AddCollector("syncline_credit_bytes", "Bytes of pushes allowed in flight (0: unlimited)",
                        [this] { return Series{{{}, double(chunk_scheduler_->load().credit_bytes)}}; });
}

Operation::DoneCallback Worker::Measured(Operation::DoneCallback on_done) {
  // Holds the registry, not the worker: the instruments live as long as it.
  return [registry = metrics_, &seconds = push_pull_seconds_, &done = push_pulls_done_,
          &failed = push_pulls_failed_, start = std::chrono::steady_clock::now(), last_ended = last_ended_,
          on_done = std::move(on_done)](const Status& st) {
    (void)registry;
    last_ended->store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed);
    seconds.Observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    (st.ok() ? done : failed).Add();
    if (on_done) on_done(st);
  };
}

Worker::~Worker() {
  stall_watch_.reset();  // it looks at ops_ and sends through the endpoint
  std::string left_because;
  {
    MutexLock lock(mu_);
    leaving_ = true;  // from now on an abort starts no closer_: this destructor closes the endpoint
    if (!shutdown_) {
      shutdown_ = Aborted("worker destroyed without Shutdown");
      left_because = "stopped without Shutdown (its training process failed, returned early or could not start)";
    } else if (shutdown_gave_up_) {
      left_because = "stopped with push_pulls unfinished (its Shutdown gave up waiting for them)";
    }
  }
  // A worker whose process failed, returned early, could not finish
  // starting or left push_pulls unfinished ends the job now, naming itself,
  // rather than leaving the others to wait for the heartbeat timeout.
  if (!left_because.empty() && rank() >= 0 && client_.health().ok())
    runtime_.Abort("worker " + std::to_string(rank()) + " " + left_because);
  std::thread closer;
  {
    MutexLock lock(mu_);
    closer.swap(closer_);
  }
  if (closer.joinable()) closer.join();
  runtime_.Close();
  FailAll(Aborted("worker destroyed"));
  runtime_.StopServingMetrics();  // its collectors read the state below
}

Status Worker::Start(const std::string& listen_address) {
  SYNCLINE_ASSIGN_OR_RETURN(std::string address,
                            runtime_.Listen(listen_address, [this](Message&& m) { OnMessage(std::move(m)); }));
  client_.SetAbortHandler([this](const Status& st) {
    FailAll(st);
    // Close the endpoint so queued sends drop their references to callers'
    // tensors; not on this thread, which may be the endpoint's own.
    MutexLock lock(mu_);
    if (!leaving_ && !closer_.joinable()) closer_ = std::thread([this] { runtime_.Close(); });
  });
  SYNCLINE_RETURN_IF_ERROR(runtime_.Join(address));
  SYNCLINE_ASSIGN_OR_RETURN(local_group_, LocalGroupOf(client_.NodesOf(proto::WORKER), rank()));
  if (std::string d = LauncherDisagreement(local_group_, settings_.local_given, settings_.local_rank,
                                           settings_.local_size);
      !d.empty())
    SYNCLINE_LOG_WARN("{}", d);
  if (settings_.LocalReduceApplies() && local_group_.local_size > 1) SYNCLINE_RETURN_IF_ERROR(StartLocalReduce());
  if (settings_.trace) {
    timeline_ = std::make_unique<Timeline>(Timeline::Options{
        settings_.trace_dir + "/worker-" + std::to_string(rank()) + ".json", rank(), "worker " + std::to_string(rank()),
        settings_.trace_start_step, settings_.trace_end_step});
    kv_.SetTimeline(timeline_.get());
    if (local_reducer_) local_reducer_->SetTimeline(timeline_.get());
    if (device_stages_) device_stages_->SetTimeline(timeline_.get());
  }
  SYNCLINE_LOG_INFO("worker {} of {} joined; {} servers; local rank {} of {} on worker host {} of {}{}",
                    client_.my_rank(), settings_.num_workers, runtime_.peers().size(), local_group_.local_rank,
                    local_group_.local_size, local_group_.host, local_group_.num_hosts,
                    local_ ? " (local reduce)" : "");
  stall_watch_ = std::make_unique<StallWatch>(
      Millis(settings_.stall_timeout_ms), [this] { return StallSample(); },
      [this](const StallWatch::Report& report) { ReportStall(report); });
  stall_watch_->Start();
  return Status::Ok();
}

Result<OpHandle> Worker::PushPull(TensorId id, void* data, PushPullOptions options) {
  const bool on_device = device_present_ && device_->IsDevicePointer(data);
  if (options.output != nullptr && device_present_ && (on_device || device_->IsDevicePointer(options.output)))
    return InvalidArgument("push_pull into a separate output takes host memory only");
  SYNCLINE_ASSIGN_OR_RETURN(std::shared_ptr<Operation> op,
                            on_device ? PushPullDevice(id, data, std::move(options)) : PushPullHost(id, data, options));
  return OpHandle(std::move(op));
}

Result<std::shared_ptr<Operation>> Worker::PushPullHost(TensorId id, void* data, const PushPullOptions& options,
                                                        std::shared_ptr<const DeviceRoute> route) {
  SYNCLINE_RETURN_IF_ERROR(client_.health());
  std::shared_ptr<Operation> op;
  std::vector<ChunkTask> chunks;
  {
    MutexLock lock(mu_);
    if (shutdown_) return FailedPrecondition("push_pull after Shutdown");
    if (id >= tensors_.size() || tensors_[id].name.empty())
      return InvalidArgument("tensor id " + std::to_string(id) + " was not declared");
    Tensor& tensor = tensors_[id];
    Placement& placement = tensor.by_partition[tensor.partition];
    if (data == nullptr && !placement.chunks.empty())
      return InvalidArgument("push_pull of '" + tensor.name + "' with no data");
    if (placement.codec && options.whole_round)
      return InvalidArgument("tensor '" + tensor.name + "' is compressed (" + tensor.compression.Name() +
                             "): a broadcast through it would not be exact; broadcast a tensor declared uncompressed");
    const uint64_t round = placement.rounds++;
    std::vector<uint64_t> offsets, lengths;
    for (const auto& c : placement.chunks) {
      offsets.push_back(c.offset_bytes());
      lengths.push_back(c.length_bytes());
    }
    // A device tensor's chunks end once their sums are back on the device.
    Operation::Deliver deliver =
        route ? device_stages_->DeliverTo(route, options.priority, next_sequence_.load()) : nullptr;
    op = std::make_shared<Operation>(tensor.name, static_cast<uint8_t*>(data), offsets, lengths,
                                     Measured(options.on_done), static_cast<uint8_t*>(options.output), placement.codec,
                                     std::move(deliver));
    for (size_t i = 0; i < placement.chunks.size(); ++i) {
      const proto::ChunkPlacement& c = placement.chunks[i];
      chunks.push_back(ChunkTask{id, i, c.key(), c.server_id(), c.offset_bytes(), c.length_bytes(), round,
                                 tensor.dtype, options.average, options.priority, next_sequence_++, op,
                                 timeline_ ? Timeline::NowUs() : 0});
      chunks.back().whole_round = options.whole_round;
      if (placement.codec) chunks.back().wire_length = placement.codec->WireBytes(i);
      chunks.back().device = route;
    }
    std::erase_if(ops_, [](const auto& w) { return w.expired(); });
    ops_.push_back(op);
  }
  if (chunks.empty()) {
    op->RunDoneIfEnded();  // an empty tensor: nothing to sum
  } else if (route) {
    for (ChunkTask& chunk : chunks) device_stages_->CopyToHost(std::move(chunk));
  } else {
    Dispatch(std::move(chunks));
  }
  return op;
}

void Worker::Dispatch(std::vector<ChunkTask> chunks) {
  if (LocalReducer* local = local_.load()) {
    for (ChunkTask& chunk : chunks) local->Post(std::move(chunk));
  } else {
    chunk_scheduler_->Post(std::move(chunks));
  }
}

Status Worker::Broadcast(TensorId id, void* data, int root) {
  if (root < 0 || root >= settings_.num_workers)
    return InvalidArgument("broadcast root " + std::to_string(root) + " is not a worker rank");
  SYNCLINE_ASSIGN_OR_RETURN(uint64_t bytes, TensorBytes(id));
  {
    // Refused before anything is written into the caller's tensor.
    MutexLock lock(mu_);
    const Tensor& t = tensors_[id];
    if (t.compression.kind != compression::Kind::kNone)
      return InvalidArgument("tensor '" + t.name + "' is compressed (" + t.compression.Name() +
                             "): a broadcast through it would not be exact; broadcast a tensor declared uncompressed");
  }
  if (device_present_ && device_->IsDevicePointer(data)) return BroadcastDevice(id, data, root, bytes);
  // The sum of the root's tensor and everyone else's zeros is the root's tensor.
  if (rank() != root && bytes > 0) std::memset(data, 0, bytes);
  SYNCLINE_ASSIGN_OR_RETURN(std::shared_ptr<Operation> op, PushPullHost(id, data, BroadcastOptions()));
  return op->Wait(DefaultDeadline());
}

PushPullOptions Worker::BroadcastOptions() {
  // The caller blocks on it: ahead of every queued chunk. Summed whole in
  // async and ssp modes, whose servers otherwise add it to a running total.
  PushPullOptions urgent{false, std::numeric_limits<int64_t>::max(), nullptr};
  urgent.whole_round = true;
  return urgent;
}

Status Worker::Barrier() {
  // This worker's own push_pulls first: then, while it waits here, a round
  // that lacks its push can never complete, and the servers (told by the
  // scheduler) end the job naming it instead of waiting out the timeout.
  SYNCLINE_RETURN_IF_ERROR(WaitForOperationsInFlight());
  LocalReducer* local = local_.load();
  if (local) local->AnnounceBarrier();  // the same, for the other workers of this host
  SYNCLINE_RETURN_IF_ERROR(client_.Barrier(proto::WORKER, DefaultDeadline()));
  if (local) local->PassedBarrier();
  return Status::Ok();
}

Status Worker::WaitForOperationsInFlight() {
  std::vector<std::shared_ptr<Operation>> pending;
  {
    MutexLock lock(mu_);
    for (auto& w : ops_)
      if (auto op = w.lock()) pending.push_back(op);
  }
  Status result = Status::Ok();
  for (auto& op : pending) {
    Status st = op->Wait(DefaultDeadline());
    if (!st.ok() && result.ok()) result = st;
  }
  return result;
}

Status Worker::Shutdown() {
  {
    MutexLock lock(mu_);
    if (shutdown_) return *shutdown_;
    shutdown_ = Status::Ok();
  }
  Status result = WaitForOperationsInFlight();
  // A failed operation still leaves as finished; a stuck one does not (the
  // servers, and the other workers of its host, would take this worker for
  // one that finished short of its rounds).
  const bool stuck = result.code() == StatusCode::kDeadlineExceeded;
  if (stuck) {
    MutexLock lock(mu_);
    shutdown_gave_up_ = true;
  }
  // Health before the announcement: an abort it provokes is the peers' to report.
  if (result.ok()) result = client_.health();
  if (LocalReducer* local = local_.load()) {
    if (stuck)
      local->StopTakingParts();
    else
      local->AnnounceFinished();
  }
  if (timeline_) {
    Status written = timeline_->Write();
    if (written.ok())
      SYNCLINE_LOG_INFO("trace of steps {}-{} written to {}: {} spans", settings_.trace_start_step,
                        settings_.trace_end_step, timeline_->path(), timeline_->num_spans());
    else
      SYNCLINE_LOG_WARN("{}", written.message());
  }
  if (!stuck && client_.health().ok()) {  // asked again: an abort may have come meanwhile
    Status finished = runtime_.Finish();
    if (result.ok()) result = finished;
  }
  MutexLock lock(mu_);
  shutdown_ = result;
  return result;
}

void Worker::OnMessage(Message&& m) {
  if (client_.Handle(m) || kv_.Handle(m)) return;
  if (LocalReducer* local = local_.load(); local && local->Handle(m)) return;
  unexpected_messages_.Add();
  SYNCLINE_LOG_WARN_LIMITED("ignoring {} from node {}", proto::Op_Name(m.header.op()), m.header.sender());
}

void Worker::FailAll(const Status& status) {
  if (device_stages_) device_stages_->Stop(status);
  chunk_scheduler_->Stop(status);  // queued chunks fail; nothing more is admitted
  kv_.FailAll(status);
  if (LocalReducer* local = local_.load()) local->FailAll(status);
}

}  // namespace syncline
