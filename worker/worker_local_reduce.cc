// Worker: setting up local reduce with the other workers of its host
// (worker/local_reduce.h).
#include <algorithm>

#include "transport/node_endpoint.h"
#include "worker/worker.h"

namespace syncline {

Status Worker::StartLocalReduce() {
  std::vector<proto::NodeInfo> peers(local_group_.local_size);
  std::vector<int32_t> ids(local_group_.local_size, -1);
  for (const proto::NodeInfo& w : client_.NodesOf(proto::WORKER)) {
    auto at = std::find(local_group_.ranks.begin(), local_group_.ranks.end(), w.rank());
    if (at == local_group_.ranks.end()) continue;
    peers[at - local_group_.ranks.begin()] = w;
    ids[at - local_group_.ranks.begin()] = w.id();
  }
  std::vector<proto::NodeInfo> others;
  for (int i = 0; i < local_group_.local_size; ++i) {
    if (i == local_group_.local_rank) continue;
    SYNCLINE_RETURN_IF_ERROR(runtime_.endpoint().Connect(peers[i].id(), peers[i].address())
                                 .WithContext("connecting to worker " + std::to_string(peers[i].rank()) +
                                              " of this host (local reduce)"));
    others.push_back(peers[i]);
  }
  MarkColocatedPeers(runtime_.shm(), others);
  local_reducer_ = std::make_unique<LocalReducer>(
      &runtime_.endpoint(), &client_, local_group_, std::move(ids), settings_.request_timeout_ms,
      [this](ChunkTask&& chunk) {
        std::vector<ChunkTask> one;
        one.push_back(std::move(chunk));
        chunk_scheduler_->Post(std::move(one));
      },
      [this](const std::string& why, int32_t culprit) { client_.Abort(why, culprit); }, *metrics_);
  local_ = local_reducer_.get();
  return Status::Ok();
}

}  // namespace syncline
