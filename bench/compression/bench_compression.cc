// syncline-bench-compression: how fast each compressed form encodes and
// decodes, beside memcpy of the same bytes measured in the same run (the
// memory-bandwidth ceiling). Every rate counts the fp32 bytes of the values
// (4 per value), so "x memcpy" says how encoding a chunk compares to copying
// it; the target is >= 0.5 x. "encode" is Compress alone; "+ feedback"
// is ErrorFeedback::Compress (the residual added before and updated after,
// two more passes, as a worker and a server run it); "decode" is
// DecompressAdd into an fp32 sum, as a server sums pushes.
//
// One thread, chunk sizes 256 KiB (the default partition) and 4 MiB; each
// figure is the median of repetitions of >= 5 ms, the forms and memcpy
// taking turns so they see the same machine. Machines here are noisy: read
// the ratios.
//
// Usage: syncline-bench-compression [--reps=N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "compression/compressor.h"
#include "compression/error_feedback.h"

namespace {

using namespace syncline::compression;
using Clock = std::chrono::steady_clock;

// Seconds per call of `f`, one repetition: as many calls as fill 5 ms.
double SecondsPerCall(const std::function<void()>& f) {
  int calls = 1;
  for (;;) {
    const auto start = Clock::now();
    for (int i = 0; i < calls; ++i) f();
    const double s = std::chrono::duration<double>(Clock::now() - start).count();
    if (s >= 0.005) return s / calls;
    calls *= 2;
  }
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 15;
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], "--reps=", 7) == 0) reps = std::max(1, std::atoi(argv[i] + 7));
  const char* forms[] = {"fp16", "bf16", "int8", "onebit", "topk:0.01", "randomk:0.01"};
  std::printf("compression, one thread, GB/s of fp32 input; x memcpy of the same bytes; median of %d\n", reps);
  std::printf("%-10s %-13s %7s %7s %8s %10s %8s %7s %8s %6s\n", "chunk", "form", "memcpy", "encode", "x memcpy",
              "+ feedback", "x memcpy", "decode", "x memcpy", "bytes");
  for (size_t bytes : {size_t{256} << 10, size_t{4} << 20}) {
    const size_t n = bytes / 4;
    std::vector<float> values(n), sum(n, 0.0f), copy(n);
    std::mt19937 gen(1);
    std::normal_distribution<float> dist;
    for (float& x : values) x = dist(gen);
    std::map<std::string, std::vector<double>> memcpy_s, encode_s, feedback_s, decode_s;
    std::map<std::string, std::unique_ptr<ErrorFeedback>> feedback;
    std::map<std::string, std::vector<uint32_t>> chunks;
    for (const char* form : forms) {
      const Spec spec = *ParseSpec(form);
      feedback[form] = std::make_unique<ErrorFeedback>(spec);
      chunks[form].assign((CompressedBytes(spec, n) + 3) / 4, 0);
    }
    for (int r = 0; r < reps; ++r) {
      for (const char* form : forms) {
        const Spec spec = *ParseSpec(form);
        std::byte* chunk = reinterpret_cast<std::byte*>(chunks[form].data());
        uint64_t seed = 0;
        memcpy_s[form].push_back(SecondsPerCall([&] { std::memcpy(copy.data(), values.data(), bytes); }));
        encode_s[form].push_back(SecondsPerCall([&] {
          if (!Compress(spec, values.data(), n, ++seed, chunk).ok()) std::abort();
        }));
        feedback_s[form].push_back(SecondsPerCall([&] {
          if (!feedback[form]->Compress(values.data(), n, ++seed, chunk).ok()) std::abort();
        }));
        decode_s[form].push_back(SecondsPerCall([&] {
          if (!DecompressAdd(spec, chunk, CompressedBytes(spec, n), 1.0f, sum.data(), n).ok()) std::abort();
        }));
      }
    }
    for (const char* form : forms) {
      const Spec spec = *ParseSpec(form);
      const double m = bytes / Median(memcpy_s[form]) / 1e9, e = bytes / Median(encode_s[form]) / 1e9,
                   f = bytes / Median(feedback_s[form]) / 1e9, d = bytes / Median(decode_s[form]) / 1e9;
      std::printf("%-10s %-13s %7.1f %7.1f %8.2f %10.1f %8.2f %7.1f %8.2f %5.3fx\n",
                  bytes >= (1u << 20) ? "4 MiB" : "256 KiB", form, m, e, e / m, f, f / m, d, d / m,
                  static_cast<double>(CompressedBytes(spec, n)) / bytes);
      std::fflush(stdout);
    }
  }
  return 0;
}
