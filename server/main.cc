// syncline-server: one summation service of a job.
#include "common/node_main.h"
#include "server/server.h"
#include "transport/factory.h"

int main() {
  return syncline::RunNodeMain(syncline::Role::kServer, [](const syncline::Settings& s,
                                                           syncline::SignalWatcher& signals) -> syncline::Status {
    auto endpoint = syncline::CreateEndpoint(s.transport, syncline::NodeTransportOptions(s));
    if (!endpoint.ok()) return endpoint.status();
    syncline::Server server(s, std::move(endpoint).value());
    signals.OnSignal([&](int sig) { server.RequestStop("server stopped by signal " + std::to_string(sig)); });
    return server.Run();
  });
}
