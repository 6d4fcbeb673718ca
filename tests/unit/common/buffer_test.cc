// Buffer (shared-lifetime bytes, slices) and BufferPool (aligned, recycled memory).
#include "common/buffer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

namespace syncline {
namespace {

// An owner whose destruction is observable.
std::shared_ptr<const void> FlagOwner(std::atomic<bool>* released) {
  return std::shared_ptr<const void>(new int(0), [released](const void* p) {
    delete static_cast<const int*>(p);
    released->store(true);
  });
}

TEST(BufferTest, DefaultIsEmpty) {
  Buffer b;
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(b.size(), 0u);
  EXPECT_EQ(b.data(), nullptr);
  EXPECT_EQ(b.owner(), nullptr);
}

TEST(BufferTest, CopyIsIndependentOfTheSource) {
  std::vector<uint8_t> src(1000);
  std::iota(src.begin(), src.end(), 0);
  Buffer b = Buffer::Copy(src.data(), src.size());
  ASSERT_EQ(b.size(), 1000u);
  EXPECT_NE(b.data(), src.data());
  EXPECT_NE(b.owner(), nullptr);
  std::fill(src.begin(), src.end(), 0xff);
  for (size_t i = 0; i < 1000; ++i) ASSERT_EQ(b.data()[i], static_cast<uint8_t>(i));
}

TEST(BufferTest, CopyOfNothingIsEmptyButValid) {
  Buffer b = Buffer::Copy(nullptr, 0);
  EXPECT_TRUE(b.empty());
  EXPECT_NE(b.data(), nullptr);
}

TEST(BufferTest, ZerosIsZeroFilled) {
  Buffer b = Buffer::Zeros(4097);
  ASSERT_EQ(b.size(), 4097u);
  for (size_t i = 0; i < b.size(); ++i) ASSERT_EQ(b.data()[i], 0);
  b.mutable_data()[10] = 7;
  EXPECT_EQ(b.data()[10], 7);
}

TEST(BufferTest, CopiesShareBytesAndOwner) {
  Buffer a = Buffer::Zeros(16);
  Buffer b = a;
  EXPECT_EQ(a.data(), b.data());
  EXPECT_EQ(a.owner(), b.owner());
  a.mutable_data()[3] = 9;
  EXPECT_EQ(b.data()[3], 9);
}

TEST(BufferTest, OwnerLivesUntilTheLastCopyDrops) {
  std::atomic<bool> released{false};
  static const char kText[] = "hello";
  auto* a = new Buffer(kText, 5, FlagOwner(&released));
  Buffer b = *a;
  delete a;
  EXPECT_FALSE(released.load());
  EXPECT_EQ(std::memcmp(b.data(), "hello", 5), 0);
  b = Buffer();
  EXPECT_TRUE(released.load());
}

TEST(BufferTest, SliceViewsTheRangeAndKeepsTheOwnerAlive) {
  std::atomic<bool> released{false};
  static const char kText[] = "0123456789";
  Buffer slice;
  {
    Buffer whole(kText, 10, FlagOwner(&released));
    slice = whole.Slice(3, 4);
    EXPECT_EQ(slice.owner(), whole.owner());
  }
  EXPECT_FALSE(released.load()) << "the slice must keep the owner alive";
  ASSERT_EQ(slice.size(), 4u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(slice.data()), 4), "3456");
  Buffer sub = slice.Slice(1, 2);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(sub.data()), 2), "45");
  slice = Buffer();
  EXPECT_FALSE(released.load());
  sub = Buffer();
  EXPECT_TRUE(released.load());
}

TEST(BufferTest, SliceOfAHeapCopyStaysReadableAfterTheOriginalDrops) {
  std::vector<uint8_t> src(256);
  std::iota(src.begin(), src.end(), 0);
  Buffer slice;
  {
    Buffer whole = Buffer::Copy(src.data(), src.size());
    slice = whole.Slice(100, 50);
  }
  for (size_t i = 0; i < 50; ++i) ASSERT_EQ(slice.data()[i], 100 + i);
}

TEST(BufferTest, OnlyBuffersMarkedWritableAreWritableAndSlicesKeepTheMark) {
  const Buffer plain = Buffer::Copy("abcdef", 6);
  EXPECT_FALSE(plain.writable());
  EXPECT_FALSE(plain.Slice(1, 2).writable());
  const Buffer marked = plain.AsWritable();
  EXPECT_TRUE(marked.writable());
  EXPECT_EQ(marked.data(), plain.data());  // the same bytes, not a copy
  EXPECT_TRUE(marked.Slice(2, 3).writable());
  EXPECT_FALSE(plain.writable()) << "marking a copy must not mark the original view";
}

TEST(BufferPoolTest, ReusesMemoryOfTheSameSizeAfterTheLastCopyDrops) {
  BufferPool pool;
  Buffer a = pool.Get(1000);
  ASSERT_EQ(a.size(), 1000u);
  const uint8_t* address = a.data();
  EXPECT_EQ(pool.stats().allocations, 1u);
  EXPECT_EQ(pool.stats().reuses, 0u);
  EXPECT_EQ(pool.stats().idle_bytes, 0u);

  Buffer copy = a;
  a = Buffer();
  EXPECT_EQ(pool.stats().idle_bytes, 0u) << "a copy still holds the memory";
  copy = Buffer();
  EXPECT_EQ(pool.stats().idle_bytes, 1000u);

  Buffer b = pool.Get(1000);
  EXPECT_EQ(b.data(), address);
  auto s = pool.stats();
  EXPECT_EQ(s.allocations, 1u);
  EXPECT_EQ(s.reuses, 1u);
  EXPECT_EQ(s.idle_bytes, 0u);
}

TEST(BufferPoolTest, DifferentSizesDoNotShareMemory) {
  BufferPool pool;
  pool.Get(1000);  // returned at once
  EXPECT_EQ(pool.stats().idle_bytes, 1000u);
  Buffer b = pool.Get(1001);
  EXPECT_EQ(pool.stats().allocations, 2u);
  EXPECT_EQ(pool.stats().reuses, 0u);
  EXPECT_EQ(pool.stats().idle_bytes, 1000u);
}

TEST(BufferPoolTest, SlicesKeepPooledMemoryOutOfThePool) {
  BufferPool pool;
  Buffer slice;
  {
    Buffer whole = pool.Get(4096);
    std::memset(whole.mutable_data(), 0x5a, 4096);
    slice = whole.Slice(64, 128);
  }
  EXPECT_EQ(pool.stats().idle_bytes, 0u);
  Buffer other = pool.Get(4096);
  EXPECT_NE(other.data(), slice.data() - 64) << "memory still viewed by a slice was handed out again";
  for (size_t i = 0; i < 128; ++i) ASSERT_EQ(slice.data()[i], 0x5a);
  slice = Buffer();
  EXPECT_EQ(pool.stats().idle_bytes, 4096u);
}

TEST(BufferPoolTest, IdleMemoryIsCappedAtMaxIdleBytes) {
  BufferPool pool(/*max_idle_bytes=*/2500);
  {
    std::vector<Buffer> held;
    for (int i = 0; i < 4; ++i) held.push_back(pool.Get(1000));
    EXPECT_EQ(pool.stats().allocations, 4u);
  }
  // Only two of the four fit under the cap; the rest went back to the system.
  EXPECT_EQ(pool.stats().idle_bytes, 2000u);
  std::vector<Buffer> again;
  for (int i = 0; i < 4; ++i) again.push_back(pool.Get(1000));
  auto s = pool.stats();
  EXPECT_EQ(s.reuses, 2u);
  EXPECT_EQ(s.allocations, 6u);
  EXPECT_EQ(s.idle_bytes, 0u);
}

TEST(BufferPoolTest, ZeroCapKeepsNothing) {
  BufferPool pool(0);
  pool.Get(64);
  EXPECT_EQ(pool.stats().idle_bytes, 0u);
  pool.Get(64);
  EXPECT_EQ(pool.stats().reuses, 0u);
  EXPECT_EQ(pool.stats().allocations, 2u);
}

TEST(BufferPoolTest, MemoryIs64ByteAlignedAndWritable) {
  BufferPool pool;
  std::vector<Buffer> held;
  for (size_t size : {1u, 3u, 63u, 64u, 65u, 1000u, 4096u, 4097u, 1u << 20}) {
    Buffer b = pool.Get(size);
    ASSERT_EQ(b.size(), size);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % 64, 0u) << "size " << size;
    std::memset(b.mutable_data(), 0xab, size);
    EXPECT_EQ(b.data()[size - 1], 0xab);
    held.push_back(b);
  }
  // Reused memory is aligned too.
  held.clear();
  for (size_t size : {63u, 4097u}) {
    Buffer b = pool.Get(size);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % 64, 0u);
  }
  EXPECT_EQ(pool.stats().reuses, 2u);
}

TEST(BufferPoolTest, BuffersMayOutliveThePool) {
  std::vector<Buffer> survivors;
  {
    BufferPool pool;
    for (int i = 0; i < 8; ++i) survivors.push_back(pool.Get(512 + i));
    pool.Get(100);  // idle memory at destruction is freed with the pool
  }
  for (size_t i = 0; i < survivors.size(); ++i) {
    std::memset(survivors[i].mutable_data(), static_cast<int>(i), survivors[i].size());
    EXPECT_EQ(survivors[i].data()[survivors[i].size() - 1], static_cast<uint8_t>(i));
  }
  survivors.clear();  // freed directly, without a pool to return to
}

TEST(BufferPoolTest, ConcurrentGetAndReleaseKeepsConsistentCounts) {
  BufferPool pool;
  constexpr int kThreads = 4, kIterations = 2000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&pool, t] {
      for (int i = 0; i < kIterations; ++i) {
        Buffer b = pool.Get(256 * (1 + (i % 3)));
        b.mutable_data()[0] = static_cast<uint8_t>(t);
        Buffer copy = b;  // dropped on another path
        b = Buffer();
      }
    });
  }
  for (auto& t : threads) t.join();
  auto s = pool.stats();
  EXPECT_EQ(s.allocations + s.reuses, uint64_t{kThreads} * kIterations);
  // At most one buffer per size per thread was live at once.
  EXPECT_LE(s.allocations, uint64_t{kThreads} * 3);
  EXPECT_LE(s.idle_bytes, size_t{kThreads} * (256 + 512 + 768));
}

}  // namespace
}  // namespace syncline
