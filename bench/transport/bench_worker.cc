// syncline-bench-worker: one worker of the transport benchmark. Run under
// pslaunch (or pslaunch --role worker). For each tensor size it push_pulls
// --in-flight fp32 tensors of that size at once (1 by default: one tensor,
// waited for before the next iteration), repeatedly, and prints a JSON line
// per size:
//   {"rank":0,"workers":2,"bytes":4194304,"in_flight":1,"iterations":40,
//    "median_s":0.0123,"goodput_MBps":682.1,"round_trip_us":12300}
// goodput counts every tensor's bytes once each way (push + pull) per second:
// 2 * in_flight * bytes / median iteration time; round_trip_us is the median
// iteration. Sums are checked on every iteration.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sstream>

#include "common/node_main.h"
#include "proxy/scheduled_worker.h"

namespace syncline::bench {
namespace {

struct Options {
  std::string sizes = "4096,65536,1048576,4194304,16777216,67108864";
  double seconds_per_size = 2.0;
  int min_iterations = 5;
  int max_iterations = 2000;
  int warmup = 2;
  int in_flight = 1;  // tensors of one size push_pulled at once, like a model's gradients
  bool separate_output = false;  // sums into a second buffer, the input only read (as for TensorFlow)
};

Result<std::vector<uint64_t>> ParseSizes(const std::string& text) {
  std::vector<uint64_t> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    try {
      out.push_back(std::stoull(item));
    } catch (...) {
      return InvalidArgument("size '" + item + "' is not a byte count");
    }
    if (out.back() < 4 || out.back() % 4 != 0) return InvalidArgument("sizes must be positive multiples of 4 bytes");
  }
  return out;
}

Status Run(const Settings& settings, const Options& options) {
  SYNCLINE_ASSIGN_OR_RETURN(std::vector<uint64_t> sizes, ParseSizes(options.sizes));
  // Declared before the worker so it outlives it (see Operation::Wait).
  std::vector<float> data, sums;
  SYNCLINE_ASSIGN_OR_RETURN(std::unique_ptr<Worker> worker, CreateScheduledWorker(settings));
  const int workers = worker->num_workers();
  for (uint64_t bytes : sizes) {
    const uint64_t n = bytes / 4;
    std::vector<TensorId> ids;
    for (int t = 0; t < options.in_flight; ++t) {
      SYNCLINE_ASSIGN_OR_RETURN(
          TensorId id, worker->Declare("bench." + std::to_string(bytes) + "." + std::to_string(t), DType::kFloat32, n));
      ids.push_back(id);
    }
    data.assign(n * ids.size(), 0.0f);
    sums.assign(options.separate_output ? data.size() : 0, 0.0f);
    float* const result = options.separate_output ? sums.data() : data.data();
    std::vector<double> times;
    // Every worker runs the same number of iterations: rank 0 decides by
    // time and broadcasts the count.
    const auto budget_start = std::chrono::steady_clock::now();
    for (int it = 0;; ++it) {
      std::fill(data.begin(), data.end(), 1.0f);
      const auto start = std::chrono::steady_clock::now();
      std::vector<OpHandle> handles;
      for (size_t t = 0; t < ids.size(); ++t) {
        PushPullOptions push_options;
        if (options.separate_output) push_options.output = sums.data() + t * n;
        SYNCLINE_ASSIGN_OR_RETURN(OpHandle h, worker->PushPull(ids[t], data.data() + t * n, std::move(push_options)));
        handles.push_back(std::move(h));
      }
      for (OpHandle& h : handles) SYNCLINE_RETURN_IF_ERROR(h.Wait(worker->DefaultDeadline()));
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      for (size_t t = 0; t < ids.size(); ++t) {
        if (result[t * n] != static_cast<float>(workers) || result[t * n + n - 1] != static_cast<float>(workers))
          return Internal("wrong sum at " + std::to_string(bytes) + " bytes");
      }
      if (it >= options.warmup) times.push_back(s);
      // Decide whether to go on together: rank 0's clock rules.
      const double spent = std::chrono::duration<double>(std::chrono::steady_clock::now() - budget_start).count();
      float go = (worker->rank() == 0 && static_cast<int>(times.size()) < options.max_iterations &&
                  (static_cast<int>(times.size()) < options.min_iterations || spent < options.seconds_per_size))
                     ? 1.0f
                     : 0.0f;
      SYNCLINE_ASSIGN_OR_RETURN(TensorId flag_id, worker->Declare("bench.go", DType::kFloat32, 1));
      SYNCLINE_RETURN_IF_ERROR(worker->Broadcast(flag_id, &go, 0));
      if (go == 0.0f) break;
    }
    std::sort(times.begin(), times.end());
    const double median = times[times.size() / 2];
    std::printf(
        "{\"rank\":%d,\"workers\":%d,\"bytes\":%llu,\"in_flight\":%zu,\"iterations\":%zu,\"median_s\":%.6g,"
        "\"goodput_MBps\":%.1f,\"round_trip_us\":%.1f}\n",
        worker->rank(), workers, static_cast<unsigned long long>(bytes), ids.size(), times.size(), median,
        2.0 * bytes * ids.size() / median / 1e6, median * 1e6);
    std::fflush(stdout);
  }
  return worker->Shutdown();
}

}  // namespace
}  // namespace syncline::bench

int main(int argc, char** argv) {
  syncline::bench::Options options;
  CLI::App app{"One worker of the Syncline transport benchmark."};
  app.add_option("--sizes", options.sizes, "comma-separated tensor sizes in bytes");
  app.add_option("--seconds", options.seconds_per_size, "time spent per size (rank 0's clock)");
  app.add_option("--min-iterations", options.min_iterations);
  app.add_option("--max-iterations", options.max_iterations);
  app.add_option("--warmup", options.warmup);
  app.add_option("--in-flight", options.in_flight, "tensors of each size push_pulled at once")
      ->check(CLI::Range(1, 1024));
  app.add_flag("--separate-output", options.separate_output,
               "sum into a second buffer and only read the input (what a framework with immutable tensors needs)");
  CLI11_PARSE(app, argc, argv);
  return syncline::RunNodeMain(
      syncline::Role::kWorker,
      [&](const syncline::Settings& s, syncline::SignalWatcher&) { return syncline::bench::Run(s, options); },
      syncline::StopSignals::kExit);
}
