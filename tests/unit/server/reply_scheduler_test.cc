// ReplyScheduler: sums to a worker leave at once within its window and, beyond
// it, most urgent first as acknowledgements make room; other replies never
// wait; workers' windows are independent; a zero window lets everything go.
#include "server/reply_scheduler.h"

#include <gtest/gtest.h>

#include "transport/wire.h"

namespace syncline {
namespace {

constexpr int32_t kWorkerA = 7, kWorkerB = 8;

Reply Sum(int32_t to, uint64_t key, uint64_t bytes, int64_t priority) {
  Message m = MakeMessage(proto::PULL_REPLY, 1);
  m.header.set_key(key);
  m.header.set_byte_length(bytes);
  m.header.set_priority(priority);
  return Reply{to, std::move(m)};
}

Reply AckOfPush(int32_t to, uint64_t key) {
  Message m = MakeMessage(proto::PUSH_ACK, 1);
  m.header.set_key(key);
  return Reply{to, std::move(m)};
}

std::vector<Reply> One(Reply r) {
  std::vector<Reply> v;
  v.push_back(std::move(r));
  return v;
}

std::vector<uint64_t> Keys(const std::vector<Reply>& replies) {
  std::vector<uint64_t> keys;
  for (const Reply& r : replies) keys.push_back(r.message.header.key());
  return keys;
}

TEST(ReplySchedulerTest, SumsWithinTheWindowLeaveAtOnceAndAskToBeAcknowledged) {
  ReplyScheduler s(3000);
  auto ready = s.Submit(One(Sum(kWorkerA, 1, 1000, 0)));
  ASSERT_EQ(Keys(ready), std::vector<uint64_t>{1});
  EXPECT_TRUE(ready[0].message.header.flags() & proto::FLAG_ACK_REPLY);
  EXPECT_EQ(Keys(s.Submit(One(Sum(kWorkerA, 2, 2000, 0)))), std::vector<uint64_t>{2});
  EXPECT_TRUE(s.Submit(One(Sum(kWorkerA, 3, 1, 0))).empty()) << "the window is full";
  EXPECT_EQ(s.load().bytes_in_flight, 3000u);
  EXPECT_EQ(s.load().queued_replies, 1u);
}

TEST(ReplySchedulerTest, WaitingSumsLeaveMostUrgentFirstAsAcknowledgementsMakeRoom) {
  ReplyScheduler s(1000);
  ASSERT_EQ(s.Submit(One(Sum(kWorkerA, 1, 1000, 0))).size(), 1u);  // fills the window
  // Bulk sums complete first, an urgent one last: it must overtake them.
  for (uint64_t key = 10; key < 14; ++key) EXPECT_TRUE(s.Submit(One(Sum(kWorkerA, key, 1000, 0))).empty());
  EXPECT_TRUE(s.Submit(One(Sum(kWorkerA, 99, 1000, 50))).empty());
  EXPECT_TRUE(s.Submit(One(Sum(kWorkerA, 98, 1000, 20))).empty());
  EXPECT_EQ(s.load().queued_replies, 6u);
  EXPECT_EQ(s.load().queued_bytes, 6000u);

  std::vector<uint64_t> order;
  for (int i = 0; i < 6; ++i) {
    auto acked = s.Acknowledge(kWorkerA, 1000);
    EXPECT_EQ(acked.excess_bytes, 0u);
    ASSERT_EQ(acked.ready.size(), 1u) << "one sum fits the window at a time";
    EXPECT_TRUE(acked.ready[0].message.header.flags() & proto::FLAG_ACK_REPLY);
    order.push_back(acked.ready[0].message.header.key());
  }
  EXPECT_EQ(order, (std::vector<uint64_t>{99, 98, 10, 11, 12, 13}));  // by priority, ties in arrival order
  EXPECT_TRUE(s.Acknowledge(kWorkerA, 1000).ready.empty());
  EXPECT_EQ(s.load().bytes_in_flight, 0u);
  EXPECT_EQ(s.load().queued_replies, 0u);
}

TEST(ReplySchedulerTest, PartialAcknowledgementsLetThroughOnlyWhatFits) {
  ReplyScheduler s(4000);
  ASSERT_EQ(s.Submit(One(Sum(kWorkerA, 1, 4000, 0))).size(), 1u);
  EXPECT_TRUE(s.Submit(One(Sum(kWorkerA, 2, 3000, 0))).empty());
  EXPECT_TRUE(s.Acknowledge(kWorkerA, 2500).ready.empty()) << "1500 + 3000 is beyond the window";
  EXPECT_EQ(Keys(s.Acknowledge(kWorkerA, 500).ready), std::vector<uint64_t>{2});
  EXPECT_EQ(s.load().bytes_in_flight, 4000u);
}

TEST(ReplySchedulerTest, ASumLargerThanTheWindowLeavesWhenNothingIsInFlight) {
  ReplyScheduler s(1000);
  EXPECT_EQ(Keys(s.Submit(One(Sum(kWorkerA, 1, 5000, 0)))), std::vector<uint64_t>{1});
  EXPECT_TRUE(s.Submit(One(Sum(kWorkerA, 2, 5000, 0))).empty());
  EXPECT_EQ(Keys(s.Acknowledge(kWorkerA, 5000).ready), std::vector<uint64_t>{2});
}

TEST(ReplySchedulerTest, OtherRepliesNeverWait) {
  ReplyScheduler s(1000);
  ASSERT_EQ(s.Submit(One(Sum(kWorkerA, 1, 1000, 0))).size(), 1u);
  std::vector<Reply> batch;
  batch.push_back(Sum(kWorkerA, 2, 1000, 0));
  batch.push_back(AckOfPush(kWorkerA, 3));
  batch.push_back(ErrorReply(Sum(kWorkerA, 4, 8, 0).message, "refused"));
  auto ready = s.Submit(std::move(batch));
  ASSERT_EQ(ready.size(), 2u);
  EXPECT_EQ(ready[0].message.header.op(), proto::PUSH_ACK);
  EXPECT_FALSE(ready[0].message.header.flags() & proto::FLAG_ACK_REPLY);
  EXPECT_EQ(ready[1].message.header.op(), proto::ERROR);
}

TEST(ReplySchedulerTest, EachWorkerHasItsOwnWindow) {
  ReplyScheduler s(1000);
  ASSERT_EQ(s.Submit(One(Sum(kWorkerA, 1, 1000, 0))).size(), 1u);
  EXPECT_TRUE(s.Submit(One(Sum(kWorkerA, 2, 1000, 0))).empty());
  EXPECT_EQ(Keys(s.Submit(One(Sum(kWorkerB, 3, 1000, 0)))), std::vector<uint64_t>{3}) << "A's full window holds B back";
  EXPECT_TRUE(s.Acknowledge(kWorkerB, 1000).ready.empty()) << "B's acknowledgement does not release A's sums";
  EXPECT_EQ(Keys(s.Acknowledge(kWorkerA, 1000).ready), std::vector<uint64_t>{2});
}

TEST(ReplySchedulerTest, AcknowledgingMoreThanWasSentIsReportedAndIgnored) {
  ReplyScheduler s(1000);
  ASSERT_EQ(s.Submit(One(Sum(kWorkerA, 1, 600, 0))).size(), 1u);
  auto acked = s.Acknowledge(kWorkerA, 1000);
  EXPECT_EQ(acked.excess_bytes, 400u);
  EXPECT_EQ(s.Acknowledge(kWorkerB, 50).excess_bytes, 50u) << "nothing was ever sent to B";
  EXPECT_EQ(s.load().bytes_in_flight, 0u);
  // The window is not widened by the excess: two more sums of 600 do not both fit.
  EXPECT_EQ(s.Submit(One(Sum(kWorkerA, 2, 600, 0))).size(), 1u);
  EXPECT_TRUE(s.Submit(One(Sum(kWorkerA, 3, 600, 0))).empty());
}

TEST(ReplySchedulerTest, AZeroWindowLetsEverySumGoUnmarked) {
  ReplyScheduler s(0);
  for (uint64_t key = 1; key <= 3; ++key) {
    auto ready = s.Submit(One(Sum(kWorkerA, key, 1 << 20, 0)));
    ASSERT_EQ(ready.size(), 1u);
    EXPECT_FALSE(ready[0].message.header.flags() & proto::FLAG_ACK_REPLY) << "no window: nothing to acknowledge";
  }
  EXPECT_EQ(s.load().bytes_in_flight, 0u);
}

}  // namespace
}  // namespace syncline
