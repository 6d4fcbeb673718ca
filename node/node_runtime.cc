#include "node/node_runtime.h"

#include "common/logging.h"
#include "control/authenticated_endpoint.h"
#include "control/job_keys.h"
#include "metrics/common_metrics.h"
#include "metrics/process_metrics.h"
#include "transport/node_endpoint.h"

namespace syncline {
namespace {

// The endpoint stack of a node: `transport`, authenticated when the job has
// a token (the scheduler's key ring knows the job key, with which it checks
// registrations), and for a server or worker outermost a ShmEndpoint when
// shared memory is on, so that a shared-memory reference is acted on only
// once its sender is proven, and the messages through a header ring (which
// bypass the authenticating layer) are signed and checked with the same key
// ring. `*keys` and `*shm` are the layers (null where absent).
std::unique_ptr<Endpoint> EndpointStack(const Settings& settings, Role role, std::unique_ptr<Endpoint> transport,
                                        std::shared_ptr<KeyRing>* keys, ShmEndpoint** shm) {
  *shm = nullptr;
  std::unique_ptr<Endpoint> endpoint = std::move(transport);
  if (!settings.job_token.empty()) {
    *keys = role == Role::kScheduler ? std::make_shared<KeyRing>(JobKey(settings.job_token))
                                     : std::make_shared<KeyRing>();
    endpoint = std::make_unique<AuthenticatedEndpoint>(std::move(endpoint), *keys);
  }
  if (role == Role::kScheduler) return endpoint;
  return WrapForSharedMemory(settings, std::move(endpoint), keys->get(), shm);
}

}  // namespace

NodeRuntime::NodeRuntime(const Settings& settings, Role role, std::unique_ptr<Endpoint> transport,
                         MetricsRegistry& metrics, std::string scheduler_address)
    : settings_(settings),
      role_(role),
      metrics_(&metrics),
      endpoint_(EndpointStack(settings_, role_, std::move(transport), &keys_, &shm_)) {
  if (role_ != Role::kScheduler)
    client_ = std::make_unique<SchedulerClient>(settings_, role_, endpoint_.get(), std::move(scheduler_address),
                                                keys_.get());
}

NodeRuntime::~NodeRuntime() {
  // No message reaches the client (through the role's receiver) while it goes.
  endpoint_->Close();
}

void NodeRuntime::AddCommonMetrics(std::function<uint64_t()> more_unauthenticated) {
  AddProcessMetrics(*metrics_);
  if (role_ == Role::kScheduler) AddNodeInfo(*metrics_, RoleName(role_), -1);
  AddDroppedMessages(*metrics_, [this, more = std::move(more_unauthenticated)] {
    const EndpointStats s = endpoint_->stats();
    return std::pair{s.messages_malformed(), s.messages_unauthenticated + (more ? more() : 0)};
  });
}

Result<std::string> NodeRuntime::Listen(const std::string& address, Endpoint::Receiver receiver) {
  if (!exporter_) {
    SYNCLINE_ASSIGN_OR_RETURN(exporter_, MetricsExporter::FromSettings(settings_, metrics_));
  }
  return endpoint_->Listen(address, std::move(receiver));
}

Status NodeRuntime::Join(const std::string& my_address) {
  SYNCLINE_RETURN_IF_ERROR(client_->Join(my_address, shm_ != nullptr).WithContext("joining the job"));
  peers_ = client_->NodesOf(role_ == Role::kWorker ? proto::SERVER : proto::WORKER);
  for (const auto& p : peers_) SYNCLINE_RETURN_IF_ERROR(endpoint_->Connect(p.id(), p.address()));
  MarkColocatedPeers(shm_, peers_);
  AddNodeInfo(*metrics_, RoleName(role_), client_->my_rank());
  return Status::Ok();
}

Status NodeRuntime::Finish() {
  SYNCLINE_RETURN_IF_ERROR(client_->Finish());
  // The job's work is done either way; a FINISH that does not leave makes
  // the scheduler time this node out, which the log then explains.
  Flush("the FINISH may not reach the scheduler");
  return Status::Ok();
}

void NodeRuntime::Abort(const std::string& reason) {
  client_->Abort(reason);
  Flush("the ABORT may not reach the scheduler");
}

void NodeRuntime::Flush(const std::string& what) {
  if (Status flushed = endpoint_->Flush(Deadline::After(kFlushDeadline)); !flushed.ok())
    SYNCLINE_LOG_WARN("{}: {}", what, flushed.message());
}

void NodeRuntime::Close() { endpoint_->Close(); }

void NodeRuntime::StopServingMetrics() { exporter_.reset(); }

}  // namespace syncline
