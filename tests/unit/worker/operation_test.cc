// Operation (worker/operation.h) with the stages a device push_pull adds: a
// written chunk is delivered to a stage and ends only when that stage says
// so; a stage's hold keeps a failed operation's Wait and done callback back
// until the stage lets go of the caller's memory.
#include "worker/operation.h"

#include <gtest/gtest.h>

#include <vector>

namespace syncline {
namespace {

// Sends chunk `i` of `op` and lets the transport release it, then brings its sum.
void SendAndReply(Operation& op, size_t i, const std::vector<float>& sum) {
  std::optional<Buffer> view = op.SendView(i);
  ASSERT_TRUE(view.has_value());
  view.reset();
  op.OnReply(i, Buffer::Copy(sum.data(), sum.size() * 4));
}

TEST(Operation, AWrittenChunkEndsWhenItsDeliveryDoes) {
  std::vector<float> data(4, 1.0f);
  std::vector<size_t> delivered;
  std::shared_ptr<Operation> delivering;
  int done_calls = 0;
  Status done_status = Internal("not called");
  auto op = std::make_shared<Operation>(
      "t", reinterpret_cast<uint8_t*>(data.data()), std::vector<uint64_t>{0, 8}, std::vector<uint64_t>{8, 8},
      [&](const Status& st) { ++done_calls, done_status = st; }, nullptr, nullptr,
      [&](std::shared_ptr<Operation> o, size_t i) { delivering = std::move(o), delivered.push_back(i); });
  SendAndReply(*op, 1, {5, 6});
  SendAndReply(*op, 0, {3, 4});
  EXPECT_EQ(delivered, (std::vector<size_t>{1, 0}));
  EXPECT_EQ(data, (std::vector<float>{3, 4, 5, 6}));  // written to host memory already
  EXPECT_FALSE(op->Done());
  op->Delivered(1, Status::Ok());
  EXPECT_FALSE(op->Done());
  EXPECT_EQ(done_calls, 0);
  op->Delivered(0, Status::Ok());
  EXPECT_TRUE(op->Done());
  EXPECT_EQ(done_calls, 1);
  EXPECT_TRUE(done_status.ok());
  EXPECT_TRUE(op->Wait(Deadline::AfterMs(1000)).ok());
}

TEST(Operation, AFailedDeliveryFailsTheOperationNamingTheChunkOnceEveryOtherChunkEnded) {
  std::vector<float> data(4, 1.0f);
  auto op = std::make_shared<Operation>(
      "layer.grad", reinterpret_cast<uint8_t*>(data.data()), std::vector<uint64_t>{0, 8},
      std::vector<uint64_t>{8, 8}, nullptr, nullptr, nullptr, [](std::shared_ptr<Operation>, size_t) {});
  SendAndReply(*op, 0, {3, 4});
  op->Delivered(0, Internal("copy failed"));
  // Chunk 1 still goes out (the servers' round needs it) and comes back.
  SendAndReply(*op, 1, {5, 6});
  EXPECT_EQ(data[2], 5);
  // Its delivery still writes the caller's memory: no return yet.
  EXPECT_FALSE(op->Done());
  EXPECT_EQ(op->Wait(Deadline::AfterMs(50)).code(), StatusCode::kDeadlineExceeded);
  op->Delivered(1, Status::Ok());
  Status st = op->Wait(Deadline::AfterMs(1000));
  EXPECT_EQ(st.code(), StatusCode::kInternal);
  EXPECT_NE(st.message().find("tensor 'layer.grad': chunk 0: copy failed"), std::string::npos) << st.ToString();
}

TEST(Operation, AHoldKeepsAFailedOperationFromEndingUntilItIsLetGo) {
  std::vector<float> data(2, 1.0f);
  int done_calls = 0;
  auto op = std::make_shared<Operation>("t", reinterpret_cast<uint8_t*>(data.data()), std::vector<uint64_t>{0},
                                        std::vector<uint64_t>{8}, [&](const Status&) { ++done_calls; });
  std::shared_ptr<void> hold = op->Hold();
  ASSERT_NE(hold, nullptr);
  op->Fail(Aborted("job over"));
  EXPECT_FALSE(op->Done());
  EXPECT_EQ(done_calls, 0);
  EXPECT_EQ(op->Wait(Deadline::AfterMs(50)).code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(op->Hold(), nullptr);  // no new hold on a failed operation
  hold.reset();
  EXPECT_EQ(done_calls, 1);
  EXPECT_EQ(op->Wait(Deadline::AfterMs(1000)).code(), StatusCode::kAborted);
}

}  // namespace
}  // namespace syncline
