#include "common/buffer.h"

#include <cstdlib>
#include <cstring>
#include <new>

#include "common/mutex.h"

namespace syncline {

Buffer Buffer::Copy(const void* data, size_t size) {
  auto bytes = std::shared_ptr<uint8_t[]>(new uint8_t[size > 0 ? size : 1]);
  if (size > 0) std::memcpy(bytes.get(), data, size);
  const uint8_t* p = bytes.get();
  return Buffer(p, size, std::shared_ptr<const void>(bytes, p));
}

Buffer Buffer::Zeros(size_t size) {
  auto bytes = std::shared_ptr<uint8_t[]>(new uint8_t[size > 0 ? size : 1]());
  const uint8_t* p = bytes.get();
  return Buffer(p, size, std::shared_ptr<const void>(bytes, p));
}

namespace {
constexpr size_t kAlignment = 64;
constexpr size_t kPageSize = 4096;

void* AllocateAligned(size_t size) {
  size_t rounded = (size + kAlignment - 1) / kAlignment * kAlignment;
  void* p = std::aligned_alloc(kAlignment, rounded > 0 ? rounded : kAlignment);
  if (p == nullptr) throw std::bad_alloc();
  // Touch every page now so rounds that reuse this memory pay no page faults.
  auto* bytes = static_cast<volatile uint8_t*>(p);
  for (size_t i = 0; i < size; i += kPageSize) bytes[i] = 0;
  return p;
}
}  // namespace

struct BufferPool::State {
  explicit State(size_t max_idle) : max_idle_bytes(max_idle) {}
  ~State() {
    for (auto& [size, list] : idle)
      for (void* p : list) std::free(p);
  }
  void Return(void* p, size_t size) {
    {
      MutexLock lock(mu);
      if (idle_bytes + size <= max_idle_bytes) {
        idle[size].push_back(p);
        idle_bytes += size;
        return;
      }
    }
    std::free(p);
  }

  const size_t max_idle_bytes;
  mutable Mutex mu;
  std::map<size_t, std::vector<void*>> idle GUARDED_BY(mu);
  size_t idle_bytes GUARDED_BY(mu) = 0;
  uint64_t allocations GUARDED_BY(mu) = 0;
  uint64_t reuses GUARDED_BY(mu) = 0;
};

BufferPool::BufferPool(size_t max_idle_bytes) : state_(std::make_shared<State>(max_idle_bytes)) {}
BufferPool::~BufferPool() = default;

Buffer BufferPool::Get(size_t size) {
  void* p = nullptr;
  {
    MutexLock lock(state_->mu);
    auto it = state_->idle.find(size);
    if (it != state_->idle.end() && !it->second.empty()) {
      p = it->second.back();
      it->second.pop_back();
      state_->idle_bytes -= size;
      ++state_->reuses;
    } else {
      ++state_->allocations;
    }
  }
  if (p == nullptr) p = AllocateAligned(size);
  std::weak_ptr<State> weak = state_;
  std::shared_ptr<const void> owner(p, [weak, size](const void* q) {
    void* mem = const_cast<void*>(q);
    if (auto state = weak.lock()) {
      state->Return(mem, size);
    } else {
      std::free(mem);
    }
  });
  return Buffer(p, size, std::move(owner));
}

BufferPool::Stats BufferPool::stats() const {
  MutexLock lock(state_->mu);
  return Stats{state_->allocations, state_->reuses, state_->idle_bytes};
}

}  // namespace syncline
