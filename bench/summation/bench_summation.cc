// syncline-bench-summation: throughput of SummationEngine::SumInto for each
// dtype, buffer size (4 KiB .. 64 MiB, powers of 4) and thread count (1, 2),
// printed beside two references measured in the same run on the same buffers
// and thread split: the plain fp32 loop of plain_loop.cc, and memcpy (the
// memory-bandwidth ceiling). For fp16 on one thread also the sum's F16C
// conversions alone at both widths (f16_ceiling.h): the ceiling of a
// conversion-bound loop, and which width this CPU converts faster.
//
// Bytes counted: sum-into and the plain loop move 3x the buffer size (read
// dst, read src, write dst); memcpy moves 2x (read src, write dst). Every
// figure is the median over repetitions, each repetition long enough (>= 5
// ms) to swamp timer resolution; the references and the sums of one size take
// turns, so they see the same machine. Machines here are noisy: read the ratios.
//
// Usage: syncline-bench-summation [--reps=N] [--max-mib=N]
#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/partitioner.h>
#include <oneapi/tbb/task_arena.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "f16_ceiling.h"
#include "plain_loop.h"
#include "summation/engine.h"
#include "summation/half.h"

namespace syncline::bench {
namespace {

using Seconds = std::chrono::duration<double>;
constexpr double kMinRepSeconds = 0.005;
// Same smallest piece as the engine's slices, so the references are split
// across threads exactly when the engine splits.
constexpr size_t kMinPieceBytes = 32 * 1024;

struct AlignedFree {
  void operator()(void* p) const { std::free(p); }
};
using Bytes = std::unique_ptr<uint8_t, AlignedFree>;

Bytes Allocate(size_t bytes) {
  Bytes b(static_cast<uint8_t*>(std::aligned_alloc(64, bytes)));
  if (!b) {
    std::fprintf(stderr, "out of memory allocating %zu bytes\n", bytes);
    std::exit(1);
  }
  std::memset(b.get(), 0, bytes);  // fault the pages in before timing
  return b;
}

// Keeps the compiler from dropping work whose result is never read.
void Clobber(void* p) { asm volatile("" : : "r"(p) : "memory"); }

// One thing timed in a (threads, size) cell: a reference or a dtype's sum.
struct Contender {
  Contender(std::function<void()> prepare_fn, std::function<void()> call_fn)
      : prepare(std::move(prepare_fn)), call(std::move(call_fn)) {}
  std::function<void()> prepare;  // puts this contender's values in the buffers (not timed)
  std::function<void()> call;
  long iters = 1;                 // calls per sample, >= kMinRepSeconds in all
  std::vector<double> samples;    // seconds per call
};

double SecondsOf(const std::function<void()>& fn, long iters) {
  const auto t0 = std::chrono::steady_clock::now();
  for (long i = 0; i < iters; ++i) fn();
  return Seconds(std::chrono::steady_clock::now() - t0).count();
}

// Median seconds per call of each contender. The contenders take turns, one
// sample each per turn, so a slow phase of a noisy machine (a neighbour's
// burst, a busy memory bus) hits the references and the sums alike.
std::vector<double> MedianSecondsPerCallInTurns(std::vector<Contender>& contenders, int reps) {
  for (Contender& c : contenders) {
    c.prepare();
    c.call();  // warm caches and TBB threads
    const double once = SecondsOf(c.call, 1);
    c.iters = std::clamp(static_cast<long>(std::ceil(kMinRepSeconds / std::max(once, 1e-9))), 1L, 1L << 20);
  }
  for (int r = 0; r < reps; ++r) {
    for (Contender& c : contenders) {
      c.prepare();
      c.call();
      c.samples.push_back(SecondsOf(c.call, c.iters) / static_cast<double>(c.iters));
    }
  }
  std::vector<double> medians;
  for (Contender& c : contenders) {
    std::sort(c.samples.begin(), c.samples.end());
    medians.push_back(c.samples[c.samples.size() / 2]);
  }
  return medians;
}

// Runs fn(offset, length) over [0, bytes) in up to `threads` pieces of whole
// cache lines, on a private arena as the engine does.
class Splitter {
 public:
  explicit Splitter(int threads) : threads_(threads), arena_(threads) { arena_.initialize(); }

  template <typename Fn>
  void Run(size_t bytes, const Fn& fn) {
    const size_t pieces = std::clamp<size_t>(bytes / kMinPieceBytes, 1, static_cast<size_t>(threads_));
    if (pieces == 1) {
      fn(size_t{0}, bytes);
      return;
    }
    auto edge = [&](size_t p) { return p == pieces ? bytes : (bytes * p / pieces) / 64 * 64; };
    arena_.execute([&] {
      tbb::parallel_for(
          tbb::blocked_range<size_t>(0, pieces, 1),
          [&](const tbb::blocked_range<size_t>& r) {
            for (size_t p = r.begin(); p != r.end(); ++p) fn(edge(p), edge(p + 1) - edge(p));
          },
          tbb::static_partitioner());
    });
  }

 private:
  int threads_;
  tbb::task_arena arena_;
};

// Fills a buffer with 1.0 in dtype t: sums then grow without ever producing
// subnormals or NaN (16-bit types saturate at a finite value), so the timing
// never hits a slow path.
void FillOnes(DType t, uint8_t* p, size_t bytes) {
  const size_t n = bytes / DTypeSize(t);
  for (size_t i = 0; i < n; ++i) {
    switch (t) {
      case DType::kFloat32: reinterpret_cast<float*>(p)[i] = 1.0f; break;
      case DType::kFloat64: reinterpret_cast<double*>(p)[i] = 1.0; break;
      case DType::kFloat16: reinterpret_cast<uint16_t*>(p)[i] = FloatToHalf(1.0f); break;
      case DType::kBFloat16: reinterpret_cast<uint16_t*>(p)[i] = FloatToBf16(1.0f); break;
    }
  }
}

std::string SizeName(size_t bytes) {
  if (bytes >= (size_t{1} << 20)) return std::to_string(bytes >> 20) + " MiB";
  return std::to_string(bytes >> 10) + " KiB";
}

double GBps(size_t bytes_moved, double seconds) { return static_cast<double>(bytes_moved) / seconds / 1e9; }

int Main(int argc, char** argv) {
  int reps = 9;
  size_t max_bytes = size_t{64} << 20;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--reps=", 0) == 0) {
      reps = std::max(1, std::atoi(arg.c_str() + 7));
    } else if (arg.rfind("--max-mib=", 0) == 0) {
      max_bytes = std::max<size_t>(1, std::strtoull(arg.c_str() + 10, nullptr, 10)) << 20;
    } else {
      std::fprintf(stderr, "usage: %s [--reps=N] [--max-mib=N]\n", argv[0]);
      return 2;
    }
  }
  std::vector<size_t> sizes;
  for (size_t b = 4096; b <= max_bytes; b *= 4) sizes.push_back(b);
  const DType dtypes[] = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16};
  const int thread_counts[] = {1, 2};

  Bytes dst = Allocate(max_bytes), src = Allocate(max_bytes);
  // (threads, bytes) -> GB/s of the references; (dtype, threads, bytes) -> GB/s of sum-into.
  std::map<std::pair<int, size_t>, std::pair<double, double>> refs;
  std::map<std::tuple<int, int, size_t>, double> sums;
  // (halves per instruction, bytes) -> GB/s of the fp16 sum's conversions alone, one thread.
  std::map<std::pair<int, size_t>, double> f16_convert_only;
  const bool has_convert_only = HasConvertOnlyF16();
  const bool has_convert_only_x16 = HasConvertOnlyF16x16();
  for (int threads : thread_counts) {
    SummationEngine engine(threads, /*parallel_threshold_bytes=*/0);  // split whenever it can
    Splitter split(threads);
    for (size_t bytes : sizes) {
      auto* d = dst.get();
      const auto* s = src.get();
      auto fill = [&, bytes](DType t) {
        return [&, t, bytes] {
          FillOnes(t, dst.get(), bytes);
          FillOnes(t, src.get(), bytes);
        };
      };
      std::vector<Contender> contenders;
      contenders.emplace_back(fill(DType::kFloat32), [&, bytes] {
                              split.Run(bytes, [&](size_t off, size_t len) {
                                PlainSumF32(reinterpret_cast<float*>(d + off),
                                            reinterpret_cast<const float*>(s + off), len / 4);
                              });
                            });
      contenders.emplace_back(fill(DType::kFloat32), [&, bytes] {
                              split.Run(bytes, [&](size_t off, size_t len) { std::memcpy(d + off, s + off, len); });
                              Clobber(d);
                            });
      for (DType t : dtypes) {
        const size_t n = bytes / DTypeSize(t);
        contenders.emplace_back(fill(t), [&, t, n] { engine.SumInto(t, d, s, n); });
      }
      // The fp16 sum's conversions alone (f16_ceiling.h), 8 and 16 per
      // instruction, per core: one thread only.
      // (halves per instruction, loop)
      std::vector<std::pair<int, void (*)(uint16_t*, const uint16_t*, size_t)>> convert_loops;
      if (threads == 1 && has_convert_only) convert_loops.emplace_back(8, ConvertOnlyF16);
      if (threads == 1 && has_convert_only_x16) convert_loops.emplace_back(16, ConvertOnlyF16x16);
      for (auto [width, loop] : convert_loops) {
        contenders.emplace_back(fill(DType::kFloat16), [&, loop = loop, bytes] {  // (clang 14 cannot capture a structured binding)
          loop(reinterpret_cast<uint16_t*>(d), reinterpret_cast<const uint16_t*>(s), bytes / 2);
          Clobber(d);
        });
      }
      const std::vector<double> sec = MedianSecondsPerCallInTurns(contenders, reps);
      refs[{threads, bytes}] = {GBps(3 * bytes, sec[0]), GBps(2 * bytes, sec[1])};
      for (size_t i = 0; i < std::size(dtypes); ++i)
        sums[{static_cast<int>(dtypes[i]), threads, bytes}] = GBps(3 * bytes, sec[2 + i]);
      for (size_t i = 0; i < convert_loops.size(); ++i)
        f16_convert_only[{convert_loops[i].first, bytes}] = GBps(3 * bytes, sec[2 + std::size(dtypes) + i]);
    }
  }

  std::printf("syncline-bench-summation: SumInto GB/s (3 x bytes moved), median of %d reps; "
              "hardware threads: %u\n", reps, std::thread::hardware_concurrency());
  std::printf("plain = fp32 dst[i] += src[i] at -O3 in its own TU (3 x bytes); "
              "memcpy counts 2 x bytes; both split over the same threads\n\n");
  std::printf("%-5s %8s %3s %10s %10s %10s %9s %10s\n", "dtype", "size", "thr", "sum GB/s",
              "plain GB/s", "memcpyGB/s", "vs plain", "vs memcpy");
  for (DType t : dtypes) {
    for (int threads : thread_counts) {
      for (size_t bytes : sizes) {
        const double sum = sums[{static_cast<int>(t), threads, bytes}];
        const auto [plain, copy] = refs[{threads, bytes}];
        std::printf("%-5s %8s %3d %10.2f %10.2f %10.2f %8.2fx %9.2fx\n", DTypeName(t),
                    SizeName(bytes).c_str(), threads, sum, plain, copy, sum / plain, sum / copy);
      }
    }
  }
  if (has_convert_only) {
    std::printf("\nfp16 against its conversions alone, 1 thread, same runs (3 x bytes): the F16C widening and "
                "narrowing of the sum without its arithmetic, 8 halves per instruction (AVX2) and 16 (AVX-512%s)\n\n",
                has_convert_only_x16 ? "" : ": not on this CPU");
    std::printf("%8s %10s %12s %12s %14s\n", "size", "fp16 GB/s", "convert x8", "convert x16", "vs faster");
    for (size_t bytes : sizes) {
      const double sum = sums[{static_cast<int>(DType::kFloat16), 1, bytes}];
      const double x8 = f16_convert_only[{8, bytes}], x16 = f16_convert_only[{16, bytes}];
      std::printf("%8s %10.2f %12.2f %12.2f %13.2fx\n", SizeName(bytes).c_str(), sum, x8, x16,
                  sum / std::max(x8, x16));
    }
  }
  return 0;
}

}  // namespace
}  // namespace syncline::bench

int main(int argc, char** argv) { return syncline::bench::Main(argc, argv); }
