// libFuzzer target: the scheduler's message handling. A fresh scheduler of a
// 2-worker, 2-server job takes a sequence of messages from the input
// (registrations with the right token and without, barriers, declarations,
// heartbeats, finishes, aborts, and every other op) through an in-memory
// endpoint; every message it sends back must pass the wire.
#include "scheduler/scheduler.h"

#include "tests/fuzz/fuzz_input.h"

using namespace syncline;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  Settings settings;
  settings.role = Role::kScheduler;
  settings.num_workers = 2;
  settings.num_servers = 2;
  settings.job_token = fuzz::kToken;
  settings.partition_bytes = 1024;
  auto owned = std::make_unique<fuzz::CaptureEndpoint>();
  fuzz::CaptureEndpoint* endpoint = owned.get();
  Scheduler scheduler(settings, std::move(owned));
  if (!scheduler.Listen("fuzz://scheduler").ok()) __builtin_trap();
  for (int i = 0; i < 64 && in.remaining_bytes() > 0; ++i) {
    std::optional<Message> m = fuzz::NextMessage(in);
    if (m) endpoint->Deliver(std::move(*m));
  }
  return 0;
}
