// HeaderRing: the message headers one process sends a colocated peer, in a
// ring inside the sender's shared-memory segment, with a futex doorbell. It
// lets colocated processes pass whole messages (header here, payload in the
// segment's data area) without a socket and its I/O threads in between.
//
// One producer (the segment's owner, serialized by its Outbox) and one
// consumer (the peer's poller thread). Records are a 4-byte length and the
// header's bytes, padded to 8; they may wrap around the end of the ring.
// The layout lives in shared memory: only lock-free atomics and bytes.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace syncline {

class HeaderRing {
 public:
  static constexpr uint32_t kBytes = 32 * 1024;
  // The largest record Post accepts; a message's header is far smaller
  // (address books, the one big header, never go between colocated peers).
  static constexpr size_t kMaxRecordBytes = kBytes / 4;

  // Called once by the owner on a fresh segment.
  void Init();

  // Producer. False if the ring has no room for `record` now.
  bool Post(std::string_view record);
  // True once the consumer polls this ring (Attach); from then on the
  // producer sends this peer every message through the ring.
  bool attached() const { return reader_attached_.load(std::memory_order_acquire) != 0; }
  // True when the consumer has delivered every record posted so far.
  bool drained() const {
    return delivered_.load(std::memory_order_acquire) == posted_.load(std::memory_order_acquire);
  }

  // Consumer.
  void Attach() { reader_attached_.store(1, std::memory_order_release); }
  // The consumer stops reading (it is closing): the producer goes back to the socket.
  void Detach() { reader_attached_.store(0, std::memory_order_release); }
  enum class Take { kRecord, kEmpty, kCorrupt };
  // Moves the oldest record into `*record`. kCorrupt: the ring's indices or
  // a length make no sense; nothing more can be read from it.
  Take Next(std::string* record);
  // Sleeps until the producer posts or `timeout_ms` passes.
  void Wait(int timeout_ms);
  // Called once the message of a record taken by Next has been handled
  // (delivered or dropped).
  void MarkDelivered() { delivered_.fetch_add(1, std::memory_order_release); }

 private:
  alignas(64) std::atomic<uint32_t> reader_attached_;
  alignas(64) std::atomic<uint64_t> written_;  // bytes ever posted (producer)
  std::atomic<uint64_t> posted_;               // records ever posted (producer)
  std::atomic<uint32_t> doorbell_;             // futex word: bumped on every post
  alignas(64) std::atomic<uint64_t> read_;     // bytes ever consumed (consumer)
  std::atomic<uint64_t> delivered_;            // records ever handled (consumer)
  std::atomic<uint32_t> reader_sleeping_;
  alignas(64) uint8_t bytes_[kBytes];
};

static_assert(std::atomic<uint64_t>::is_always_lock_free && std::atomic<uint32_t>::is_always_lock_free,
              "shared-memory atomics must be lock-free");

}  // namespace syncline
