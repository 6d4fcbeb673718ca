// ReplyAcks: every noted byte is acknowledged to its own server, off the
// noting thread; notes that come while a send is under way go together in
// the next one; the destructor stops the thread even while notes wait.
#include "worker/reply_acks.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <map>

namespace syncline {
namespace {

// Records each send; the first one can be held until the test lets it go.
struct Recorder {
  Mutex mu;
  CondVar cv;
  std::vector<std::pair<int32_t, uint64_t>> sent GUARDED_BY(mu);
  bool hold_first GUARDED_BY(mu) = false;
  bool first_started GUARDED_BY(mu) = false;

  Status Send(int32_t server, uint64_t bytes) {
    MutexLock lock(mu);
    if (hold_first && !first_started) {
      first_started = true;
      cv.NotifyAll();
      cv.WaitUntil(mu, Deadline::AfterMs(10000), [this]() REQUIRES(mu) { return !hold_first; });
    }
    sent.emplace_back(server, bytes);
    cv.NotifyAll();
    return Status::Ok();
  }
  std::map<int32_t, uint64_t> TotalsWhen(uint64_t all_bytes) {
    MutexLock lock(mu);
    auto total = [this]() REQUIRES(mu) {
      uint64_t t = 0;
      for (const auto& s : sent) t += s.second;
      return t;
    };
    cv.WaitUntil(mu, Deadline::AfterMs(10000), [&]() REQUIRES(mu) { return total() >= all_bytes; });
    std::map<int32_t, uint64_t> by_server;
    for (const auto& [server, bytes] : sent) by_server[server] += bytes;
    return by_server;
  }
};

TEST(ReplyAcksTest, EveryNotedByteIsAcknowledgedToItsServer) {
  Recorder r;
  ReplyAcks acks([&r](int32_t server, uint64_t bytes) { return r.Send(server, bytes); });
  for (int i = 0; i < 100; ++i) acks.Note(3 + i % 2, 1000);
  EXPECT_EQ(r.TotalsWhen(100000), (std::map<int32_t, uint64_t>{{3, 50000}, {4, 50000}}));
}

TEST(ReplyAcksTest, NotesDuringASendGoTogetherInTheNextOne) {
  Recorder r;
  {
    MutexLock lock(r.mu);
    r.hold_first = true;
  }
  ReplyAcks acks([&r](int32_t server, uint64_t bytes) { return r.Send(server, bytes); });
  acks.Note(5, 10);
  {
    MutexLock lock(r.mu);
    ASSERT_TRUE(r.cv.WaitUntil(r.mu, Deadline::AfterMs(10000), [&r]() REQUIRES(r.mu) { return r.first_started; }));
  }
  for (int i = 0; i < 7; ++i) acks.Note(5, 100);  // the noting thread never waits on the held send
  {
    MutexLock lock(r.mu);
    r.hold_first = false;
    r.cv.NotifyAll();
  }
  EXPECT_EQ(r.TotalsWhen(710)[5], 710u);
  MutexLock lock(r.mu);
  ASSERT_EQ(r.sent.size(), 2u);
  EXPECT_EQ(r.sent[0], (std::pair<int32_t, uint64_t>{5, 10}));
  EXPECT_EQ(r.sent[1], (std::pair<int32_t, uint64_t>{5, 700}));
}

TEST(ReplyAcksTest, AFailedSendDoesNotStopLaterOnes) {
  std::promise<void> first, second;
  std::atomic<int> calls{0};
  ReplyAcks acks([&](int32_t, uint64_t) {
    const int call = ++calls;
    if (call == 1) {
      first.set_value();
      return Unavailable("peer gone");
    }
    if (call == 2) second.set_value();
    return Status::Ok();
  });
  acks.Note(1, 1);
  ASSERT_EQ(first.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);
  acks.Note(1, 1);
  EXPECT_EQ(second.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);
}

TEST(ReplyAcksTest, TheDestructorReturnsWithNotesPending) {
  auto done = std::async(std::launch::async, [] {
    ReplyAcks acks([](int32_t, uint64_t) { return Status::Ok(); });
    for (int i = 0; i < 1000; ++i) acks.Note(i % 4, 1);
  });
  EXPECT_EQ(done.wait_for(std::chrono::seconds(10)), std::future_status::ready);
}

}  // namespace
}  // namespace syncline
