// CreditScheduler alone, with a fake network: the order chunks are admitted
// in, the credit bound under many posting threads, and stopping.
#include "proxy/credit_scheduler.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "worker/operation.h"

namespace syncline {
namespace {

using namespace std::chrono_literals;

// Records what the scheduler admits; the test releases credit by hand.
class FakeNetwork {
 public:
  void Admit(ChunkTask&& c) {
    MutexLock lock(mu_);
    admitted_.push_back(Name(c));
    cv_.NotifyAll();
  }
  // Waits until `n` chunks were admitted in all; returns their names.
  std::vector<std::string> WaitFor(size_t n) {
    MutexLock lock(mu_);
    cv_.WaitUntil(mu_, Deadline::After(5s), [&]() REQUIRES(mu_) { return admitted_.size() >= n; });
    return admitted_;
  }
  // Gives the scheduler time to admit more than it should, then reports all.
  std::vector<std::string> Settle() {
    std::this_thread::sleep_for(50ms);
    MutexLock lock(mu_);
    return admitted_;
  }
  static std::string Name(const ChunkTask& c) { return c.op->tensor_name() + std::to_string(c.index); }

 private:
  Mutex mu_;
  CondVar cv_;
  std::vector<std::string> admitted_ GUARDED_BY(mu_);
};

// The chunks of one push_pull of tensor `name`: `n` chunks of `bytes`.
std::vector<ChunkTask> Chunks(const std::string& name, int n, uint64_t bytes, int64_t priority,
                              std::atomic<uint64_t>& sequence, std::shared_ptr<Operation>* op_out = nullptr) {
  static std::vector<uint8_t> memory(1 << 20);
  std::vector<uint64_t> offsets, lengths;
  for (int i = 0; i < n; ++i) offsets.push_back(0), lengths.push_back(bytes);
  auto op = std::make_shared<Operation>(name, memory.data(), offsets, lengths);
  if (op_out) *op_out = op;
  std::vector<ChunkTask> chunks;
  for (int i = 0; i < n; ++i) {
    ChunkTask c;
    c.index = i;
    c.length = bytes;
    c.priority = priority;
    c.sequence = sequence++;
    c.op = op;
    chunks.push_back(std::move(c));
  }
  return chunks;
}

TEST(CreditSchedulerTest, AnUrgentChunkOvertakesQueuedOnes) {
  FakeNetwork net;
  CreditScheduler s(CreditScheduler::Order::kPriority, /*credit_bytes=*/100);
  s.Start([&](ChunkTask&& c) { net.Admit(std::move(c)); });
  std::atomic<uint64_t> seq{0};
  s.Post(Chunks("late", 3, 100, /*priority=*/-5, seq));
  EXPECT_EQ(net.WaitFor(1), (std::vector<std::string>{"late0"}));
  EXPECT_EQ(net.Settle().size(), 1u) << "credit is one chunk";
  s.Post(Chunks("urgent", 2, 100, /*priority=*/0, seq));
  EXPECT_EQ(net.Settle().size(), 1u) << "an urgent chunk waits for credit too; it does not cancel what is sent";
  EXPECT_EQ(s.queued(), 4u);
  for (size_t admitted = 1; admitted < 5; ++admitted) {  // the server acks one chunk at a time
    ASSERT_EQ(net.WaitFor(admitted).size(), admitted);
    s.Release(100);
  }
  EXPECT_EQ(net.WaitFor(5), (std::vector<std::string>{"late0", "urgent0", "urgent1", "late1", "late2"}));
}

TEST(CreditSchedulerTest, EqualPrioritiesAndFifoGoInPostingOrder) {
  for (auto order : {CreditScheduler::Order::kPriority, CreditScheduler::Order::kFifo}) {
    FakeNetwork net;
    CreditScheduler s(order, 10);
    s.Start([&](ChunkTask&& c) { net.Admit(std::move(c)); });
    std::atomic<uint64_t> seq{0};
    s.Post(Chunks("a", 2, 10, order == CreditScheduler::Order::kFifo ? -100 : 0, seq));
    s.Post(Chunks("b", 2, 10, 0, seq));
    s.Post(Chunks("c", 1, 10, order == CreditScheduler::Order::kFifo ? 100 : 0, seq));
    for (int i = 0; i < 5; ++i) {
      net.WaitFor(i + 1);
      s.Release(10);
    }
    EXPECT_EQ(net.WaitFor(5), (std::vector<std::string>{"a0", "a1", "b0", "b1", "c0"}));
  }
}

TEST(CreditSchedulerTest, OneChunkAlwaysGoesWhenNothingIsInFlight) {
  FakeNetwork net;
  CreditScheduler s(CreditScheduler::Order::kPriority, 10);
  s.Start([&](ChunkTask&& c) { net.Admit(std::move(c)); });
  std::atomic<uint64_t> seq{0};
  s.Post(Chunks("big", 2, 1000, 0, seq));
  EXPECT_EQ(net.WaitFor(1).size(), 1u) << "a chunk larger than the credit must not wait forever";
  EXPECT_EQ(net.Settle().size(), 1u);
  s.Release(1000);
  EXPECT_EQ(net.WaitFor(2).size(), 2u);
}

TEST(CreditSchedulerTest, UnlimitedCreditAdmitsEverythingAtOnce) {
  FakeNetwork net;
  CreditScheduler s(CreditScheduler::Order::kPriority, 0);
  s.Start([&](ChunkTask&& c) { net.Admit(std::move(c)); });
  std::atomic<uint64_t> seq{0};
  s.Post(Chunks("x", 50, 1 << 20, 0, seq));
  EXPECT_EQ(net.WaitFor(50).size(), 50u);
  EXPECT_EQ(s.bytes_in_flight(), 50u << 20);
}

TEST(CreditSchedulerTest, CreditIsNeverExceededUnderConcurrency) {
  // Eight threads post; a fake network acknowledges admitted chunks after a
  // random delay, on its own thread. Every chunk must be admitted exactly
  // once, and never with more than the credit in flight.
  constexpr uint64_t kCredit = 4000;
  constexpr int kThreads = 8, kPostsPerThread = 40;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<uint64_t> to_ack;
  uint64_t in_flight = 0, peak = 0, admitted = 0;
  bool over = false;
  CreditScheduler s(CreditScheduler::Order::kPriority, kCredit);
  s.Start([&](ChunkTask&& c) {
    std::lock_guard<std::mutex> lock(mu);
    in_flight += c.length;
    peak = std::max(peak, in_flight);
    ++admitted;
    to_ack.push_back(c.length);
    cv.notify_all();
  });
  std::thread network([&] {
    std::mt19937 rng(7);
    for (;;) {
      uint64_t bytes;
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return over || !to_ack.empty(); });
        if (to_ack.empty()) return;
        bytes = to_ack.front();
        to_ack.pop_front();
        in_flight -= bytes;  // counted out before the scheduler hears it
      }
      std::this_thread::sleep_for(std::chrono::microseconds(rng() % 200));
      s.Release(bytes);
    }
  });
  std::atomic<uint64_t> seq{0};
  std::vector<std::thread> posters;
  uint64_t total_chunks = 0;
  for (int t = 0; t < kThreads; ++t) total_chunks += kPostsPerThread * (1 + t % 3);
  for (int t = 0; t < kThreads; ++t) {
    posters.emplace_back([&, t] {
      for (int i = 0; i < kPostsPerThread; ++i)
        s.Post(Chunks("t" + std::to_string(t), 1 + t % 3, 500 + 250 * (t % 4), (t * 7 + i) % 5, seq));
    });
  }
  for (auto& p : posters) p.join();
  {
    std::unique_lock<std::mutex> lock(mu);
    EXPECT_TRUE(cv.wait_for(lock, 20s, [&] { return admitted == total_chunks; }))
        << admitted << " of " << total_chunks << " admitted";
    over = true;
    cv.notify_all();
  }
  network.join();
  EXPECT_LE(peak, kCredit);
  EXPECT_LE(s.peak_bytes_in_flight(), kCredit);
  EXPECT_GT(s.peak_bytes_in_flight(), kCredit / 2) << "the credit was not used";
}

TEST(CreditSchedulerTest, StopFailsQueuedChunksAndLaterPosts) {
  FakeNetwork net;
  CreditScheduler s(CreditScheduler::Order::kPriority, 10);
  s.Start([&](ChunkTask&& c) { net.Admit(std::move(c)); });
  std::atomic<uint64_t> seq{0};
  std::shared_ptr<Operation> queued, later;
  s.Post(Chunks("q", 3, 10, 0, seq, &queued));
  net.WaitFor(1);
  s.Stop(Aborted("job over"));
  // The admitted chunk's bytes are the transport's to give back; release
  // them so the operation can end.
  { auto dropped = std::move(queued); }
  s.Post(Chunks("l", 1, 10, 0, seq, &later));
  Status st = later->Wait(Deadline::AfterMs(2000));
  EXPECT_EQ(st.code(), StatusCode::kAborted) << st.ToString();
  EXPECT_NE(st.message().find("job over"), std::string::npos);
  EXPECT_EQ(s.queued(), 0u);
  EXPECT_EQ(net.Settle().size(), 1u) << "nothing is admitted after Stop";
}

}  // namespace
}  // namespace syncline
