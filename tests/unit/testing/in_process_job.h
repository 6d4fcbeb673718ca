// InProcessJob: a whole Syncline job — scheduler, M servers, N workers — as
// threads of one test process, over the in-process loopback network or over
// ZeroMQ on 127.0.0.1. Tests drive the workers and can kill nodes.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/logging.h"
#include "common/settings.h"
#include "scheduler/scheduler.h"
#include "server/server.h"
#include "transport/factory.h"
#include "transport/loopback/loopback_network.h"
#include "worker/worker.h"

namespace syncline::testing {

class InProcessJob {
 public:
  struct Options {
    int workers = 3;
    int servers = 2;
    std::string transport = "loopback";  // or "tcp", "ipc"
    bool async = false;
    std::string sync_mode = "bsp";  // or "ssp" (async: the flag above)
    int ssp_staleness = 2;
    bool deterministic = false;
    uint64_t partition_bytes = 4096;
    int heartbeat_interval_ms = 50;
    int heartbeat_timeout_ms = 2000;
    int request_timeout_ms = 20000;
    int stall_timeout_ms = 60000;
    int external_workers = 0;  // of `workers`, how many the test starts itself
    bool shm = false;          // payloads through shared memory (all nodes share this process)
    uint64_t server_reply_window_bytes = Settings{}.server_reply_window_bytes;
    std::string trace_dir;     // set: workers trace steps 0-1 into it
    std::string compression = "none";  // SYNCLINE_COMPRESSION
    uint64_t min_compress_bytes = 0;   // SYNCLINE_MIN_COMPRESS_BYTES (tests: every tensor)
    // Each worker's SYNCLINE_HOST_LABEL, given its rank (unset: none): emulated hosts.
    std::function<std::string(int rank)> host_label;
    bool local_reduce = true;  // SYNCLINE_LOCAL_REDUCE (workers of one host sum first)
    // Makes each worker's chunk scheduler, given its rank (unset: SendAtOnce).
    std::function<std::unique_ptr<ChunkScheduler>(int rank)> chunk_scheduler;
    // Makes each worker's device memory, given its rank (unset: the build's).
    std::function<std::unique_ptr<DeviceMemory>(int rank)> device;
  };

  explicit InProcessJob(Options options) : options_(std::move(options)) {}
  ~InProcessJob() {
    workers_.clear();
    if (scheduler_) scheduler_->RequestAbort("test over");
    for (auto& s : servers_) s->RequestStop("test over");
    for (auto& t : threads_) t.join();
  }

  Settings BaseSettings(Role role) const {
    Settings s;
    s.role = role;
    s.num_workers = options_.workers;
    s.num_servers = options_.servers;
    s.async = options_.async;
    s.sync_mode = options_.async ? "async" : options_.sync_mode;
    s.ssp_staleness = options_.ssp_staleness;
    s.deterministic = options_.deterministic;
    s.partition_bytes = options_.partition_bytes;
    s.heartbeat_interval_ms = options_.heartbeat_interval_ms;
    s.heartbeat_timeout_ms = options_.heartbeat_timeout_ms;
    s.request_timeout_ms = options_.request_timeout_ms;
    s.stall_timeout_ms = options_.stall_timeout_ms;
    s.server_reply_window_bytes = options_.server_reply_window_bytes;
    s.startup_timeout_ms = 20000;
    s.job_token = "test-token";
    s.shm = options_.shm;
    s.server_threads = 2;
    s.sum_threads = 1;
    s.transport = options_.transport == "loopback" ? "tcp" : options_.transport;
    s.trace = !options_.trace_dir.empty();
    s.trace_dir = options_.trace_dir;
    s.trace_start_step = 0;
    s.trace_end_step = 1;
    s.compression = options_.compression;
    s.min_compress_bytes = options_.min_compress_bytes;
    s.local_reduce = options_.local_reduce;
    return s;
  }

  // Starts the scheduler and servers, then creates the workers (which join concurrently).
  Status Start() {
    // Install the process's logger before any node thread logs: a later
    // first InitLogging (syncline_init's) would replace the default logger under them.
    InitLogging("in-process job", BaseSettings(Role::kScheduler).log_level);
    Settings sched = BaseSettings(Role::kScheduler);
    scheduler_ = std::make_unique<Scheduler>(sched, NewEndpoint());
    auto address = scheduler_->Listen(Address("scheduler"));
    if (!address.ok()) return address.status();
    scheduler_address_ = *address;
    threads_.emplace_back([this] { scheduler_status_ = scheduler_->Run(); });
    server_status_.resize(options_.servers);
    // Every server exists before any runs: a running server's thread reads
    // servers_, which must not grow (and move) under it.
    for (int i = 0; i < options_.servers; ++i) {
      servers_.push_back(std::make_unique<Server>(BaseSettings(Role::kServer), NewEndpoint(),
                                                  Address("server-" + std::to_string(i)), scheduler_address_));
    }
    for (int i = 0; i < options_.servers; ++i) {
      threads_.emplace_back([this, i] { server_status_[i] = servers_[i]->Run(); });
    }
    std::vector<std::future<Result<std::unique_ptr<Worker>>>> joining;
    for (int r = options_.external_workers; r < options_.workers; ++r) {
      joining.push_back(std::async(std::launch::async, [this, r] {
        Settings s = BaseSettings(Role::kWorker);
        s.worker_rank = r;
        if (options_.host_label) s.host_label = options_.host_label(r);
        return Worker::Create(s, NewEndpoint(), Address("worker-" + std::to_string(r)), scheduler_address_,
                              options_.chunk_scheduler ? options_.chunk_scheduler(r) : nullptr,
                              options_.device ? options_.device(r) : nullptr);
      }));
    }
    Status first_error;
    for (auto& j : joining) {
      auto w = j.get();
      if (!w.ok() && first_error.ok()) first_error = w.status();
      workers_.push_back(w.ok() ? std::move(w).value() : nullptr);
    }
    return first_error;
  }

  Worker& worker(int rank) { return *workers_[rank - options_.external_workers]; }
  const std::string& scheduler_address() const { return scheduler_address_; }
  int num_workers() const { return options_.workers; }
  LoopbackNetwork& network() { return network_; }

  // Shuts every worker down and waits for the scheduler and servers to end.
  Status Finish() {
    std::vector<std::future<Status>> done;
    for (auto& w : workers_)
      if (w) done.push_back(std::async(std::launch::async, [&w] { return w->Shutdown(); }));
    Status result;
    for (auto& d : done) {
      Status st = d.get();
      if (!st.ok() && result.ok()) result = st;
    }
    for (auto& t : threads_) t.join();
    threads_.clear();
    if (result.ok()) result = scheduler_status_;
    for (auto& st : server_status_)
      if (result.ok()) result = st;
    return result;
  }

  // Keeps `memory` (a tensor whose push_pull Wait gave up on) alive until the
  // job is destroyed, after its workers: until then the transport may still
  // write it (Operation::Wait). Any thread.
  template <typename T>
  void KeepUntilDestroyed(T&& memory) {
    std::lock_guard<std::mutex> lock(kept_mu_);
    kept_.push_back(std::make_shared<std::decay_t<T>>(std::forward<T>(memory)));
  }

  // Destroys worker `rank` without Shutdown, as a failing training process would.
  void DestroyWorker(int rank) { workers_[rank].reset(); }

  // Joins the scheduler and server threads (after an abort, say).
  void JoinAll() {
    for (auto& t : threads_) t.join();
    threads_.clear();
  }
  Status scheduler_status() const { return scheduler_status_; }
  Status server_status(int i) const { return server_status_[i]; }

 private:
  std::unique_ptr<Endpoint> NewEndpoint() {
    if (options_.transport == "loopback") return network_.CreateEndpoint();
    return std::move(CreateEndpoint(options_.transport).value());
  }
  std::string Address(const std::string& name) {
    if (options_.transport == "loopback") return "loop://" + name;
    return ListenAddress(options_.transport, "127.0.0.1", 0).value();
  }

  Options options_;
  std::mutex kept_mu_;
  std::vector<std::shared_ptr<void>> kept_;  // before workers_: freed after them
  LoopbackNetwork network_;
  std::string scheduler_address_;
  std::unique_ptr<Scheduler> scheduler_;
  std::vector<std::unique_ptr<Server>> servers_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::vector<std::thread> threads_;
  Status scheduler_status_;
  std::vector<Status> server_status_;
};

// Runs `body(rank)` on every worker of `job` at once; their statuses by rank.
inline std::vector<Status> OnAllWorkers(InProcessJob& job, const std::function<Status(int)>& body) {
  std::vector<std::future<Status>> futures;
  for (int r = 0; r < job.num_workers(); ++r) futures.push_back(std::async(std::launch::async, body, r));
  std::vector<Status> out;
  for (auto& f : futures) out.push_back(f.get());
  return out;
}

// A test expectation that every worker's status is OK, naming those that are not.
inline void ExpectAllOk(const std::vector<Status>& statuses) {
  for (size_t i = 0; i < statuses.size(); ++i)
    EXPECT_TRUE(statuses[i].ok()) << "worker " << i << ": " << statuses[i].ToString();
}

}  // namespace syncline::testing
