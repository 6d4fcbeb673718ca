#include "transport/shm/segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "common/tsan_annotations.h"

namespace syncline {
namespace {
constexpr uint64_t kAlign = 64;
uint64_t AlignUp(uint64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }
std::string Errno(const char* what) { return std::string(what) + ": " + std::strerror(errno); }
}  // namespace

Result<std::unique_ptr<Outbox>> Outbox::Create(size_t bytes) {
  const uint64_t total = SegmentLayout::kDataOffset + AlignUp(bytes);
  const int fd = memfd_create("syncline-outbox", MFD_CLOEXEC);
  if (fd < 0) return Unavailable(Errno("memfd_create"));
  if (ftruncate(fd, static_cast<off_t>(total)) != 0) {
    close(fd);
    return Unavailable(Errno("sizing a shared-memory segment"));
  }
  void* base = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    close(fd);
    return Unavailable(Errno("mapping a shared-memory segment"));
  }
  return std::unique_ptr<Outbox>(new Outbox(fd, static_cast<uint8_t*>(base), total));
}

Outbox::Outbox(int fd, uint8_t* base, uint64_t total)
    : fd_(fd),
      base_(base),
      total_(total),
      capacity_(total - SegmentLayout::kDataOffset),
      layout_(reinterpret_cast<SegmentLayout*>(base)) {
  layout_->magic = SegmentLayout::kMagic;
  layout_->total_bytes = total;
  for (uint32_t i = 0; i < SegmentLayout::kSlots; ++i) {
    layout_->released[i].store(0, std::memory_order_relaxed);
    free_slots_.push_back(SegmentLayout::kSlots - 1 - i);
  }
  layout_->ring.Init();
}

Outbox::~Outbox() {
  munmap(base_, total_);
  close(fd_);
}

void Outbox::ReclaimLocked() {
  while (!live_.empty() && layout_->released[live_.front().slot].load(std::memory_order_acquire) == 1) {
    TsanAcquire(&layout_->released[live_.front().slot]);  // see Place
    layout_->released[live_.front().slot].store(0, std::memory_order_relaxed);
    free_slots_.push_back(live_.front().slot);
    live_.pop_front();
  }
  if (live_.empty()) head_ = 0;
}

std::optional<Outbox::Placement> Outbox::Place(const std::vector<Buffer>& payloads, uint64_t bytes) {
  std::optional<Placement> placement = Reserve(bytes);
  if (!placement) return placement;
  uint8_t* out = placement->data;
  for (const Buffer& b : payloads) {
    if (b.size() > 0) std::memcpy(out, b.data(), b.size());
    out += b.size();
  }
  // The copy runs outside mu_, so whoever places over these bytes next is
  // ordered after it only through the receiver, which reads them and then
  // sets the slot's release flag through its own mapping of the segment (in
  // another process, or at another address in this one). ThreadSanitizer
  // cannot connect that store to ReclaimLocked's load: this tells it.
  TsanRelease(&layout_->released[placement->slot]);
  return placement;
}

std::optional<Outbox::Placement> Outbox::Reserve(uint64_t bytes) {
  const uint64_t length = AlignUp(bytes > 0 ? bytes : 1);
  MutexLock lock(mu_);
  ReclaimLocked();
  if (free_slots_.empty() || length > capacity_) return std::nullopt;
  uint64_t at;
  if (live_.empty()) {
    at = 0;
  } else {
    const uint64_t oldest = live_.front().offset;
    if (head_ > oldest) {  // live bytes are [oldest, head_): room after head_, else before oldest
      if (head_ + length <= capacity_) at = head_;
      else if (length <= oldest) at = 0;
      else return std::nullopt;
    } else {  // wrapped: live bytes are [oldest, capacity_) and [0, head_)
      if (head_ + length <= oldest) at = head_;
      else return std::nullopt;
    }
  }
  const uint32_t slot = free_slots_.back();
  free_slots_.pop_back();
  live_.push_back({slot, at, length});
  head_ = at + length;
  return Placement{slot, SegmentLayout::kDataOffset + at, base_ + SegmentLayout::kDataOffset + at};
}

void Outbox::Unplace(uint32_t slot) {
  if (slot < SegmentLayout::kSlots) layout_->released[slot].store(1, std::memory_order_release);
}

bool Outbox::PostHeader(std::string_view record) {
  MutexLock lock(mu_);
  return layout_->ring.Post(record);
}

Result<std::shared_ptr<PeerSegment>> PeerSegment::Open(int32_t pid, int32_t fd, uint64_t segment_bytes) {
  if (segment_bytes <= SegmentLayout::kDataOffset || segment_bytes > (uint64_t{1} << 40))
    return InvalidArgument("implausible shared-memory segment size " + std::to_string(segment_bytes));
  const std::string path = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd);
  const int local = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (local < 0) return Unavailable(Errno(("opening " + path).c_str()));
  const off_t size = lseek(local, 0, SEEK_END);
  if (size < 0 || static_cast<uint64_t>(size) != segment_bytes) {
    close(local);
    return InvalidArgument(path + " is not a segment of " + std::to_string(segment_bytes) + " bytes");
  }
  void* base = mmap(nullptr, segment_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, local, 0);
  close(local);  // the mapping keeps the memory
  if (base == MAP_FAILED) return Unavailable(Errno("mapping a peer's segment"));
  auto* layout = static_cast<SegmentLayout*>(base);
  if (layout->magic != SegmentLayout::kMagic || layout->total_bytes != segment_bytes) {
    munmap(base, segment_bytes);
    return InvalidArgument(path + " is not a Syncline segment");
  }
  return std::shared_ptr<PeerSegment>(new PeerSegment(static_cast<uint8_t*>(base), segment_bytes));
}

PeerSegment::~PeerSegment() { munmap(base_, total_); }

Result<const uint8_t*> PeerSegment::At(uint64_t offset, uint64_t length) const {
  if (offset < SegmentLayout::kDataOffset || offset > total_ || length > total_ - offset)
    return InvalidArgument("shared-memory range [" + std::to_string(offset) + ", +" + std::to_string(length) +
                           ") is outside the segment");
  return base_ + offset;
}

void PeerSegment::Release(uint32_t slot) const {
  if (slot >= SegmentLayout::kSlots) return;
  reinterpret_cast<SegmentLayout*>(base_)->released[slot].store(1, std::memory_order_release);
}

}  // namespace syncline
