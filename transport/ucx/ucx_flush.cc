// UcxEndpoint::Flush: waits until every send queued before the call has
// completed locally (failed peers' sends are dropped, so they do not wait),
// then runs a UCX worker flush on the progress thread, so that nothing of
// them is outstanding on any transport.
#include "transport/ucx/ucx_endpoint_impl.h"

namespace syncline::ucx {

Status UcxEndpoint::Flush(Deadline deadline) {
  if (OnProgressThread()) return FailedPrecondition("Flush from the Receiver would wait for its own thread");
  {
    MutexLock lock(mu_);
    // A failed peer's messages are dropped (and so no longer wait).
    auto idle = [&]() REQUIRES(mu_) {
      if (closed_) return true;
      for (auto& [id, peer] : peers_)
        if (!FailedOf(*peer) && OutstandingOf(*peer) > 0) return false;
      return true;
    };
    if (!space_cv_.WaitUntil(mu_, deadline, idle)) {
      std::string waiting;
      for (auto& [id, peer] : peers_)
        if (!FailedOf(*peer) && OutstandingOf(*peer) > 0)
          waiting += (waiting.empty() ? "" : ", ") + std::to_string(id) + " (" + peer->address + ", " +
                     std::to_string(OutstandingOf(*peer)) + " messages)";
      return DeadlineExceeded("messages to peer(s) " + waiting + " are still queued or in flight");
    }
    if (closed_) return Aborted("endpoint closed");
  }
  // Every send completed locally; the worker flush completes once UCX has
  // nothing of them outstanding on any transport.
  auto flush = std::make_shared<WorkerFlush>();
  Command c;
  c.call = [this, flush] { StartWorkerFlush(flush); };
  {
    MutexLock lock(mu_);
    if (closed_) return Aborted("endpoint closed");
    commands_.push_back(std::move(c));
  }
  Wake();
  MutexLock lock(flush->mu);
  if (!flush->done_cv.WaitUntil(flush->mu, deadline, [&]() REQUIRES(flush->mu) { return flush->done; }))
    return DeadlineExceeded("UCX did not finish the transfers under way to its peers in time");
  if (flush->status != UCS_OK) return Unavailable("UCX could not flush its sends: " + StatusText(flush->status));
  return Status::Ok();
}

void UcxEndpoint::StartWorkerFlush(const std::shared_ptr<WorkerFlush>& flush) {
  ucp_request_param_t params{};  // no callback: FinishDeferred checks it, as it does closing endpoints
  ucs_status_ptr_t request = ucp_worker_flush_nbx(ucx_->worker(), &params);
  if (request == nullptr) return flush->Finish(UCS_OK);
  if (UCS_PTR_IS_ERR(request)) return flush->Finish(UCS_PTR_STATUS(request));
  flushing_.emplace_back(request, flush);
}

}  // namespace syncline::ucx
