#include "summation/engine.h"

#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/info.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/partitioner.h>
#include <oneapi/tbb/task_arena.h>

#include <algorithm>
#include <cstdint>

#include "common/tsan_annotations.h"
#include "summation/kernels.h"

namespace syncline {
namespace {

constexpr size_t kCacheLine = 64;
// Below this a slice costs more to hand to another thread than to sum.
constexpr size_t kMinSliceBytes = 32 * 1024;
// Slices per thread: a few, so a thread that was descheduled (2-core
// machines running network threads too) does not hold up the whole call.
constexpr size_t kSlicesPerThread = 4;

}  // namespace

struct SummationEngine::Arena {
  explicit Arena(int threads) : arena(threads) { arena.initialize(); }
  tbb::task_arena arena;
};

SummationEngine::SummationEngine(int sum_threads, size_t parallel_threshold_bytes)
    : num_threads_(sum_threads > 0 ? sum_threads : std::max(1, tbb::info::default_concurrency())),
      threshold_bytes_(parallel_threshold_bytes) {
  if (num_threads_ > 1) arena_ = std::make_unique<Arena>(num_threads_);
}

SummationEngine::~SummationEngine() = default;

template <typename Fn>
void SummationEngine::ForEachSlice(const void* base, size_t elem_size, size_t num_elements,
                                   const Fn& fn) {
  const size_t n = num_elements;
  if (n == 0) return;
  if (!arena_ || n * elem_size < threshold_bytes_) {
    fn(size_t{0}, n);
    return;
  }
  // Slices hold whole cache lines of `base`, so two threads never write the
  // same line of dst. `head` elements come before the first line boundary
  // (none if the buffer is not even element-aligned: then lines cannot be
  // respected and only whole elements are).
  const size_t line_elems = kCacheLine % elem_size == 0 ? kCacheLine / elem_size : 1;
  const auto addr = reinterpret_cast<uintptr_t>(base);
  size_t head = addr % elem_size == 0 ? ((kCacheLine - addr % kCacheLine) % kCacheLine) / elem_size : 0;
  if (head >= n) head = 0;

  const size_t wanted = static_cast<size_t>(num_threads_) * kSlicesPerThread;
  size_t slice = std::max((n + wanted - 1) / wanted, kMinSliceBytes / elem_size);
  slice = (slice + line_elems - 1) / line_elems * line_elems;
  const size_t num_slices = (n - head + slice - 1) / slice;
  if (num_slices <= 1) {
    fn(size_t{0}, n);
    return;
  }
  // Slice k is [k == 0 ? 0 : head + k*slice, min(n, head + (k+1)*slice)).
  auto begin_of = [&](size_t k) { return k == 0 ? size_t{0} : std::min(n, head + k * slice); };
  // oneTBB hands a slice to a worker thread, and reports the slice done to
  // the waiting caller, inside libtbb, which ThreadSanitizer does not
  // instrument: it would see the slices' writes to dst and the caller's later
  // reads as unordered (a false race on every element, and a slow one: TSan
  // scans the whole range for each). The Tsan* calls tell it about the
  // ordering oneTBB provides: the caller publishes before the slices run, each
  // slice publishes when it is done, and the caller takes every slice's in
  // once the call returns. `token` is per call, so concurrent calls stay
  // unordered to TSan, as they are.
  char token = 0;
  TsanRelease(&token);
  arena_->arena.execute([&] {
    tbb::parallel_for(
        tbb::blocked_range<size_t>(0, num_slices, 1),
        [&](const tbb::blocked_range<size_t>& r) {
          TsanAcquire(&token);
          for (size_t k = r.begin(); k != r.end(); ++k) fn(begin_of(k), begin_of(k + 1));
          TsanRelease(&token);
        },
        tbb::simple_partitioner());
  });
  TsanAcquire(&token);
}

void SummationEngine::SumInto(DType t, void* dst, const void* src, size_t num_elements) {
  const size_t es = DTypeSize(t);
  if (es == 0) return;  // not a DType; same no-op as the kernel
  auto* d = static_cast<uint8_t*>(dst);
  const auto* s = static_cast<const uint8_t*>(src);
  ForEachSlice(dst, es, num_elements, [&](size_t begin, size_t end) {
    kernels::SumInto(t, d + begin * es, s + begin * es, end - begin);
  });
}

void SummationEngine::Scale(DType t, void* data, size_t num_elements, double factor) {
  const size_t es = DTypeSize(t);
  if (es == 0) return;
  auto* d = static_cast<uint8_t*>(data);
  ForEachSlice(data, es, num_elements, [&](size_t begin, size_t end) {
    kernels::Scale(t, d + begin * es, end - begin, factor);
  });
}

}  // namespace syncline
