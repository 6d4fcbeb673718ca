// KeyStore memory: pooled sum buffers reused across rounds and kept out of the
// pool while replies hold them, received frames summed in place, and a
// one-worker round answered with the push itself (never written).
#include "server/key_store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/mman.h>

#include <set>

#include "tests/unit/server/key_store_testing.h"

namespace syncline {
namespace {

using namespace keystore_testing;

TEST_F(KeyStoreTest, PooledBuffersAreReusedAcrossRounds) {
  for (bool deterministic : {false, true}) {
    SCOPED_TRACE(deterministic ? "deterministic" : "arrival order");
    BufferPool pool;
    KeyStore store(KeyStoreOptions{2, false, deterministic, nullptr, nullptr}, &engine_, &pool);
    std::vector<float> x(1024, 1.0f);
    uint64_t allocations_after_warmup = 0;
    for (uint64_t round = 0; round < 20; ++round) {
      std::vector<Reply> out;
      store.Push(Push(round, 0, x), 0, &out);
      store.Push(Push(round, 1, x), 1, &out);
      store.Pull(Pull(round, 0), 0, &out);
      store.Pull(Pull(round, 1), 1, &out);
      auto replies = OfOp(out, proto::PULL_REPLY);
      ASSERT_EQ(replies.size(), 2u);
      EXPECT_EQ(ValuesOf<float>(replies[0].message)[1023], 2.0f);
      // The replies are "sent": dropping them returns the sum to the pool.
      out.clear();
      replies.clear();
      if (round == 1) allocations_after_warmup = pool.stats().allocations;
    }
    auto s = pool.stats();
    EXPECT_GE(s.reuses, 18u);
    EXPECT_EQ(s.allocations, allocations_after_warmup) << "steady-state rounds allocated memory";
    EXPECT_LE(s.allocations, 2u);
    EXPECT_EQ(s.idle_bytes, s.allocations * 4096) << "every round buffer went back to the pool";
  }
}

TEST_F(KeyStoreTest, HeldRepliesKeepTheirMemoryOutOfThePool) {
  Make(1);
  auto out = DoPush(Push<float>(0, 0, {7, 8}, proto::FLAG_PULL_AFTER_PUSH), 0);
  ASSERT_EQ(out.size(), 1u);
  const Message held = out[0].message;  // e.g. still queued in a socket
  out.clear();
  // The next round must not reuse (and overwrite) the buffer the held reply points at.
  auto next = DoPush(Push<float>(1, 0, {1, 1}, proto::FLAG_PULL_AFTER_PUSH), 0);
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(ValuesOf<float>(held), (std::vector<float>{7, 8}));
  EXPECT_EQ(ValuesOf<float>(next[0].message), (std::vector<float>{1, 1}));
}

// A push whose frame the transport marked writable (ours alone) becomes the
// round's sum buffer without a copy; any other push (a view of a sender's or
// a peer's memory) is copied and never written.
TEST_F(KeyStoreTest, AWritableFirstPushIsSummedInPlaceOthersAreNeverWritten) {
  for (bool writable : {true, false}) {
    SCOPED_TRACE(writable ? "writable first push" : "read-only first push");
    Make(2);
    Message first = Push<float>(0, 0, {1, 2, 3}, proto::FLAG_PULL_AFTER_PUSH);
    if (writable) first.payloads[0] = first.payloads[0].AsWritable();
    const Buffer first_bytes = first.payloads[0];
    const Message second = Push<float>(0, 1, {10, 20, 30}, proto::FLAG_PULL_AFTER_PUSH);
    const Buffer second_bytes = second.payloads[0];
    EXPECT_TRUE(DoPush(first, 0).empty());
    auto out = DoPush(second, 1);
    auto replies = OfOp(out, proto::PULL_REPLY);
    ASSERT_EQ(replies.size(), 2u);
    for (const Reply& r : replies) EXPECT_EQ(ValuesOf<float>(r.message), (std::vector<float>{11, 22, 33}));
    EXPECT_EQ(replies[0].message.payloads[0].data() == first_bytes.data(), writable);
    std::vector<float> second_now(3), first_now(3);
    std::memcpy(second_now.data(), second_bytes.data(), 12);
    std::memcpy(first_now.data(), first_bytes.data(), 12);
    EXPECT_EQ(second_now, (std::vector<float>{10, 20, 30})) << "a read-only push was written";
    EXPECT_EQ(first_now, writable ? (std::vector<float>{11, 22, 33}) : (std::vector<float>{1, 2, 3}));
  }
}

// A page of memory nobody may write: a write into it (a sum, an averaging)
// kills the test instead of passing unnoticed.
class ReadOnlyPage {
 public:
  explicit ReadOnlyPage(const std::vector<float>& values) {
    page_ = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    EXPECT_NE(page_, MAP_FAILED);
    std::memcpy(page_, values.data(), values.size() * sizeof(float));
    EXPECT_EQ(mprotect(page_, kBytes, PROT_READ), 0);
  }
  ~ReadOnlyPage() { munmap(page_, kBytes); }
  Buffer View(size_t bytes) const { return Buffer(page_, bytes, nullptr); }

 private:
  static constexpr size_t kBytes = 4096;
  void* page_;
};

// With one worker its push is the sum: the reply carries the pushed bytes
// themselves, even when they are a read-only view (shared memory, loopback),
// nothing is copied or allocated, and nothing is written (averaging by 1 is
// skipped): the push lies in a page that faults on any write.
TEST_F(KeyStoreTest, AOneWorkerRoundAnswersWithThePushItself) {
  const std::vector<float> values = {1.5f, -2, 3};
  const ReadOnlyPage page(values);
  for (bool deterministic : {false, true}) {
    for (uint32_t average : {0u, static_cast<uint32_t>(proto::FLAG_AVERAGE)}) {
      SCOPED_TRACE(std::string(deterministic ? "deterministic" : "arrival order") + (average ? ", average" : ""));
      BufferPool pool;
      KeyStore store(KeyStoreOptions{1, false, deterministic, nullptr, nullptr}, &engine_, &pool);
      for (uint64_t round = 0; round < 3; ++round) {
        Message push = Push<float>(round, 0, values, proto::FLAG_PULL_AFTER_PUSH | average);
        push.payloads[0] = page.View(values.size() * sizeof(float));
        std::vector<Reply> out;
        store.Push(push, 0, &out);
        ASSERT_EQ(out.size(), 1u);
        ASSERT_EQ(out[0].message.header.op(), proto::PULL_REPLY);
        EXPECT_EQ(out[0].message.payloads[0].data(), push.payloads[0].data()) << "the push was copied";
        EXPECT_EQ(ValuesOf<float>(out[0].message), values);
      }
      EXPECT_EQ(pool.stats().allocations, 0u);
    }
  }
}

// A one-worker push without its pull is acked at once, and the sender may
// reuse its memory from then on: the round keeps a copy for the later pull.
TEST_F(KeyStoreTest, AOneWorkerPushWithoutItsPullIsCopied) {
  for (bool deterministic : {false, true}) {
    SCOPED_TRACE(deterministic ? "deterministic" : "arrival order");
    Make(1, false, deterministic);
    std::vector<float> tensor = {4, 5, 6};
    Message push = Push<float>(0, 0, tensor);
    push.payloads[0] = Buffer(tensor.data(), tensor.size() * sizeof(float), nullptr);  // the sender's own memory
    auto acks = DoPush(push, 0);
    ASSERT_EQ(acks.size(), 1u);
    EXPECT_EQ(acks[0].message.header.op(), proto::PUSH_ACK);
    tensor = {0, 0, 0};  // reused after the ack
    auto out = DoPull(Pull(0, 0), 0);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(ValuesOf<float>(out[0].message), (std::vector<float>{4, 5, 6}));
  }
}

}  // namespace
}  // namespace syncline
