// Shared-memory segments for payloads between colocated processes.
//
// Outbox: a sender's segment for one peer — an anonymous memfd, so the
// kernel frees it when the last process holding it dies: nothing to clean up
// by hand. Payloads are placed in a ring; each placement takes a slot whose
// release flag (in the segment) the receiver sets when it is done reading.
// The sender reclaims space in placement order.
//
// Each segment also holds a HeaderRing: once the receiver polls it, the
// sender passes it the headers too, not only the payloads.
//
// PeerSegment: the receiver's mapping of a sender's outbox, opened through
// /proc/<pid>/fd/<fd>.
//
// Thread-safety: Outbox is thread-safe; PeerSegment is immutable after Open.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "common/buffer.h"
#include "common/mutex.h"
#include "common/status.h"
#include "transport/shm/header_ring.h"

namespace syncline {

struct SegmentLayout {
  static constexpr uint64_t kMagic = 0x53594e434c53484dull;  // "SYNCLSHM"
  static constexpr uint32_t kSlots = 4096;
  static constexpr size_t kDataOffset = 64 * 1024;  // header + flags, page aligned
  uint64_t magic;
  uint64_t total_bytes;
  std::atomic<uint32_t> released[kSlots];  // 1: the receiver is done with the slot's bytes
  HeaderRing ring;
};
static_assert(sizeof(SegmentLayout) <= SegmentLayout::kDataOffset);

class Outbox {
 public:
  struct Placement {
    uint32_t slot;
    uint64_t offset;  // from the segment start
    uint8_t* data;
  };

  // A segment of `bytes` bytes of payload space.
  static Result<std::unique_ptr<Outbox>> Create(size_t bytes);
  ~Outbox();

  // Copies `payloads` (`bytes` in all) into contiguous room in the segment,
  // under a slot of their own, or returns nothing if the ring is full now.
  std::optional<Placement> Place(const std::vector<Buffer>& payloads, uint64_t bytes) EXCLUDES(mu_);
  // Gives a placement back unused (as the receiver's release would).
  void Unplace(uint32_t slot);
  // Passes a header to the peer through the segment's ring; false if the
  // ring is full now.
  bool PostHeader(std::string_view record) EXCLUDES(mu_);
  // True once the peer polls this segment's ring.
  bool ring_attached() const { return layout_->ring.attached(); }
  // True when the peer has handled every header posted to the ring.
  bool ring_drained() const { return layout_->ring.drained(); }
  // True the first time it is asked only: that payload goes through the
  // segment whatever its size, so that the peer maps it and attaches the
  // ring before large payloads come (else small messages keep the socket).
  bool TakeFirstOffer() { return !offered_.exchange(true); }
  int fd() const { return fd_; }
  uint64_t segment_bytes() const { return total_; }

 private:
  struct Live {
    uint32_t slot;
    uint64_t offset;  // in the data area
    uint64_t length;
  };
  Outbox(int fd, uint8_t* base, uint64_t total);
  // Room for `bytes` contiguous bytes, as Place.
  std::optional<Placement> Reserve(uint64_t bytes) EXCLUDES(mu_);
  void ReclaimLocked() REQUIRES(mu_);

  const int fd_;
  uint8_t* const base_;
  const uint64_t total_;
  const uint64_t capacity_;  // data area bytes
  SegmentLayout* const layout_;
  Mutex mu_;  // also serializes the producer side of the header ring
  std::deque<Live> live_ GUARDED_BY(mu_);  // in placement order
  std::vector<uint32_t> free_slots_ GUARDED_BY(mu_);
  uint64_t head_ GUARDED_BY(mu_) = 0;  // next placement offset in the data area
  std::atomic<bool> offered_{false};
};

class PeerSegment {
 public:
  // Maps the segment `fd` of process `pid`, checking its size and magic.
  static Result<std::shared_ptr<PeerSegment>> Open(int32_t pid, int32_t fd, uint64_t segment_bytes);
  ~PeerSegment();

  // The bytes [offset, offset+length), or an error if out of bounds.
  Result<const uint8_t*> At(uint64_t offset, uint64_t length) const;
  // Tells the sender the slot's bytes may be reused.
  void Release(uint32_t slot) const;
  // The sender's ring of headers for this receiver.
  HeaderRing& ring() const { return reinterpret_cast<SegmentLayout*>(base_)->ring; }

 private:
  PeerSegment(uint8_t* base, uint64_t total) : base_(base), total_(total) {}
  uint8_t* const base_;
  const uint64_t total_;
};

}  // namespace syncline
