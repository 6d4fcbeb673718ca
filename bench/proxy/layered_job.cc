// syncline-bench-layered: a training step without a framework, for the
// scheduling proxy's benchmark. A model is a list of layers (VGG-16 or
// ResNet-50 profiles, parameters scaled to fit this machine). Each iteration
// runs forward layer by layer, where layer l first waits for its gradient's
// sum from the previous iteration (the parameter update it reads), then
// backward from the last layer to the first, posting each layer's gradient
// as soon as its backward span ends (priority: forward order, first layer
// most urgent). Compute spans are sleeps (a GPU worker: the CPU stays free)
// or busy arithmetic (a CPU worker), split by each layer's multiply-adds,
// backward twice forward.
//
// Run under pslaunch, one process per worker; the scheduling settings come
// from the environment (SYNCLINE_SCHEDULING, SYNCLINE_SCHEDULING_CREDIT).
// Prints a progress line per iteration and one JSON line with the results.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <thread>

#include "bench/proxy/model_profiles.h"
#include "common/node_main.h"
#include "proxy/scheduled_worker.h"
#include "proxy/step_tuner.h"

namespace syncline {
namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

void Compute(double ms, bool cpu) {
  if (ms <= 0) return;
  const auto end = Clock::now() + std::chrono::duration<double, std::milli>(ms);
  if (!cpu) {
    std::this_thread::sleep_until(end);
    return;
  }
  volatile float x = 1.0f;
  while (Clock::now() < end)
    for (int i = 0; i < 2000; ++i) x = x * 0.9999999f + 1e-7f;
}

struct Options {
  std::string model = "vgg16";
  double scale = 1.0 / 16;
  double compute_ms = 0;     // forward + backward of one iteration
  std::string compute = "sleep";
  bool communicate = true;
  int iterations = 12;
  int warmup = 3;
  bool quiet = false;
};

Status Run(const Options& o) {
  SYNCLINE_ASSIGN_OR_RETURN(auto layers, bench::ModelProfile(o.model));
  double total_macs = 0;
  for (const auto& l : layers) total_macs += l.macs;
  const bool cpu = o.compute == "cpu";
  const double forward_ms = o.compute_ms / 3;  // backward costs twice forward

  std::vector<std::string> warnings;
  SYNCLINE_ASSIGN_OR_RETURN(Settings settings, Settings::FromEnvironment(ProcessEnvironment(), &warnings));
  InitNodeLogging(Role::kWorker, settings, warnings);
  SYNCLINE_ASSIGN_OR_RETURN(std::unique_ptr<Worker> worker, CreateScheduledWorker(settings));
  const int rank = worker->rank();

  std::vector<TensorId> ids;
  std::vector<std::vector<float>> grads;
  uint64_t grad_bytes = 0;
  for (const auto& l : layers) {
    const uint64_t n = std::max<uint64_t>(1, static_cast<uint64_t>(l.params * o.scale));
    SYNCLINE_ASSIGN_OR_RETURN(TensorId id, worker->Declare(l.name + ".grad", DType::kFloat32, n));
    ids.push_back(id);
    grads.emplace_back(n, 1.0f + rank);
    grad_bytes += n * sizeof(float);
  }
  const int total = o.warmup + o.iterations;
  std::vector<OpHandle> synced(layers.size());
  std::vector<double> steps;
  SYNCLINE_RETURN_IF_ERROR(worker->Barrier());
  Timeline* trace = worker->timeline();  // null unless SYNCLINE_TRACE / BYTEPS_TRACE_ON
  std::optional<StepTuner> tuner;        // SYNCLINE_AUTOTUNE (on by default)
  if (o.communicate && StepTuner::Enabled(settings)) tuner.emplace(worker.get());
  int settled_at = -1;
  auto compute = [&](const std::string& span, double ms) {
    const int64_t begin = trace ? Timeline::NowUs() : 0;
    Compute(ms, cpu);
    if (trace) trace->Span(span, "compute", "compute", begin, Timeline::NowUs());
  };
  for (int it = 0; it < total; ++it) {
    if (trace) trace->BeginStep();
    const auto start = Clock::now();
    if (tuner) {
      SYNCLINE_RETURN_IF_ERROR(tuner->BeginStep());
      if (tuner->settled() && settled_at < 0) settled_at = it;
    }
    for (size_t l = 0; l < layers.size(); ++l) {
      if (o.communicate && it > 0) SYNCLINE_RETURN_IF_ERROR(synced[l].Wait(worker->DefaultDeadline()));
      compute("forward " + layers[l].name, forward_ms * layers[l].macs / total_macs);
    }
    for (size_t l = layers.size(); l-- > 0;) {
      compute("backward " + layers[l].name, 2 * forward_ms * layers[l].macs / total_macs);
      if (!o.communicate) continue;
      PushPullOptions p{/*average=*/true, /*priority=*/-static_cast<int64_t>(l), nullptr};
      SYNCLINE_ASSIGN_OR_RETURN(synced[l], worker->PushPull(ids[l], grads[l].data(), p));
    }
    // The step ends where the next one's forward may start: with the
    // communication of the first layer, at the latest, on the last step.
    if (it == total - 1 && o.communicate)
      for (auto& h : synced) SYNCLINE_RETURN_IF_ERROR(h.Wait(worker->DefaultDeadline()));
    const double ms = MsSince(start);
    if (it >= o.warmup) steps.push_back(ms);
    if (!o.quiet)
      std::printf("[worker %d] iteration %d/%d%s: %.1f ms\n", rank, it + 1, total, it < o.warmup ? " (warm-up)" : "", ms);
  }
  // An iteration's time includes waiting for the previous one's sums, so the
  // steady state is the median of the measured ones.
  std::vector<double> sorted = steps;
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted[sorted.size() / 2];
  std::string list;
  for (double s : steps) list += (list.empty() ? "" : ",") + std::to_string(s);
  std::printf("{\"rank\":%d,\"model\":\"%s\",\"layers\":%zu,\"grad_bytes\":%llu,\"compute\":\"%s\",\"compute_ms\":%.3f,"
              "\"communicate\":%s,\"scheduling\":\"%s\",\"credit\":%llu,\"partition\":%llu,\"step_ms\":%.3f,"
              "\"tuned\":%s,\"tuned_partition\":%llu,\"tuned_credit_partitions\":%llu,\"settled_at\":%d,"
              "\"steps\":[%s]}\n",
              rank, o.model.c_str(), layers.size(), static_cast<unsigned long long>(grad_bytes), o.compute.c_str(),
              o.compute_ms, o.communicate ? "true" : "false", settings.scheduling.c_str(),
              static_cast<unsigned long long>(settings.SchedulingCreditBytes()),
              static_cast<unsigned long long>(settings.partition_bytes), median, tuner ? "true" : "false",
              static_cast<unsigned long long>(tuner ? tuner->current().partition_bytes : 0),
              static_cast<unsigned long long>(tuner ? tuner->current().credit_partitions : 0), settled_at, list.c_str());
  std::fflush(stdout);
  return worker->Shutdown();
}

}  // namespace
}  // namespace syncline

int main(int argc, char** argv) {
  syncline::Options o;
  CLI::App app{"Layered training step through the scheduling proxy (run under pslaunch)"};
  app.add_option("--model", o.model, "vgg16 or resnet50")->capture_default_str();
  app.add_option("--scale", o.scale, "fraction of the model's parameters to send")->capture_default_str();
  app.add_option("--compute-ms", o.compute_ms, "forward + backward compute of one iteration")->capture_default_str();
  app.add_option("--compute", o.compute, "sleep (GPU-like) or cpu (busy arithmetic)")
      ->check(CLI::IsMember({"sleep", "cpu"}))
      ->capture_default_str();
  app.add_flag("!--no-communication", o.communicate, "compute only: no push_pull");
  app.add_option("--iterations", o.iterations, "measured iterations")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--warmup", o.warmup, "iterations before measuring")->capture_default_str();
  app.add_flag("--quiet", o.quiet, "no progress lines");
  CLI11_PARSE(app, argc, argv);
  syncline::Status st = syncline::Run(o);
  if (!st.ok()) {
    std::fprintf(stderr, "syncline-bench-layered: %s\n", st.ToString().c_str());
    return 1;
  }
  return 0;
}
