// syncline-bench-timeline: what tracing adds to each chunk, in nanoseconds,
// replaying the timeline calls a worker makes per chunk (worker/kv_client.cc,
// worker/worker.cc) without the network:
//   off       tracing off: four tests of a null timeline
//   idle      SYNCLINE_TRACE on, outside its steps: four timestamps and one
//             recording() check (nothing kept)
//   recording inside the traced steps: the above plus the row name and three spans
// Compare with a chunk's own time (bench/proxy/run.py --trace-cost prints step
// times; docs/benchmarks.md has both).
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <string>

#include "common/timeline.h"

namespace {

using syncline::Timeline;

// Defeats constant folding of the timeline pointer.
Timeline* volatile g_timeline = nullptr;
volatile int64_t g_sink = 0;

void OneChunk(int chunk) {
  Timeline* t = g_timeline;
  const int64_t posted = t ? Timeline::NowUs() : 0;
  const int64_t sent = t ? Timeline::NowUs() : 0;
  const int64_t acked = t ? Timeline::NowUs() : 0;
  if (t) {
    const int64_t replied = Timeline::NowUs();
    if (t->recording()) {
      const std::string track = "layer" + std::to_string(chunk % 40) + ".grad #" + std::to_string(chunk % 7);
      t->Span("queued", "chunk", track, posted, sent);
      t->Span("push", "chunk", track, sent, acked);
      t->Span("sum", "chunk", track, acked, replied);
    }
  }
  g_sink = g_sink + posted + sent + acked;
}

double NsPerChunk(int chunks) {
  for (int i = 0; i < chunks / 10; ++i) OneChunk(i);  // warm
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < chunks; ++i) OneChunk(i);
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count() / chunks;
}

}  // namespace

int main(int argc, char** argv) {
  int chunks = 1000000;
  CLI::App app{"Nanoseconds tracing adds to each chunk: off, on but idle, recording."};
  app.add_option("--chunks", chunks, "chunks to replay per variant")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);

  g_timeline = nullptr;
  const double off = NsPerChunk(chunks);
  Timeline idle({"/dev/null", 0, "worker 0", 1000000000, 1000000000});
  idle.BeginStep();
  g_timeline = &idle;
  const double on_idle = NsPerChunk(chunks);
  Timeline recording({"/dev/null", 0, "worker 0", 0, 1000000000});
  recording.BeginStep();
  g_timeline = &recording;
  const double rec = NsPerChunk(chunks);
  std::printf("tracing cost per chunk over %d chunks: off %.1f ns, on outside its steps %.1f ns, recording %.1f ns\n",
              chunks, off, on_idle, rec);
  std::printf("{\"off_ns\": %.2f, \"idle_ns\": %.2f, \"recording_ns\": %.2f}\n", off, on_idle, rec);
  return 0;
}
