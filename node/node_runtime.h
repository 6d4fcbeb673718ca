// NodeRuntime: what every node of a job runs beneath its role, so that the
// scheduler, servers and workers keep only their message handlers and role
// logic. It owns the node's endpoint stack (the transport, authenticated
// with the job's key ring when the job has a token, and for servers and
// workers outermost a ShmEndpoint when shared memory is on), the
// SchedulerClient of a server or worker, the metrics every node reports and
// the exporter that serves them, and the steps every node takes: listen,
// join and connect to the peers of the other role, and at the end let its
// last messages leave (a flush with a deadline, never a sleep) and close.
//
// The role owns the MetricsRegistry (its own instruments register first) and
// must stop the exporter (StopServingMetrics) before its own state, which
// its collectors read, goes.
//
// Thread-safety: endpoint(), client(), keys() and shm() may be used from any
// thread (what they return is thread-safe). Listen, Join and
// StopServingMetrics are called from the role's own thread, in the order of
// its life; Finish, Abort, Flush and Close from any thread.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/settings.h"
#include "control/client.h"
#include "control/key_ring.h"
#include "metrics/exporter.h"
#include "metrics/registry.h"
#include "transport/shm/shm_endpoint.h"
#include "transport/transport.h"

namespace syncline {

class NodeRuntime {
 public:
  // How long shutdown waits for a node's last messages (FINISH, ABORT, the
  // scheduler's abort and shutdown) to leave. Short: with zmq, Close lingers
  // this long on messages queued for a peer that died, and the other nodes
  // wait on this process to end the job.
  static constexpr auto kFlushDeadline = Millis(500);

  // A node of `role` over `transport`, counting into `metrics` (which must
  // outlive it). `scheduler_address`: where the scheduler listens (servers
  // and workers; empty: the settings').
  NodeRuntime(const Settings& settings, Role role, std::unique_ptr<Endpoint> transport, MetricsRegistry& metrics,
              std::string scheduler_address = "");
  ~NodeRuntime();

  NodeRuntime(const NodeRuntime&) = delete;
  NodeRuntime& operator=(const NodeRuntime&) = delete;

  Role role() const { return role_; }
  Endpoint& endpoint() { return *endpoint_; }
  // REQUIRES: a server or worker.
  SchedulerClient& client() { return *client_; }
  const SchedulerClient& client() const { return *client_; }
  // The endpoint's key ring, in a job with a token (else null).
  KeyRing* keys() const { return keys_.get(); }
  // The endpoint's shared-memory layer, if on (servers and workers).
  ShmEndpoint* shm() const { return shm_; }

  // Registers the metrics of every node: the process's, the messages the
  // endpoint dropped (plus `more_unauthenticated()`, if given, among the
  // unauthenticated ones) and, for the scheduler, its node info (a server's
  // or worker's comes with its rank, at Join). The role calls it where its
  // metrics have always listed them.
  void AddCommonMetrics(std::function<uint64_t()> more_unauthenticated = nullptr);

  // Starts serving the metrics (when the settings name a port; once), then
  // listens at `address`, handing every message to `receiver`; returns the
  // concrete address.
  Result<std::string> Listen(const std::string& address, Endpoint::Receiver receiver);
  // Servers and workers: registers (listening at `my_address`), waits for the
  // address book, connects to every node of the other role and marks those
  // on this machine colocated (shared memory).
  Status Join(const std::string& my_address);
  // The nodes of the other role, connected at Join, ordered by rank.
  const std::vector<proto::NodeInfo>& peers() const { return peers_; }

  // Servers and workers: tells the scheduler this node is done, and waits (up
  // to kFlushDeadline) for the FINISH to leave.
  Status Finish();
  // Servers and workers: aborts the job with `reason`, and waits (up to
  // kFlushDeadline) for the ABORT to leave.
  void Abort(const std::string& reason);
  // Waits up to kFlushDeadline for the messages sent so far to leave; logs
  // `what` ("the FINISH may not reach the scheduler") when they may not.
  void Flush(const std::string& what);
  // Closes the endpoint: no message arrives or leaves any more.
  void Close();
  // Stops serving the metrics; waits for a scrape in progress.
  void StopServingMetrics();

 private:
  const Settings settings_;
  const Role role_;
  MetricsRegistry* const metrics_;
  std::shared_ptr<KeyRing> keys_;  // null without a token
  ShmEndpoint* shm_ = nullptr;     // a layer of endpoint_, if on
  std::unique_ptr<Endpoint> endpoint_;
  std::unique_ptr<SchedulerClient> client_;  // null for the scheduler
  std::vector<proto::NodeInfo> peers_;       // written by Join, read after it
  std::unique_ptr<MetricsExporter> exporter_;  // from Listen; stops before the rest goes
};

}  // namespace syncline
