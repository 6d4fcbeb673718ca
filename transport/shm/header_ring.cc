#include "transport/shm/header_ring.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <ctime>

namespace syncline {
namespace {

constexpr uint64_t kLengthBytes = 4;
uint64_t RecordBytes(uint64_t length) { return (kLengthBytes + length + 7) / 8 * 8; }

// Futexes on a MAP_SHARED mapping: not FUTEX_PRIVATE, so the two processes'
// different addresses of the same page meet.
long Futex(std::atomic<uint32_t>* word, int op, uint32_t value, const timespec* timeout) {
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, value, timeout, nullptr, 0);
}

}  // namespace

void HeaderRing::Init() {
  reader_attached_.store(0);
  written_.store(0);
  posted_.store(0);
  doorbell_.store(0);
  read_.store(0);
  delivered_.store(0);
  reader_sleeping_.store(0);
}

bool HeaderRing::Post(std::string_view record) {
  if (record.size() > kMaxRecordBytes) return false;
  const uint64_t need = RecordBytes(record.size());
  const uint64_t w = written_.load(std::memory_order_relaxed);
  const uint64_t r = read_.load(std::memory_order_acquire);
  if (w - r + need > kBytes) return false;
  const auto put = [this](uint64_t at, const void* from, size_t n) {
    const size_t start = at % kBytes;
    const size_t first = std::min(n, kBytes - start);
    std::memcpy(bytes_ + start, from, first);
    std::memcpy(bytes_, static_cast<const uint8_t*>(from) + first, n - first);
  };
  const auto length = static_cast<uint32_t>(record.size());
  put(w, &length, kLengthBytes);
  put(w + kLengthBytes, record.data(), record.size());
  posted_.fetch_add(1, std::memory_order_release);
  written_.store(w + need, std::memory_order_seq_cst);
  doorbell_.fetch_add(1, std::memory_order_seq_cst);
  if (reader_sleeping_.load(std::memory_order_seq_cst) != 0) Futex(&doorbell_, FUTEX_WAKE, INT_MAX, nullptr);
  return true;
}

HeaderRing::Take HeaderRing::Next(std::string* record) {
  const uint64_t r = read_.load(std::memory_order_relaxed);
  const uint64_t w = written_.load(std::memory_order_acquire);
  if (w == r) return Take::kEmpty;
  if (w < r || w - r > kBytes || w - r < RecordBytes(0)) return Take::kCorrupt;
  const auto get = [this](uint64_t at, void* to, size_t n) {
    const size_t start = at % kBytes;
    const size_t first = std::min(n, kBytes - start);
    std::memcpy(to, bytes_ + start, first);
    std::memcpy(static_cast<uint8_t*>(to) + first, bytes_, n - first);
  };
  uint32_t length = 0;
  get(r, &length, kLengthBytes);
  if (length > kMaxRecordBytes || RecordBytes(length) > w - r) return Take::kCorrupt;
  record->resize(length);
  get(r + kLengthBytes, record->data(), length);
  read_.store(r + RecordBytes(length), std::memory_order_release);
  return Take::kRecord;
}

void HeaderRing::Wait(int timeout_ms) {
  // Announce the sleep, then look once more: a post between the last Next
  // and here either shows in written_ or changes the doorbell (the futex then
  // returns at once) or sees reader_sleeping_ and wakes us.
  reader_sleeping_.store(1, std::memory_order_seq_cst);
  const uint32_t bell = doorbell_.load(std::memory_order_seq_cst);
  if (written_.load(std::memory_order_seq_cst) == read_.load(std::memory_order_relaxed)) {
    const timespec timeout{timeout_ms / 1000, static_cast<long>(timeout_ms % 1000) * 1000000L};
    Futex(&doorbell_, FUTEX_WAIT, bell, &timeout);
  }
  reader_sleeping_.store(0, std::memory_order_relaxed);
}

}  // namespace syncline
