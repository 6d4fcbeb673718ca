// syncline-scheduler: the control-plane process of a job.
#include <arpa/inet.h>

#include "common/logging.h"
#include "common/node_main.h"
#include "control/job_keys.h"
#include "scheduler/scheduler.h"
#include "transport/factory.h"
#include "transport/wire.h"

namespace {
// ZeroMQ binds interface addresses, not host names: bind all interfaces when
// the scheduler was given a name.
std::string BindHost(const std::string& host) {
  in_addr v4{};
  return inet_pton(AF_INET, host.c_str(), &v4) == 1 ? host : "*";
}
}  // namespace

int main() {
  return syncline::RunNodeMain(syncline::Role::kScheduler, [](const syncline::Settings& s,
                                                              syncline::SignalWatcher& signals) -> syncline::Status {
    if (auto st = syncline::Scheduler::CheckJobToken(s); !st.ok()) return st.WithContext("scheduler");
    // Listens on ZeroMQ TCP whatever the data plane; reaches ucx:// nodes over UCX.
    syncline::TransportOptions security{s.encrypt, ""};
    if (s.encrypt) security.curve_secret_key = syncline::SchedulerCurveSecretKey(syncline::JobKey(s.job_token));
    // Control traffic only: no frame it takes is larger than a header (and UCX's framing of one).
    security.max_frame_bytes = syncline::kMaxHeaderBytes + 4096;
    auto endpoint = syncline::CreateEndpoint("tcp", security);
    if (!endpoint.ok()) return endpoint.status().WithContext("scheduler");
    syncline::Scheduler scheduler(s, std::move(endpoint).value());
    auto address = scheduler.Listen("tcp://" + BindHost(s.scheduler_host) + ":" + std::to_string(s.scheduler_port));
    if (!address.ok()) return address.status().WithContext("scheduler");
    SYNCLINE_LOG_INFO("listening at {}; waiting for {} workers and {} servers", *address, s.num_workers, s.num_servers);
    signals.OnSignal([&](int sig) { scheduler.RequestAbort("scheduler stopped by signal " + std::to_string(sig)); });
    syncline::Status st = scheduler.Run();
    if (st.ok()) SYNCLINE_LOG_INFO("job finished");
    return st;
  });
}
