// Operation: one push_pull in flight, and the handle a caller waits on.
// The tensor is cut into chunks; each chunk is pushed straight from the
// caller's memory (zero-copy) and its pulled sum is written back in place.
// A chunk's result is copied in only after the transport has released the
// pushed bytes, so a reply can never overwrite memory still being sent
// (unless the reply is those very bytes: then nothing is copied).
// A compressed tensor's chunks (a ChunkCodec) are encoded when they are sent
// and their sums decoded into place instead.
// A device tensor's operation works on a pinned host copy; each chunk's sum,
// once written there, is handed to a `deliver` stage (the copy back to the
// device) and the chunk ends when that stage says it is Delivered.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/buffer.h"
#include "common/deadline.h"
#include "common/mutex.h"
#include "common/status.h"
#include "worker/chunk_codec.h"

namespace syncline {

class Operation : public std::enable_shared_from_this<Operation> {
 public:
  // Runs once when the operation ends: every chunk back and written (OK),
  // or failed once the transport released the caller's memory. It runs on
  // whichever Syncline thread ended it (often the network's), so it must be
  // quick and must not block.
  using DoneCallback = std::function<void(const Status&)>;
  // Called once chunk `i`'s sum is written, outside the operation's lock;
  // the chunk ends at Delivered(i, ...).
  using Deliver = std::function<void(std::shared_ptr<Operation> op, size_t i)>;

  // `data`: the caller's tensor; `chunk_offsets/lengths` in bytes; the sums
  // are written into `output` (of the same size), or into `data` if null.
  // `codec`: the tensor is compressed (fp32 chunks), as it says.
  // `deliver`: a stage each written chunk still passes (null: none).
  Operation(std::string tensor_name, uint8_t* data, std::vector<uint64_t> chunk_offsets,
            std::vector<uint64_t> chunk_lengths, DoneCallback on_done = nullptr, uint8_t* output = nullptr,
            std::shared_ptr<ChunkCodec> codec = nullptr, Deliver deliver = nullptr);

  // The bytes of chunk `i`, as a Buffer whose release (when the transport
  // is done with it) is reported to this operation; none once the operation
  // failed (its caller may already have been told the memory is free).
  // Compressed: the chunk encoded now into a buffer of its own (`seed`
  // chooses randomk's indices), and the tensor's chunk is released at once.
  std::optional<Buffer> SendView(size_t i, uint64_t seed = 0);
  // Local reduce (worker/local_reduce.h). RawView: chunk `i` as the caller
  // gave it, uncompressed, tracked like SendView (for the local worker that
  // pushes it for the host). SumLocally: `add` sums the local peers' copies
  // into chunk `i` of the output (which starts as a copy of the input) and
  // from then on the chunk is pushed from there; false, `add` not run, once
  // the operation failed.
  std::optional<Buffer> RawView(size_t i);
  bool SumLocally(size_t i, const std::function<void(uint8_t* target)>& add);
  // The sum for chunk `i` arrived.
  void OnReply(size_t i, Buffer payload);
  // The deliver stage is done with chunk `i`: it ends, and if `status` is
  // not OK the operation ends with it, once every other chunk has (they
  // still go out: the servers' round needs them).
  void Delivered(size_t i, const Status& status);
  // For a stage outside the transport that works on the caller's memory (a
  // device copy): while the returned token lives, a failed operation's Wait
  // and done callback hold back, as for memory the transport still reads.
  // Null once the operation failed.
  std::shared_ptr<void> Hold();
  // The operation failed (server error, abort, send failure); first failure wins.
  void Fail(const Status& status);
  // Runs the done callback now if the operation has ended already (it has no chunks).
  void RunDoneIfEnded();

  // Waits until every chunk is back, or the operation failed and the
  // transport released the caller's memory. DeadlineExceeded otherwise: the
  // memory may then still be read by the transport until the worker is
  // destroyed.
  Status Wait(Deadline deadline);
  // Wait would return at once.
  bool Done() const;
  // The failure that ended it (the first), if one did.
  std::optional<Status> failure() const;
  const std::string& tensor_name() const { return name_; }
  // Where chunk `i` lies in the tensor, in bytes.
  uint64_t chunk_offset(size_t i) const { return offsets_[i]; }
  uint64_t chunk_length(size_t i) const { return lengths_[i]; }
  // When the push_pull began.
  Clock::time_point started() const { return started_; }
  uint64_t bytes() const { return bytes_; }

 private:
  struct Chunk {
    bool released = false;          // transport no longer reads the pushed bytes
    std::optional<Buffer> reply;    // arrived, not yet written back
    bool finished = false;
    bool summed_locally = false;    // pushed from output_ (SumLocally)
  };
  // Where chunk `i` is pushed from.
  const uint8_t* SourceLocked(size_t i) const REQUIRES(mu_) {
    return (chunks_[i].summed_locally ? output_ : data_) + offsets_[i];
  }
  void OnReleased(size_t i);
  // SendView of a compressed chunk.
  std::optional<Buffer> Encode(size_t i, uint64_t seed);
  // Writes the reply of chunk `i` back if both halves are in.
  // The spent reply goes to `*done_with`, for the caller to drop unlocked.
  // True if the chunk is now the deliver stage's: the caller then calls
  // deliver_ once unlocked (AfterChunkUnlocked).
  bool MaybeFinishLocked(size_t i, Buffer* done_with) REQUIRES(mu_);
  // What a change to chunk `i` under the lock leaves to do unlocked, in this
  // order: drop the spent reply (its release may end the operation too),
  // hand the chunk to the deliver stage (`deliver`), run the done callback
  // (`done`, if taken) with `status`.
  void AfterChunkUnlocked(size_t i, Buffer done_with, bool deliver, DoneCallback done, const Status& status);
  // A stage's hold (or a view's release) ended: nothing more is owed for it.
  void EndHold();
  // Once the operation has ended, hands out the done callback
  // (once) and the status to call it with; the caller runs it unlocked.
  DoneCallback TakeDoneLocked(Status* status) REQUIRES(mu_);
  // Runs a callback taken by TakeDoneLocked, if any.
  static void RunDone(DoneCallback done, const Status& status) {
    if (done) done(status);
  }

  const std::string name_;
  uint8_t* const data_;
  uint8_t* const output_;
  const std::vector<uint64_t> offsets_, lengths_;
  const std::shared_ptr<ChunkCodec> codec_;  // null: chunks travel as they are
  const Deliver deliver_;                     // null: a written chunk has ended
  uint64_t bytes_ = 0;
  const Clock::time_point started_ = Clock::now();
  mutable Mutex mu_;
  CondVar cv_;
  std::vector<Chunk> chunks_ GUARDED_BY(mu_);
  size_t remaining_ GUARDED_BY(mu_);
  // Views handed out, holds and deliveries under way: what may still touch
  // the caller's memory.
  size_t releases_pending_ GUARDED_BY(mu_) = 0;
  std::optional<Status> error_ GUARDED_BY(mu_);
  std::optional<Status> delivery_error_ GUARDED_BY(mu_);  // the first failed delivery
  // What an operation that has ended returns.
  Status ResultLocked() const REQUIRES(mu_) {
    return error_ ? *error_ : delivery_error_ ? *delivery_error_ : Status::Ok();
  }
  DoneCallback on_done_ GUARDED_BY(mu_);  // empty once run
};

// What PushPull returns: wait on it before touching the tensor again.
class OpHandle {
 public:
  OpHandle() = default;
  explicit OpHandle(std::shared_ptr<Operation> op) : op_(std::move(op)) {}
  Status Wait(Deadline deadline) const {
    if (!op_) return FailedPrecondition("waiting on an empty handle");
    return op_->Wait(deadline);
  }
  bool Done() const { return !op_ || op_->Done(); }

 private:
  std::shared_ptr<Operation> op_;
};

}  // namespace syncline
