// The C++ reference of the shim-overhead benchmark, callable from inside a
// shim's own process (ctypes): one push_pull timed in C++, as
// syncline-bench-worker times it, through the worker the Python session
// already joined the job with. Run alternately with the shim's call in the
// same job, the two see the same machine at the same moments, which separate
// jobs on a busy host do not.
//
// The library links nothing: the caller hands over libsyncline's own
// syncline_push_pull (the function the eager shims call), so the worker is
// only ever touched by the copy of libsyncline that made it.
#include <algorithm>
#include <chrono>
#include <cstdint>

#include "proxy/c_api.h"

namespace {
using PushPull = decltype(&syncline_push_pull);
}  // namespace

// Fills `input` (num_floats float32s) with ones, untimed as in
// syncline-bench-worker's loop, then sums it across workers into `output`
// (== input: in place) and writes the nanoseconds of that call alone.
// Returns syncline_push_pull's status.
extern "C" __attribute__((visibility("default"))) int syncline_bench_timed_push_pull(
    void* push_pull, syncline_worker* worker, uint32_t tensor_id, float* input, float* output, uint64_t num_floats,
    int64_t* nanoseconds) {
  std::fill(input, input + num_floats, 1.0f);
  const auto start = std::chrono::steady_clock::now();
  const int status = reinterpret_cast<PushPull>(push_pull)(worker, tensor_id, input, output, 0, 0);
  *nanoseconds = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count();
  return status;
}
