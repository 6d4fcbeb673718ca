// KeyStore: a server's keys and their round bookkeeping, without any I/O.
// Sync mode: the pushes of round r for a key are summed into one pooled
// buffer (in arrival order, or in worker-rank order once all are in when
// deterministic); when all N workers have pushed, the round is complete and
// its pulls are answered; the buffer returns to the pool once every worker
// pulled it. A one-worker round pushed with its pull (FLAG_PULL_AFTER_PUSH)
// answers with the pushed payload itself, whatever memory it is in (it is
// never written). Async mode: every push is added to the key's value at once and
// a pull returns the latest value. Ssp mode (bounded staleness k): as async,
// but a pull of round r is answered once every worker has pushed round r - k
// (server/round_clock.h); a push flagged average adds its value divided by
// the number of workers. In both, a request flagged FLAG_WHOLE_ROUND (a
// broadcast) takes a round summed as in sync mode.
//
// A key placed with a compression (Place) takes pushes in that form, sync
// rounds only: each push is decoded into the round's fp32 sum as it arrives
// (in deterministic mode, into its own buffer, summed in rank order at
// completion), and the complete sum is compressed once, with the key's own
// error feedback, for every pull of the round.
//
// Contributors: a round is complete when every contributor pushed it. By
// default each worker is one (its rank); with local reduce each worker host
// is one (its index, worker/local_reduce.h): its workers sum among
// themselves and one of them pushes and pulls each key for all.
// SetContributors says how many there are; the `rank` arguments below are
// then contributor indices. Averages always divide by the number of workers.
//
// Thread-safety: calls for one key must not run concurrently (the server
// runs each key on one SerialLanes lane); calls for different keys may.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <memory>
#include <unordered_map>
#include <vector>

#include "common/buffer.h"
#include "common/dtype.h"
#include "common/mutex.h"
#include "compression/compressor.h"
#include "compression/error_feedback.h"
#include "server/round_clock.h"
#include "summation/engine.h"
#include "transport/transport.h"

namespace syncline {

// Why a worker will not push: it finished, or it waits at a barrier (which
// its own push_pulls came before) until every worker arrives there.
struct Absence {
  enum Kind { kFinished, kAtBarrier } kind = kFinished;
  uint64_t barrier_sequence = 0;  // kAtBarrier
};

struct KeyStoreOptions {
  int num_workers = 1;  // and contributors, until SetContributors
  bool async = false;
  bool deterministic = false;
  // Sync mode: called, on the key's lane, when a round has pushes but waits
  // for a worker that is absent (MarkFinished, MarkAtBarrier): it cannot
  // complete while that lasts. It may be called more than once for one round.
  std::function<void(uint64_t key, uint64_t round, int missing_rank, Absence why)> on_orphaned_round;
  // Sync mode: called, on the key's lane, each time a round's sum is complete.
  std::function<void()> on_round_complete;
  // Refuse requests for keys not placed on this server (Place): a peer can
  // then make a server hold only the keys of declared tensors, at their
  // declared sizes. Servers set it; tests of the store alone may not.
  bool require_placement = false;
  // Set: ssp mode with this staleness (rounds a worker may read ahead of the
  // slowest); `async` is then ignored.
  std::optional<int> ssp_staleness = std::nullopt;
};

// A reply the server must send: `to` is the worker's node id.
struct Reply {
  int32_t to;
  Message message;
};

class KeyStore {
 public:
  KeyStore(KeyStoreOptions options, SummationEngine* engine, BufferPool* pool);
  ~KeyStore();

  // `push`: a validated PUSH from the worker of rank `rank` (node id in the
  // header's sender). Appends the replies it causes to `out`.
  void Push(const Message& push, int rank, std::vector<Reply>* out);
  // `pull`: a validated PULL; appends the reply if the round is complete.
  void Pull(const Message& pull, int rank, std::vector<Reply>* out);

  // The scheduler placed `key` of `bytes` on this server (a tensor was
  // declared); its pushes and sums travel in `form` (fp32 keys only: a
  // compressed key whose bytes are not a chunk of floats is not placed).
  void Place(uint64_t key, uint64_t bytes, compression::Spec form = {});

  // From now on a round takes `n` contributors' pushes (see the header
  // comment); before any request arrives.
  void SetContributors(int n) { contributors_ = n; }
  int contributors() const { return contributors_; }

  size_t num_keys() const;
  std::vector<uint64_t> keys() const;

  // Worker `rank` finished: it pushes nothing more. Later pushes to rounds it
  // has not pushed report the round as orphaned.
  void MarkFinished(int rank);
  // Worker `rank` waits at barrier `sequence`; ClearBarrier: that barrier was
  // released and its workers push again.
  void MarkAtBarrier(int rank, uint64_t sequence);
  void ClearBarrier(uint64_t sequence);
  // Reports every round of `key` orphaned by an absent worker (run it on the
  // key's lane, like Push and Pull).
  void CheckOrphanedRounds(uint64_t key);
  // Whether round `round` of `key` is open and still lacks the push of
  // `rank`, which is still absent as `why` says (in ssp mode: a pull of
  // `round` still waits for a push of `rank`) (on the key's lane).
  bool StillOrphaned(uint64_t key, uint64_t round, int rank, const Absence& why) const;

 private:
  struct Waiter {
    int32_t to;
    uint64_t request_id;
    int rank;
    int64_t priority;  // of the request: its reply's
  };
  struct Round {
    Buffer sum;                       // valid once the first push is in (arrival order) or at completion
    std::vector<Buffer> by_rank;      // deterministic mode: each worker's push until completion
    std::vector<bool> pushed;         // by rank
    int pushes = 0;
    std::vector<bool> pulled;         // by rank: has had its answer
    int pulls_answered = 0;           // distinct ranks answered
    bool complete = false;
    bool average = false;
    std::vector<Waiter> waiting;      // pulls that came before completion
  };
  struct KeyState {
    uint64_t id = 0;
    DType dtype;
    // Sync mode: a round below this that is no longer in `rounds` was served
    // to every worker; requests for it are late duplicates.
    uint64_t rounds_served_below = 0;
    size_t bytes = 0;
    std::unordered_map<uint64_t, Round> rounds;  // sync mode: rounds in progress
    Buffer value;                                // async and ssp modes: the running sum
    std::unique_ptr<RoundClock> clock;           // ssp mode: the rounds each worker pushed
    std::vector<std::pair<uint64_t, Waiter>> stale_reads;  // ssp mode: (round, pull) waiting for the clock
    compression::Spec form;                      // kNone: pushes and sums travel as they are
    std::unique_ptr<compression::ErrorFeedback> feedback;  // compressed keys: what the sums sent so far lost
    bool compressed() const { return form.kind != compression::Kind::kNone; }
    // The bytes a push carries: the key's, or their compressed form.
    size_t PushBytes() const { return compressed() ? compression::CompressedBytes(form, bytes / 4) : bytes; }
  };
  struct Placed {
    uint64_t bytes = 0;
    compression::Spec form;
  };

  // Finds or creates the key's state; an error reply if the message does not match it.
  KeyState* StateFor(const Message& m, std::vector<Reply>* out);
  void PushSync(KeyState& key, const Message& push, int rank, std::vector<Reply>* out);
  void PushAsync(KeyState& key, const Message& push, std::vector<Reply>* out);
  void PushStale(KeyState& key, const Message& push, int rank, std::vector<Reply>* out);
  // Async and ssp modes: adds `payload` to the key's value (divided by the
  // number of workers when `average`).
  void AddToValue(KeyState& key, const Buffer& payload, bool average);
  // Ssp mode: answers, with one snapshot of the value, every waiting pull the
  // clock now allows.
  void AnswerStaleReads(KeyState& key, std::vector<Reply>* out);
  // Ssp mode: calls on_orphaned_round for a waiting pull that needs a push of
  // an absent worker.
  void ReportIfStaleReadOrphaned(const KeyState& key);
  // Takes a compressed push into the round (see the header comment); an
  // error, with the round unchanged, if the chunk is not the key's form.
  Status TakeCompressed(KeyState& key, Round& round, int rank, const Buffer& payload);
  void Complete(KeyState& key, uint64_t number, Round& round);
  // Answers one pull of a complete round; drops the round once all workers have theirs.
  void Answer(KeyState& key, uint64_t round_number, Round& round, const Waiter& w, std::vector<Reply>* out);
  // The PULL_REPLY carrying `value` (shared, not copied) to pull `w` of round `number`.
  Reply SumReply(const KeyState& key, uint64_t number, const Waiter& w, const Buffer& value) const;
  Message ReplyTo(const Message& request, proto::Op op) const;
  // Calls on_orphaned_round for an absent worker this incomplete round lacks.
  void ReportIfOrphaned(const KeyState& key, uint64_t number, const Round& round);
  // Async mode: a pooled copy of the key's current value (zeros before any push).
  Buffer Snapshot(const KeyState& key);
  // `payload` itself if it starts at a multiple of the element size, as the
  // summation kernels require; else a pooled copy. (A transport may hand over
  // frames at any address: small ones sit back to back in its receive buffer.)
  Buffer ElementAligned(const Buffer& payload, DType dtype);

  const KeyStoreOptions options_;
  std::atomic<int> contributors_;
  SummationEngine* const engine_;
  BufferPool* const pool_;
  mutable Mutex map_mu_;  // guards the map itself, not the states
  std::unordered_map<uint64_t, std::unique_ptr<KeyState>> keys_ GUARDED_BY(map_mu_);
  std::unordered_map<uint64_t, Placed> placed_ GUARDED_BY(map_mu_);
  // Absent workers, by rank; absent_count_ is a fast "none absent" for every push.
  std::atomic<int> absent_count_{0};
  mutable Mutex absent_mu_;
  std::vector<std::optional<Absence>> absent_ GUARDED_BY(absent_mu_);
  // Sets (or with nullopt clears) a worker's absence.
  void SetAbsenceLocked(int rank, std::optional<Absence> why) REQUIRES(absent_mu_);
};

// Sync mode: a push or pull of a round this far or further beyond the rounds
// every worker has finished on its key is refused. Each open round may hold a
// buffer of the key's size, so this bounds what one peer running ahead (or
// sending rounds from far in the future) can make a server keep per key.
inline constexpr uint64_t kMaxRoundsAhead = 256;

// An ERROR reply to `request` carrying `why`.
Reply ErrorReply(const Message& request, const std::string& why);

}  // namespace syncline
