// Buffer: bytes with shared lifetime, the unit every payload travels in.
// A Buffer is a cheap view {data, size} plus an owner; the bytes stay valid
// while any copy of the Buffer lives, so a payload can go from a socket to the
// summation engine to a reply without being copied. BufferPool recycles
// aligned, pre-faulted memory so steady-state rounds allocate nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace syncline {

class Buffer {
 public:
  Buffer() = default;
  // A view of `data` kept alive by `owner` (may be null for static memory).
  Buffer(const void* data, size_t size, std::shared_ptr<const void> owner)
      : data_(static_cast<const uint8_t*>(data)), size_(size), owner_(std::move(owner)) {}

  // A heap-owned copy of `size` bytes at `data`.
  static Buffer Copy(const void* data, size_t size);
  // Fresh heap memory of `size` bytes, zero-filled.
  static Buffer Zeros(size_t size);

  const uint8_t* data() const { return data_; }
  // Only for buffers this process allocated (Copy, Zeros, BufferPool) or
  // that are writable().
  uint8_t* mutable_data() const { return const_cast<uint8_t*>(data_); }
  // The same view, marked as bytes that only this process holds and nobody
  // else will read or write: a received frame the transport allocated, not
  // a view of a sender's or a peer's memory. Its holder may write into it
  // (e.g. sum into it) instead of copying it. Transports mark what they
  // receive; nothing else should.
  Buffer AsWritable() const {
    Buffer b = *this;
    b.writable_ = true;
    return b;
  }
  bool writable() const { return writable_; }
  // The same view without the mark, for handing the bytes to someone else.
  Buffer AsReadOnly() const {
    Buffer b = *this;
    b.writable_ = false;
    return b;
  }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const std::shared_ptr<const void>& owner() const { return owner_; }
  // A view of [offset, offset+length) sharing this buffer's owner (and mark).
  Buffer Slice(size_t offset, size_t length) const {
    Buffer b(data_ + offset, length, owner_);
    b.writable_ = writable_;
    return b;
  }

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::shared_ptr<const void> owner_;
  bool writable_ = false;
};

// Hands out buffers of 64-byte-aligned memory; when the last copy of a
// Buffer drops, its memory goes back to the pool for the next buffer of the
// same size. Memory is pre-faulted when first allocated. At most
// `max_idle_bytes` are kept idle; beyond that returned memory is freed.
// Thread-safe. Buffers may outlive the pool (their memory is then freed).
class BufferPool {
 public:
  explicit BufferPool(size_t max_idle_bytes = size_t{1} << 30);
  ~BufferPool();
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  // A buffer of exactly `size` bytes with unspecified contents.
  Buffer Get(size_t size);

  struct Stats {
    uint64_t allocations = 0;  // fresh memory obtained from the system
    uint64_t reuses = 0;       // served from idle memory
    size_t idle_bytes = 0;
  };
  Stats stats() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace syncline
