// syncline-example-training: plays one worker of a synthetic training loop.
// Run it under pslaunch (which sets the environment):
//   pslaunch --workers 3 --servers 2 -- syncline-example-training --rounds 100
// Every round it "computes" a gradient for each tensor, push_pulls them all
// at once, checks each pulled result against the exact expected sum, and
// prints the round's time and push+pull goodput. Exits non-zero on any
// wrong sum or error.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <sstream>
#include <thread>

#include "common/node_main.h"
#include "examples/synthetic_values.h"
#include "proxy/scheduled_worker.h"

namespace syncline::example {
namespace {

struct TensorPlan {
  std::string name;
  DType dtype;
  uint64_t elements;
};

struct Options {
  uint64_t rounds = 100;
  std::string tensors = "fp32:1,fp32:1000,fp16:65537,bf16:100000,fp64:30000,fp32:1048576";
  std::string values = "exact";
  bool quiet = false;
  double linger_s = 0;
};

Result<std::vector<TensorPlan>> ParseTensors(const std::string& list) {
  std::vector<TensorPlan> out;
  std::stringstream in(list);
  std::string item;
  while (std::getline(in, item, ',')) {
    auto colon = item.find(':');
    if (colon == std::string::npos) return InvalidArgument("tensor '" + item + "' is not DTYPE:ELEMENTS");
    SYNCLINE_ASSIGN_OR_RETURN(DType dtype, ParseDType(item.substr(0, colon)));
    uint64_t elements = 0;
    try {
      elements = std::stoull(item.substr(colon + 1));
    } catch (...) {
      return InvalidArgument("tensor '" + item + "' has no element count");
    }
    out.push_back({"tensor" + std::to_string(out.size()), dtype, elements});
  }
  if (out.empty()) return InvalidArgument("no tensors given");
  return out;
}

// FNV-1a over every pulled byte: equal digests mean bit-identical results.
struct Digest {
  uint64_t h = 1469598103934665603ull;
  void Add(const uint8_t* p, size_t n) {
    for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  }
};

Status Train(const Settings& settings, const Options& options) {
  SYNCLINE_ASSIGN_OR_RETURN(std::vector<TensorPlan> plan, ParseTensors(options.tensors));
  const ValueKind kind = options.values == "random" ? ValueKind::kRandom : ValueKind::kExact;
  // The tensors outlive the worker: a failed operation may leave them in the
  // transport's hands until the worker is destroyed.
  std::vector<std::vector<uint8_t>> grads;
  uint64_t bytes_per_round = 0;
  for (const auto& t : plan) {
    grads.emplace_back(t.elements * DTypeSize(t.dtype));
    bytes_per_round += grads.back().size();
  }
  SYNCLINE_ASSIGN_OR_RETURN(std::unique_ptr<Worker> worker, CreateScheduledWorker(settings));
  const int rank = worker->rank(), workers = worker->num_workers();

  std::vector<TensorId> ids;
  for (const auto& t : plan) {
    SYNCLINE_ASSIGN_OR_RETURN(TensorId id, worker->Declare(t.name, t.dtype, t.elements));
    ids.push_back(id);
  }
  // Where registration put this worker: its host among the job's worker
  // hosts, and its local rank there (the hierarchical reduce's group).
  const LocalGroup& group = worker->local_group();
  std::printf("rank %d of %d (host %d of %d, local rank %d of %d): %zu tensors, %.2f MiB per round, %llu rounds%s\n",
              rank, workers, group.host, group.num_hosts, group.local_rank, group.local_size, plan.size(),
              bytes_per_round / 1048576.0, static_cast<unsigned long long>(options.rounds),
              settings.async ? " (async: final value checked)" : "");
  std::fflush(stdout);

  Digest digest;
  double comm_seconds = 0;
  for (uint64_t round = 0; round < options.rounds; ++round) {
    for (size_t t = 0; t < plan.size(); ++t)
      FillGradient(kind, plan[t].dtype, plan[t].elements, rank, round, static_cast<int>(t), grads[t].data());
    const auto start = std::chrono::steady_clock::now();
    std::vector<OpHandle> handles;
    for (size_t t = 0; t < plan.size(); ++t) {
      SYNCLINE_ASSIGN_OR_RETURN(OpHandle h, worker->PushPull(ids[t], grads[t].data(), /*average=*/false));
      handles.push_back(h);
    }
    for (size_t t = 0; t < plan.size(); ++t)
      SYNCLINE_RETURN_IF_ERROR(handles[t].Wait(worker->DefaultDeadline()).WithContext("round " + std::to_string(round)));
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    comm_seconds += seconds;
    if (!settings.async) {
      for (size_t t = 0; t < plan.size(); ++t) {
        std::string why;
        if (!VerifySum(kind, plan[t].dtype, plan[t].elements, workers, round, static_cast<int>(t), grads[t].data(),
                       &why))
          return Internal("round " + std::to_string(round) + ": wrong sum in " + plan[t].name + ": " + why);
        digest.Add(grads[t].data(), grads[t].size());
      }
    }
    if (!options.quiet || round + 1 == options.rounds)
      std::printf("round %llu/%llu: %.2f ms, push+pull goodput %.1f MB/s%s\n",
                  static_cast<unsigned long long>(round + 1), static_cast<unsigned long long>(options.rounds),
                  seconds * 1e3, 2.0 * bytes_per_round / seconds / 1e6, settings.async ? "" : ", verified");
  }
  if (settings.async) {
    // Every push was added once: after all workers are done, pushing zeros returns the total.
    SYNCLINE_RETURN_IF_ERROR(worker->Barrier());
    for (size_t t = 0; t < plan.size(); ++t) {
      std::fill(grads[t].begin(), grads[t].end(), 0);
      SYNCLINE_ASSIGN_OR_RETURN(OpHandle h, worker->PushPull(ids[t], grads[t].data(), false));
      SYNCLINE_RETURN_IF_ERROR(h.Wait(worker->DefaultDeadline()));
      std::string why;
      if (!VerifyAsyncTotal(kind, plan[t].dtype, plan[t].elements, workers, options.rounds, static_cast<int>(t),
                            grads[t].data(), &why))
        return Internal("async total of " + plan[t].name + " is wrong: " + why);
      digest.Add(grads[t].data(), grads[t].size());
    }
    std::printf("async totals verified\n");
  }
  SYNCLINE_RETURN_IF_ERROR(worker->Barrier());
  std::printf("done: %llu rounds, mean push+pull goodput %.1f MB/s, result digest %016llx\n",
              static_cast<unsigned long long>(options.rounds),
              2.0 * bytes_per_round * options.rounds / comm_seconds / 1e6, static_cast<unsigned long long>(digest.h));
  std::fflush(stdout);
  // The job (and every process's metrics) stays up until the workers shut down.
  if (options.linger_s > 0) std::this_thread::sleep_for(std::chrono::duration<double>(options.linger_s));
  return worker->Shutdown();
}

}  // namespace
}  // namespace syncline::example

int main(int argc, char** argv) {
  syncline::example::Options options;
  CLI::App app{"Plays one worker of a synthetic training job and verifies every pulled sum."};
  app.add_option("--rounds", options.rounds, "training rounds")->check(CLI::PositiveNumber);
  app.add_option("--tensors", options.tensors, "comma-separated DTYPE:ELEMENTS list (fp32, fp64, fp16, bf16)");
  app.add_option("--values", options.values, "exact (small integers, sums checked bit for bit) or random")
      ->check(CLI::IsMember({"exact", "random"}));
  app.add_flag("--quiet", options.quiet, "print only the last round");
  app.add_option("--linger", options.linger_s, "seconds to keep the job up after the last round, e.g. for a "
                                               "metrics scraper to read the final counts")
      ->check(CLI::Range(0.0, 3600.0));
  CLI11_PARSE(app, argc, argv);
  return syncline::RunNodeMain(syncline::Role::kWorker,
                               [&](const syncline::Settings& s, syncline::SignalWatcher&) {
                                 return syncline::example::Train(s, options);
                               },
                               syncline::StopSignals::kExit);
}
