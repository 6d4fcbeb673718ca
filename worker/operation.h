// Operation: one push_pull in flight, and the handle a caller waits on.
// The tensor is cut into chunks; each chunk is pushed straight from the
// caller's memory (zero-copy) and its pulled sum is written back in place.
// A chunk's result is copied in only after the transport has released the
// pushed bytes, so a reply can never overwrite memory still being sent
// (unless the reply is those very bytes: then nothing is copied).
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/buffer.h"
#include "common/deadline.h"
#include "common/status.h"

namespace syncline {

class Operation : public std::enable_shared_from_this<Operation> {
 public:
  // `data`: the caller's tensor; `chunk_offsets/lengths` in bytes.
  Operation(std::string tensor_name, uint8_t* data, std::vector<uint64_t> chunk_offsets,
            std::vector<uint64_t> chunk_lengths);

  // The bytes of chunk `i`, as a Buffer whose release (when the transport
  // is done with it) is reported to this operation.
  Buffer SendView(size_t i);
  // The sum for chunk `i` arrived.
  void OnReply(size_t i, Buffer payload);
  // The operation failed (server error, abort, send failure); first failure wins.
  void Fail(const Status& status);

  // Waits until every chunk is back, or the operation failed and the
  // transport released the caller's memory. DeadlineExceeded otherwise: the
  // memory may then still be read by the transport until the worker is
  // destroyed.
  Status Wait(Deadline deadline);
  bool Done() const;
  const std::string& tensor_name() const { return name_; }
  uint64_t bytes() const { return bytes_; }

 private:
  struct Chunk {
    bool released = false;          // transport no longer reads the pushed bytes
    std::optional<Buffer> reply;    // arrived, not yet written back
    bool finished = false;
  };
  void OnReleased(size_t i);
  // Writes the reply of chunk `i` back if both halves are in; lock held.
  // The spent reply goes to `*done_with`, for the caller to drop unlocked.
  void MaybeFinishLocked(size_t i, std::unique_lock<std::mutex>& lock, Buffer* done_with);

  const std::string name_;
  uint8_t* const data_;
  const std::vector<uint64_t> offsets_, lengths_;
  uint64_t bytes_ = 0;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Chunk> chunks_;   // GUARDED_BY(mu_)
  size_t remaining_;            // GUARDED_BY(mu_)
  size_t releases_pending_;     // GUARDED_BY(mu_)
  std::optional<Status> error_; // GUARDED_BY(mu_)
};

// What PushPull returns: wait on it before touching the tensor again.
// `finish`, if given, runs once after the operation succeeded (e.g. copying
// a staged result back to GPU memory); its Status is what Wait returns.
class OpHandle {
 public:
  OpHandle() = default;
  explicit OpHandle(std::shared_ptr<Operation> op, std::function<Status()> finish = nullptr)
      : op_(std::move(op)), finish_(finish ? std::make_shared<Finish>(std::move(finish)) : nullptr) {}
  Status Wait(Deadline deadline) const {
    if (!op_) return FailedPrecondition("waiting on an empty handle");
    Status st = op_->Wait(deadline);
    if (!st.ok() || !finish_) return st;
    std::call_once(finish_->once, [this] { finish_->result = finish_->run(); });
    return finish_->result;
  }
  bool Done() const { return !op_ || op_->Done(); }

 private:
  struct Finish {
    explicit Finish(std::function<Status()> f) : run(std::move(f)) {}
    std::function<Status()> run;
    std::once_flag once;
    Status result;
  };
  std::shared_ptr<Operation> op_;
  std::shared_ptr<Finish> finish_;
};

}  // namespace syncline
