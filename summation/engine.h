// SummationEngine: where a server sends the arithmetic of a round. Small
// inputs are summed on the calling thread; inputs of at least
// `parallel_threshold_bytes` are cut into cache-line-aligned slices and summed
// by the engine's own oneTBB arena, so summation never competes with (or
// borrows) threads that belong to the network or to other engines.
//
// Results are bit-identical to kernels::SumInto / kernels::Scale on the whole
// buffer, whatever the thread count or threshold: the work is element-wise
// and only the split changes.
//
// Usage (one engine per server process, passed to whoever sums):
//   SummationEngine engine(settings.sum_threads);
//   engine.SumInto(DType::kFloat32, round_buffer, pushed.data(), n);
#pragma once

#include <cstddef>
#include <memory>

#include "common/dtype.h"

namespace syncline {

// Thread-safe: SumInto and Scale may be called from any number of threads at
// once (on buffers that do not overlap between concurrent calls). Concurrent
// large calls share the arena's threads; each call returns only when its own
// elements are done. The engine must outlive the calls in flight.
class SummationEngine {
 public:
  // `sum_threads`: threads the arena may use, the calling thread included
  // (it works too while it waits); 0 = the number of hardware threads
  // oneTBB sees for this process. 1 disables splitting altogether.
  // `parallel_threshold_bytes`: inputs smaller than this run inline on the
  // caller. Splitting pays when a second core adds memory bandwidth or
  // compute that one core lacks; on the 2-core development VM that was
  // only for buffers beyond the caches (16 MiB: ~2x; 1-4 MiB in cache: no
  // gain). Measure on the target with syncline-bench-summation. 0 splits
  // every input big enough for two slices (slices are at least 32 KiB).
  explicit SummationEngine(int sum_threads = 0,
                           size_t parallel_threshold_bytes = size_t{1} << 20);
  ~SummationEngine();
  SummationEngine(const SummationEngine&) = delete;
  SummationEngine& operator=(const SummationEngine&) = delete;

  // dst[i] += src[i]; same contract as kernels::SumInto (no overlap).
  void SumInto(DType t, void* dst, const void* src, size_t num_elements);
  // data[i] *= factor; same contract as kernels::Scale.
  void Scale(DType t, void* data, size_t num_elements, double factor);

  // The resolved thread count (never 0) and the threshold in force.
  int num_threads() const { return num_threads_; }
  size_t parallel_threshold_bytes() const { return threshold_bytes_; }

 private:
  struct Arena;  // wraps the tbb::task_arena; keeps TBB out of this header

  // Calls fn(begin, end) on element ranges that tile [0, num_elements), each
  // boundary but the last on a 64-byte boundary of `base`'s address space,
  // in parallel inside the arena.
  template <typename Fn>
  void ForEachSlice(const void* base, size_t elem_size, size_t num_elements, const Fn& fn);

  int num_threads_;
  size_t threshold_bytes_;
  std::unique_ptr<Arena> arena_;  // null when num_threads_ == 1
};

}  // namespace syncline
