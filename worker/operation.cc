#include "worker/operation.h"

#include <cstring>

namespace syncline {

Operation::Operation(std::string tensor_name, uint8_t* data, std::vector<uint64_t> chunk_offsets,
                     std::vector<uint64_t> chunk_lengths, DoneCallback on_done, uint8_t* output,
                     std::shared_ptr<ChunkCodec> codec, Deliver deliver)
    : name_(std::move(tensor_name)),
      data_(data),
      output_(output != nullptr ? output : data),
      offsets_(std::move(chunk_offsets)),
      lengths_(std::move(chunk_lengths)),
      codec_(std::move(codec)),
      deliver_(std::move(deliver)),
      chunks_(offsets_.size()),
      remaining_(offsets_.size()),
      on_done_(std::move(on_done)) {
  for (uint64_t l : lengths_) bytes_ += l;
}

Operation::DoneCallback Operation::TakeDoneLocked(Status* status) {
  const bool ended = remaining_ == 0 || (error_.has_value() && releases_pending_ == 0);
  if (!ended || !on_done_) return nullptr;
  *status = ResultLocked();
  return std::move(on_done_);
}

std::optional<Buffer> Operation::SendView(size_t i, uint64_t seed) {
  if (codec_) return Encode(i, seed);
  const uint8_t* source;
  {
    MutexLock lock(mu_);
    if (error_) return std::nullopt;
    ++releases_pending_;
    source = SourceLocked(i);
  }
  // The owner holds no memory: its deleter only reports the release. It
  // keeps the operation alive until then.
  auto self = shared_from_this();
  std::shared_ptr<const void> owner(source, [self, i](const void*) { self->OnReleased(i); });
  return Buffer(source, lengths_[i], std::move(owner));
}

std::optional<Buffer> Operation::RawView(size_t i) {
  {
    MutexLock lock(mu_);
    if (error_) return std::nullopt;
    ++releases_pending_;
  }
  auto self = shared_from_this();
  std::shared_ptr<const void> owner(data_ + offsets_[i], [self, i](const void*) { self->OnReleased(i); });
  return Buffer(data_ + offsets_[i], lengths_[i], std::move(owner));
}

bool Operation::SumLocally(size_t i, const std::function<void(uint8_t* target)>& add) {
  {
    MutexLock lock(mu_);
    if (error_) return false;
    // The caller's memory is written: a failure meanwhile must not let Wait
    // return (and the caller free it) until this is done.
    ++releases_pending_;
  }
  uint8_t* target = output_ + offsets_[i];
  if (output_ != data_) std::memcpy(target, data_ + offsets_[i], lengths_[i]);
  add(target);
  DoneCallback done;
  Status status;
  {
    MutexLock lock(mu_);
    --releases_pending_;
    chunks_[i].summed_locally = true;
    done = TakeDoneLocked(&status);
    cv_.NotifyAll();
  }
  RunDone(std::move(done), status);
  return true;
}

std::optional<Buffer> Operation::Encode(size_t i, uint64_t seed) {
  {
    MutexLock lock(mu_);
    if (error_) return std::nullopt;
    // The encoder reads the caller's memory: a failure meanwhile must not
    // let Wait return (and the caller free it) until it is done.
    ++releases_pending_;
  }
  const uint8_t* source;
  {
    MutexLock lock(mu_);
    source = SourceLocked(i);
  }
  Result<Buffer> encoded = codec_->Encode(i, reinterpret_cast<const float*>(source), seed);
  Buffer done_with;
  DoneCallback done;
  Status status;
  bool deliver = false;
  {
    MutexLock lock(mu_);
    --releases_pending_;
    if (!encoded.ok()) {
      if (!error_ && remaining_ > 0)
        error_ = encoded.status().WithContext("compressing chunk " + std::to_string(i) + " of tensor '" + name_ + "'");
    } else {
      chunks_[i].released = true;  // the pushed bytes are the encoded copy's
      deliver = MaybeFinishLocked(i, &done_with);
    }
    done = TakeDoneLocked(&status);
    cv_.NotifyAll();
  }
  AfterChunkUnlocked(i, std::move(done_with), deliver, std::move(done), status);
  if (!encoded.ok()) return std::nullopt;
  return std::move(encoded).value();
}

void Operation::OnReleased(size_t i) {
  Buffer done_with;
  DoneCallback done;
  Status status;
  bool deliver;
  {
    MutexLock lock(mu_);
    chunks_[i].released = true;
    --releases_pending_;
    deliver = MaybeFinishLocked(i, &done_with);
    done = TakeDoneLocked(&status);
    cv_.NotifyAll();
  }
  AfterChunkUnlocked(i, std::move(done_with), deliver, std::move(done), status);
}

void Operation::AfterChunkUnlocked(size_t i, Buffer done_with, bool deliver, DoneCallback done, const Status& status) {
  done_with = Buffer();
  if (deliver) deliver_(shared_from_this(), i);
  RunDone(std::move(done), status);
}

std::shared_ptr<void> Operation::Hold() {
  {
    MutexLock lock(mu_);
    if (error_) return nullptr;
    ++releases_pending_;
  }
  // The token points at this operation only to be non-null; its deleter
  // ends the hold, keeping the operation alive until then.
  return std::shared_ptr<void>(static_cast<void*>(this), [self = shared_from_this()](void*) { self->EndHold(); });
}

void Operation::EndHold() {
  DoneCallback done;
  Status status;
  {
    MutexLock lock(mu_);
    --releases_pending_;
    done = TakeDoneLocked(&status);
    cv_.NotifyAll();
  }
  RunDone(std::move(done), status);
}

void Operation::Delivered(size_t i, const Status& delivered) {
  DoneCallback done;
  Status status;
  {
    MutexLock lock(mu_);
    --releases_pending_;
    // A failed delivery does not stop the other chunks: the servers' round
    // needs them all, only this caller lacks the chunk's sum.
    if (!delivered.ok() && !delivery_error_)
      delivery_error_ = delivered.WithContext("tensor '" + name_ + "': chunk " + std::to_string(i));
    --remaining_;
    done = TakeDoneLocked(&status);
    cv_.NotifyAll();
  }
  RunDone(std::move(done), status);
}

void Operation::OnReply(size_t i, Buffer payload) {
  Buffer done_with;  // dropped after the lock: dropping it may report a release
  DoneCallback done;
  Status status;
  bool deliver = false;
  {
    MutexLock lock(mu_);
    if (error_ || chunks_[i].finished || chunks_[i].reply) return;
    const uint64_t expected = codec_ ? codec_->WireBytes(i) : lengths_[i];
    if (payload.size() != expected) {
      error_ = Internal("tensor '" + name_ + "': chunk " + std::to_string(i) + " came back with " +
                        std::to_string(payload.size()) + " bytes instead of " + std::to_string(expected) +
                        (codec_ ? " (compressed as " + codec_->form().Name() + ")" : ""));
    } else {
      chunks_[i].reply = std::move(payload);
      deliver = MaybeFinishLocked(i, &done_with);
    }
    done = TakeDoneLocked(&status);
    cv_.NotifyAll();
  }
  AfterChunkUnlocked(i, std::move(done_with), deliver, std::move(done), status);
}

bool Operation::MaybeFinishLocked(size_t i, Buffer* done_with) {
  Chunk& c = chunks_[i];
  if (!c.reply || c.finished || error_) return false;
  // A one-worker job on an in-process transport: the server's sum is the
  // very view this chunk pushed, so the result is in place already, and the
  // reply itself holds the push's release back.
  const bool in_place = !codec_ && c.reply->data() == data_ + offsets_[i];
  if (!in_place && !c.released) return false;
  if (codec_) {
    Status decoded = codec_->Decode(i, *c.reply, reinterpret_cast<float*>(output_ + offsets_[i]));
    if (!decoded.ok()) {
      error_ = decoded.WithContext("tensor '" + name_ + "': the sum of chunk " + std::to_string(i));
      *done_with = std::move(*c.reply);
      c.reply.reset();
      return false;
    }
  } else if (!in_place || output_ != data_) {
    std::memcpy(output_ + offsets_[i], c.reply->data(), lengths_[i]);
  }
  *done_with = std::move(*c.reply);
  c.reply.reset();
  c.finished = true;
  if (deliver_) {
    ++releases_pending_;  // the deliver stage works on the caller's memory until Delivered
    return true;
  }
  if (--remaining_ == 0) cv_.NotifyAll();
  return false;
}

void Operation::Fail(const Status& status) {
  DoneCallback done;
  Status result;
  {
    MutexLock lock(mu_);
    if (!error_ && remaining_ > 0) error_ = status;
    done = TakeDoneLocked(&result);
    cv_.NotifyAll();
  }
  RunDone(std::move(done), result);
}

std::optional<Status> Operation::failure() const {
  MutexLock lock(mu_);
  return error_;
}

void Operation::RunDoneIfEnded() {
  DoneCallback done;
  Status status;
  {
    MutexLock lock(mu_);
    done = TakeDoneLocked(&status);
  }
  RunDone(std::move(done), status);
}

Status Operation::Wait(Deadline deadline) {
  MutexLock lock(mu_);
  // A failed operation returns only once the transport has let go of the
  // caller's memory (the worker closes its endpoint on abort, which drops
  // queued sends), so the caller may free it as soon as Wait returns.
  const bool done = cv_.WaitUntil(mu_, deadline, [this]() REQUIRES(mu_) {
    return remaining_ == 0 || (error_.has_value() && releases_pending_ == 0);
  });
  if (done) return ResultLocked();
  std::string what = error_ ? error_->message() + "; " : "";
  return DeadlineExceeded(what + "push_pull of tensor '" + name_ + "': " + std::to_string(remaining_) + " of " +
                          std::to_string(chunks_.size()) + " chunks still outstanding and " +
                          std::to_string(releases_pending_) +
                          " still held by the transport: keep the tensor's memory until the worker is destroyed");
}

bool Operation::Done() const {
  MutexLock lock(mu_);
  return remaining_ == 0 || (error_.has_value() && releases_pending_ == 0);
}

}  // namespace syncline
