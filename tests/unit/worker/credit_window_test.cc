// CreditWindow alone: what goes at once, what waits, and in which order.
#include "worker/credit_window.h"

#include <gtest/gtest.h>

namespace syncline {
namespace {

CreditWindow::Push PushOf(uint64_t request, uint64_t bytes, int32_t server = 1) {
  Message m;
  m.header.set_request_id(request);
  return CreditWindow::Push{server, std::move(m), bytes};
}

std::vector<uint64_t> Requests(const std::vector<CreditWindow::Push>& pushes) {
  std::vector<uint64_t> out;
  for (const auto& p : pushes) out.push_back(p.message.header.request_id());
  return out;
}

TEST(CreditWindow, ZeroCreditLetsEverythingGo) {
  CreditWindow w(0);
  std::vector<CreditWindow::Push> go;
  for (uint64_t r = 1; r <= 5; ++r) w.Admit(PushOf(r, 1 << 20), &go);
  EXPECT_EQ(Requests(go), (std::vector<uint64_t>{1, 2, 3, 4, 5}));
  EXPECT_EQ(w.waiting(), 0u);
}

TEST(CreditWindow, PushesBeyondTheCreditWaitAndGoInIssueOrderAsRepliesFreeIt) {
  CreditWindow w(10);
  std::vector<CreditWindow::Push> go;
  w.Admit(PushOf(1, 4), &go);
  w.Admit(PushOf(2, 4), &go);
  w.Admit(PushOf(3, 4), &go);  // 12 > 10: waits
  w.Admit(PushOf(4, 1), &go);  // would fit, but must not overtake 3
  EXPECT_EQ(Requests(go), (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(w.in_flight_bytes(), 8u);
  EXPECT_EQ(w.waiting(), 2u);

  go.clear();
  w.Release(4, &go);  // 4 in flight: 3 (4) and then 4 (1) fit
  EXPECT_EQ(Requests(go), (std::vector<uint64_t>{3, 4}));
  EXPECT_EQ(w.in_flight_bytes(), 9u);
  EXPECT_EQ(w.waiting(), 0u);
}

TEST(CreditWindow, APushLargerThanTheCreditGoesAloneWhenNothingElseIsInFlight) {
  CreditWindow w(10);
  std::vector<CreditWindow::Push> go;
  w.Admit(PushOf(1, 4), &go);
  w.Admit(PushOf(2, 25), &go);
  w.Admit(PushOf(3, 4), &go);
  EXPECT_EQ(Requests(go), (std::vector<uint64_t>{1}));
  go.clear();
  w.Release(4, &go);
  EXPECT_EQ(Requests(go), (std::vector<uint64_t>{2})) << "the big push goes alone, and 3 stays behind it";
  go.clear();
  w.Release(25, &go);
  EXPECT_EQ(Requests(go), (std::vector<uint64_t>{3}));
}

TEST(CreditWindow, TakeWaitingEmptiesTheWindow) {
  CreditWindow w(4);
  std::vector<CreditWindow::Push> go;
  for (uint64_t r = 1; r <= 3; ++r) w.Admit(PushOf(r, 4), &go);
  auto waiting = w.TakeWaiting();
  EXPECT_EQ(waiting.size(), 2u);
  EXPECT_EQ(w.waiting(), 0u);
  EXPECT_EQ(w.in_flight_bytes(), 0u);
  go.clear();
  w.Admit(PushOf(9, 4), &go);
  EXPECT_EQ(Requests(go), (std::vector<uint64_t>{9})) << "a fresh window after a failure";
}

}  // namespace
}  // namespace syncline
