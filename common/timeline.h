// Timeline: a Chrome-trace (Trace Event Format) JSON of what one process did,
// loadable in Perfetto or chrome://tracing. Spans are complete events ("X")
// on named tracks (one row each). Recording is bounded by training steps: the
// framework glue calls BeginStep at each step, and only spans that start
// within [start_step, end_step] are kept. Write() saves the file.
//
//   Timeline t({"/tmp/trace/worker-0.json", /*pid=*/0, "worker 0", 10, 20});
//   t.BeginStep();
//   t.Span("push", "chunk", "fc6.grad #3", start_us, end_us);
//   t.Write();
//
// Thread-safety: all methods may be called from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"

namespace syncline {

class Timeline {
 public:
  struct Options {
    std::string path;
    int pid = 0;                 // the process row (a worker's rank)
    std::string process_name;    // shown for that row
    int64_t start_step = 0;
    int64_t end_step = INT64_MAX;
  };

  explicit Timeline(Options options);

  // Microseconds on the clock every span uses (steady, process-wide).
  static int64_t NowUs();

  // A training step begins; the first call starts step 0.
  void BeginStep();
  // Whether a span starting now would be kept (callers skip building one if not).
  bool recording() const;
  // Records a span of `name` on the row `track` if its start's step is recorded.
  void Span(const std::string& name, const char* category, const std::string& track, int64_t start_us,
            int64_t end_us);
  // Writes every span so far to the file (replacing it). Creates the directory.
  Status Write() const;
  size_t num_spans() const;
  const std::string& path() const { return options_.path; }

 private:
  struct Event {
    std::string name;
    const char* category;
    int track;
    int64_t start_us, duration_us;
  };
  bool RecordingLocked() const REQUIRES(mu_);

  const Options options_;
  mutable Mutex mu_;
  int64_t step_ GUARDED_BY(mu_) = -1;
  std::vector<Event> events_ GUARDED_BY(mu_);
  std::unordered_map<std::string, int> tracks_ GUARDED_BY(mu_);  // name -> row id
};

}  // namespace syncline
