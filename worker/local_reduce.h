// LocalReducer: the workers of one host (control/local_group.h) sum each
// chunk among themselves before it leaves the host, so that the host's link
// carries one copy of every gradient each way, not one per worker.
//
// Each key belongs to one of the host's workers, its pusher (OwnerOf, the
// same on every worker). The others send their
// copy of the chunk to the pusher (LOCAL_PUSH, through shared memory where
// the node has it); the pusher adds them to its own in local-rank order
// (bit-reproducible), hands the chunk to the credit scheduler as any other,
// and passes the server's sum on to the others (LOCAL_SUM) as it arrives,
// compressed or not: each writes it back as if it had pulled it. The servers
// count one push per host (server/key_store.h, contributors) and divide
// averages by the number of workers.
//
// Work arriving from the network runs on a thread of its own, never on the
// endpoint's receiving thread (which must not wait on a send); this worker's
// parts leave from another, not from the caller's, most urgent first (a
// StageQueue: an urgent tensor's parts overtake a bulk one's queued parts). Every wait on
// a peer ends with the job: a peer that dies is caught by the scheduler's
// heartbeats (the abort fails what waits here); one that finished (it says so
// with LOCAL_FINISHED at Shutdown) or waits at a barrier this worker has not
// reached (LOCAL_AT_BARRIER, after its own push_pulls) while a chunk still
// needs it ends the job at once, naming it and the tensor, as servers do for
// the workers they wait for.
//
// Thread-safety: all methods may be called from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "common/timeline.h"
#include "control/client.h"
#include "control/local_group.h"
#include "metrics/registry.h"
#include "summation/lanes.h"
#include "transport/transport.h"
#include "worker/chunk.h"
#include "worker/stage_queue.h"

namespace syncline {

class LocalReducer {
 public:
  // Hands a chunk this worker pushes for its host, summed, to the network
  // (the chunk scheduler).
  using Push = std::function<void(ChunkTask&&)>;
  // Ends the job: `why` (naming the tensor), blaming worker node `culprit`.
  using Abort = std::function<void(const std::string& why, int32_t culprit)>;

  // `peer_ids`: the node ids of the group's workers, by local rank (this
  // worker's own among them).
  LocalReducer(Endpoint* endpoint, const SchedulerClient* control, LocalGroup group, std::vector<int32_t> peer_ids,
               int request_timeout_ms, Push push, Abort abort, MetricsRegistry& metrics);
  ~LocalReducer();

  // The local rank of the worker that pushes `key` for the host. A key is
  // its tensor's id (high 32 bits) and chunk number: their sum spreads the
  // chunks of one tensor, and the first chunks of successive tensors, over
  // the host's workers.
  int OwnerOf(uint64_t key) const {
    return static_cast<int>(((key >> 32) + (key & 0xffffffffu)) % static_cast<uint64_t>(group_.local_size));
  }
  // Takes one chunk of this worker's push_pull: sends it to its pusher, or
  // (this worker's key) waits for the others' copies, then pushes the sum.
  void Post(ChunkTask&& chunk);
  // Takes LOCAL_PUSH, LOCAL_SUM, LOCAL_FINISHED and LOCAL_AT_BARRIER; false
  // for other messages.
  bool Handle(Message& m);
  // Fails every chunk waiting here, and every later one, with `status`.
  void FailAll(const Status& status);
  // Records each chunk's local stages as spans: "gather" (a chunk this
  // worker pushes, until its host's copies are summed) and "local" (one
  // another worker pushes, until its sum is back). Before the first Post, or never.
  void SetTimeline(Timeline* timeline) { timeline_ = timeline; }
  // Tells the group's other workers this one pushes nothing more (Shutdown),
  // or nothing until it passed its next barrier (its push_pulls are done).
  // AnnounceFinished then stops taking their parts (StopTakingParts).
  void AnnounceFinished();
  void AnnounceBarrier();
  // Stops taking the other workers' parts and fails this worker's chunks
  // still gathering, without telling the others. For a Shutdown that gave up
  // on push_pulls still in flight: the servers are not told this worker
  // finished either, since it did not (a peer told so would blame the wrong
  // thing); to both it is a worker that stopped, which the scheduler names.
  void StopTakingParts();
  // This worker passed a barrier.
  void PassedBarrier();

 private:
  using RoundKey = std::pair<uint64_t, uint64_t>;  // key, round
  // A chunk this worker pushes for the host: its own part and the others'.
  struct Gathering {
    std::optional<ChunkTask> mine;         // once this worker posted it
    std::vector<std::optional<Buffer>> by_local_rank;
    int arrived = 0;
    std::string failure;  // a part's sender failed (its error): the chunk fails
  };
  // A chunk whose sum comes from another worker of the host.
  struct Awaiting {
    std::shared_ptr<Operation> op;
    size_t index = 0;
    int owner = 0;  // local rank
    int64_t posted_us = 0;  // while tracing
  };

  // On the reducer's thread: the chunk's part from local rank `from`
  // (nullopt: this worker's own, in `posted`).
  // `failure`: the part's sender failed, as it says (`part` is then empty).
  void Gather(const RoundKey& id, int from, std::optional<Buffer> part, std::optional<ChunkTask> posted,
              std::string failure);
  // Sums a complete gathering into the chunk and pushes it (reducer's thread).
  void SumAndPush(Gathering g);
  // Passes chunk `chunk`'s sum on to the host's other workers, or (no sum)
  // its failure, `error`, which they would wait for in vain.
  // Queues SendSum on the reducer's thread.
  void QueueSum(const ChunkTask& chunk, const std::optional<Buffer>& sum, const Status& error);
  // Sends this worker's part of `chunk` to its pusher (on parts_), or, its
  // push_pull failed already, that failure.
  void SendPart(const ChunkTask& chunk);
  // A part that will not be sent (the reducer stopped): its chunk fails here.
  void DropPart(const ChunkTask& chunk, const Status& why);
  // What the host's other workers hear of `op`, failed here (`role`: what
  // this worker is to them), with the failure's own reason.
  std::string FailedHere(const Operation& op, const std::string& role) const;
  void SendSum(const ChunkTask& chunk, const std::optional<Buffer>& sum, const Status& error);
  void OnSum(Message& m, int from);
  // A peer finished, or waits at barrier `barrier` (counted from 0).
  void OnPeerAbsent(int local_rank, std::optional<uint64_t> barrier);
  // Why local rank `peer` will not send its part before this worker's next
  // barrier ("finished", "waits at a barrier"); "" if it may.
  std::string AbsenceLocked(int peer) const REQUIRES(mu_);
  // Ends the job, and fails what waits here: local rank `peer` is absent as
  // `why` says, but round `round` of `tensor` still needs it. Returns the
  // error, for a push_pull that waits nowhere here yet.
  Status ReportAbsentPeer(int peer, const std::string& why, uint64_t round, const std::string& tensor);
  void Announce(proto::Op op, uint64_t round);
  // Ends the job with `why` (blaming local rank `peer`) and fails what waits here.
  void End(const std::string& why, int peer);
  int LocalRankOf(int32_t node) const;
  Message Header(proto::Op op, const ChunkTask& chunk) const;

  Endpoint* const endpoint_;
  const SchedulerClient* const control_;
  const LocalGroup group_;
  const std::vector<int32_t> peer_ids_;
  const int request_timeout_ms_;
  const Push push_;
  const Abort abort_;
  Timeline* timeline_ = nullptr;
  Counter& rejected_;
  Counter& local_bytes_;
  // What the chunks' callbacks reach this reducer through: null once it is gone.
  struct Gate {
    Mutex mu;
    LocalReducer* reducer GUARDED_BY(mu) = nullptr;
  };
  const std::shared_ptr<Gate> gate_;

  Mutex mu_;
  std::optional<Status> failed_ GUARDED_BY(mu_);
  std::map<RoundKey, Gathering> gathering_ GUARDED_BY(mu_);
  size_t early_ GUARDED_BY(mu_) = 0;  // gatherings without this worker's part yet (peers ahead)
  std::map<RoundKey, Awaiting> awaiting_ GUARDED_BY(mu_);
  std::vector<bool> finished_ GUARDED_BY(mu_);  // by local rank
  std::vector<std::optional<uint64_t>> at_barrier_ GUARDED_BY(mu_);  // by local rank: the last barrier it reached
  uint64_t barriers_passed_ GUARDED_BY(mu_) = 0;
  bool finished_self_ GUARDED_BY(mu_) = false;  // AnnounceFinished: peers' parts are dropped
  // Last: they stop before the rest goes. thread_ takes what arrives and
  // sums; parts_ sends this worker's parts to their pushers.
  SerialLanes thread_{1};
  StageQueue<ChunkTask> parts_;
};

}  // namespace syncline
