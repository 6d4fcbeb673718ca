// libFuzzer target: the control-plane client every worker and server runs,
// taking whatever arrives from "the scheduler" or anyone else: address books,
// barrier releases, declaration replies, aborts, shutdowns, worker-finished
// notes and every other op, before and after it has an id.
#include "control/client.h"

#include "tests/fuzz/fuzz_input.h"

using namespace syncline;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  Settings settings;
  settings.num_workers = 2;
  settings.num_servers = 2;
  settings.job_token = fuzz::kToken;
  const Role role = in.ConsumeBool() ? Role::kWorker : Role::kServer;
  settings.role = role;
  fuzz::CaptureEndpoint endpoint;
  SchedulerClient client(settings, role, &endpoint, "fuzz://scheduler");
  client.SetWorkerFinishedHandler([](int) {});
  for (int i = 0; i < 64 && in.remaining_bytes() > 0; ++i) {
    std::optional<Message> m = fuzz::NextMessage(in);
    if (m) (void)client.Handle(*m);
  }
  return 0;
}
