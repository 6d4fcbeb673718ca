// Endpoint conformance, Flush: what Flush promises (transport/transport.h)
// over every backend: what was sent before it survives a Close right after,
// and it never waits past its deadline, for a stuck peer or an absent one
// (fixture: endpoint_conformance.h; per backend: docs/decisions.md).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "tests/unit/transport/endpoint_conformance.h"

namespace syncline::testing {
namespace {

using ::testing::HasSubstr;
using Conformance = EndpointConformance;

// Runs `call`, checking it returns by `deadline` (plus slack).
Status ByDeadline(const Deadline& deadline, const std::function<Status()>& call) {
  Status st = call();
  const auto late = std::chrono::duration_cast<Millis>(Clock::now() - deadline.at()).count();
  EXPECT_LE(late, kDeadlineSlackMs) << "returned long after its deadline: " << st.ToString();
  return st;
}

TEST_P(Conformance, FlushWithNothingSentSucceeds) {
  StartPair();
  const Deadline deadline = Deadline::AfterMs(2000);
  EXPECT_TRUE(ByDeadline(deadline, [&] { return a_->endpoint->Flush(deadline); }).ok());
}

TEST_P(Conformance, FlushedMessagesSurviveACloseRightAfter) {
  StartPair();
  // Many small messages and every tenth a large one: more than any backend
  // writes out within Send, so that Close would drop some without Flush.
  constexpr uint64_t kMessages = 300;
  for (uint64_t n = 0; n < kMessages; ++n)
    ASSERT_TRUE(a_->Send(2, Numbered(n, n % 10 == 0 ? size_t{2} << 20 : 64), Soon()).ok()) << n;
  Status flushed = a_->endpoint->Flush(Soon());
  ASSERT_TRUE(flushed.ok()) << flushed.ToString();
  a_->endpoint->Close();
  ASSERT_TRUE(b_->in.WaitFor(kMessages, kWaitMs)) << b_->in.size() << " of " << kMessages;
  std::vector<Message> got = b_->in.TakeAll();
  for (uint64_t n = 0; n < kMessages; ++n) {
    ASSERT_EQ(got[n].header.request_id(), n);
    ASSERT_EQ(got[n].payloads.size(), 1u);
    ASSERT_TRUE(SameBytes(got[n].payloads[0], Pattern(n % 10 == 0 ? size_t{2} << 20 : 64, static_cast<uint32_t>(n))))
        << n;
  }
}

TEST_P(Conformance, FlushToAStuckPeerReturnsByItsDeadlineNamingIt) {
  std::atomic<bool> hold{false};
  StartPair({.small_queue = true}, [&](const Message&) {
    const auto give_up = Clock::now() + std::chrono::seconds(20);
    while (hold.load() && Clock::now() < give_up) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  hold = true;  // b's receiving thread stops in its first call
  static const Buffer k64 = Pattern(64 << 10, 64);
  uint64_t accepted = 0;
  for (; accepted < 1000; ++accepted) {
    Message m = Push(accepted, {k64});
    m.header.set_request_id(accepted);
    if (!a_->Send(2, std::move(m), Deadline::AfterMs(300)).ok()) break;
  }
  const Deadline deadline = Deadline::AfterMs(300);
  Status st = ByDeadline(deadline, [&] { return a_->endpoint->Flush(deadline); });
  if (contract().flush_waits_for_stuck_peer) {
    EXPECT_EQ(st.code(), StatusCode::kDeadlineExceeded) << st.ToString();
    EXPECT_THAT(st.message(), HasSubstr("peer(s) 2")) << "names the peer that holds it up";
  } else {
    EXPECT_TRUE(st.ok()) << st.ToString();
  }
  // Once b reads again, a flush succeeds and what a sent arrives even though a closes at once.
  hold = false;
  Status flushed = a_->endpoint->Flush(Soon());
  EXPECT_TRUE(flushed.ok()) << flushed.ToString();
  a_->endpoint->Close();
  ASSERT_TRUE(b_->in.WaitFor(accepted, kWaitMs)) << b_->in.size() << " of " << accepted;
}

TEST_P(Conformance, FlushAndCloseWithAnAbsentPeerReturnByTheDeadline) {
  StartPair();
  ASSERT_TRUE(a_->Connect(9, backend().AbsentAddress()).ok());
  for (uint64_t n = 0; n < 8; ++n) (void)a_->Send(9, Numbered(n, 64 << 10), Deadline::AfterMs(200));
  const Deadline deadline = Deadline::AfterMs(500);
  Status st = ByDeadline(deadline, [&] { return a_->endpoint->Flush(deadline); });
  // Whether an absent peer's messages count as gone (dropped) or as still
  // queued is the backend's (Contract::queues_for_absent_peer); either way
  // Flush and Close are bounded by the deadline.
  if (!st.ok()) {
    EXPECT_EQ(st.code(), StatusCode::kDeadlineExceeded) << st.ToString();
  }
  (void)ByDeadline(deadline, [&] {
    a_->endpoint->Close();
    return Status::Ok();
  });
}

}  // namespace
}  // namespace syncline::testing
