// Status, Result<T> and the SYNCLINE_RETURN_IF_ERROR / SYNCLINE_ASSIGN_OR_RETURN macros.
#include "common/status.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace syncline {
namespace {

TEST(StatusTest, DefaultIsOk) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kOk);
  EXPECT_EQ(s.message(), "");
  EXPECT_EQ(s.ToString(), "OK");
  EXPECT_TRUE(Status::Ok().ok());
}

TEST(StatusTest, HelpersSetCodeAndMessage) {
  struct Case {
    Status status;
    StatusCode code;
    const char* name;
  };
  const Case cases[] = {
      {InvalidArgument("m"), StatusCode::kInvalidArgument, "InvalidArgument"},
      {NotFound("m"), StatusCode::kNotFound, "NotFound"},
      {AlreadyExists("m"), StatusCode::kAlreadyExists, "AlreadyExists"},
      {FailedPrecondition("m"), StatusCode::kFailedPrecondition, "FailedPrecondition"},
      {DeadlineExceeded("m"), StatusCode::kDeadlineExceeded, "DeadlineExceeded"},
      {Unavailable("m"), StatusCode::kUnavailable, "Unavailable"},
      {Aborted("m"), StatusCode::kAborted, "Aborted"},
      {Internal("m"), StatusCode::kInternal, "Internal"},
  };
  for (const Case& c : cases) {
    EXPECT_FALSE(c.status.ok()) << c.name;
    EXPECT_EQ(c.status.code(), c.code) << c.name;
    EXPECT_EQ(c.status.message(), "m");
    EXPECT_STREQ(StatusCodeName(c.code), c.name);
    EXPECT_EQ(c.status.ToString(), std::string(c.name) + ": m");
  }
  EXPECT_STREQ(StatusCodeName(StatusCode::kOk), "OK");
  EXPECT_STREQ(StatusCodeName(static_cast<StatusCode>(999)), "Unknown");
}

TEST(StatusTest, WithContextPrefixesErrorsAndLeavesOkAlone) {
  Status s = DeadlineExceeded("waiting for barrier").WithContext("worker 2");
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(s.message(), "worker 2: waiting for barrier");
  EXPECT_EQ(s.WithContext("job").message(), "job: worker 2: waiting for barrier");
  Status ok = Status::Ok().WithContext("ignored");
  EXPECT_TRUE(ok.ok());
  EXPECT_EQ(ok.message(), "");
}

TEST(ResultTest, HoldsAValue) {
  Result<int> r = 42;
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value(), 42);
  EXPECT_EQ(*r, 42);
  r.value() = 7;
  EXPECT_EQ(*r, 7);
}

TEST(ResultTest, HoldsAnError) {
  Result<std::string> r = NotFound("no such key");
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(r.status().message(), "no such key");
}

TEST(ResultTest, ArrowAndMoveOut) {
  Result<std::string> r = std::string("payload");
  EXPECT_EQ(r->size(), 7u);
  std::string taken = std::move(r).value();
  EXPECT_EQ(taken, "payload");
  Result<std::unique_ptr<int>> p = std::make_unique<int>(5);
  ASSERT_TRUE(p.ok());
  std::unique_ptr<int> owned = std::move(p).value();
  EXPECT_EQ(*owned, 5);
}

TEST(ResultTest, AValuelessResultNeverReportsOk) {
  // A Result without a value must carry an error; otherwise
  // SYNCLINE_ASSIGN_OR_RETURN would "return OK" while skipping the assignment.
  Result<int> r = Status::Ok();
  EXPECT_FALSE(r.ok());
  EXPECT_FALSE(r.status().ok()) << r.status().ToString();
  auto use = [](Result<int> in) -> Status {
    SYNCLINE_ASSIGN_OR_RETURN(int v, std::move(in));
    return v == 1 ? Status::Ok() : Internal("unexpected");
  };
  EXPECT_FALSE(use(Status::Ok()).ok()) << "an OK status leaked out without a value";
  EXPECT_TRUE(use(1).ok());
}

Status FailIf(bool fail, int* calls) {
  ++*calls;
  return fail ? Unavailable("down") : Status::Ok();
}

Status TwoSteps(bool fail_first, bool fail_second, int* calls, bool* reached_end) {
  SYNCLINE_RETURN_IF_ERROR(FailIf(fail_first, calls));
  SYNCLINE_RETURN_IF_ERROR(FailIf(fail_second, calls));
  *reached_end = true;
  return Status::Ok();
}

TEST(MacrosTest, ReturnIfErrorStopsAtTheFirstError) {
  int calls = 0;
  bool end = false;
  EXPECT_TRUE(TwoSteps(false, false, &calls, &end).ok());
  EXPECT_EQ(calls, 2);
  EXPECT_TRUE(end);

  calls = 0;
  end = false;
  Status s = TwoSteps(true, false, &calls, &end);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_EQ(s.message(), "down");
  EXPECT_EQ(calls, 1);
  EXPECT_FALSE(end);

  calls = 0;
  EXPECT_EQ(TwoSteps(false, true, &calls, &end).code(), StatusCode::kUnavailable);
  EXPECT_EQ(calls, 2);
  EXPECT_FALSE(end);
}

Result<int> Half(int x) {
  if (x % 2 != 0) return InvalidArgument(std::to_string(x) + " is odd");
  return x / 2;
}

Result<int> Quarter(int x) {
  SYNCLINE_ASSIGN_OR_RETURN(int half, Half(x));
  SYNCLINE_ASSIGN_OR_RETURN(int quarter, Half(half));  // a second use in the same scope compiles
  return quarter;
}

Result<std::unique_ptr<int>> Boxed(int x) {
  if (x < 0) return InvalidArgument("negative");
  return std::make_unique<int>(x);
}

Status UseBoxed(int x, int* out) {
  SYNCLINE_ASSIGN_OR_RETURN(std::unique_ptr<int> box, Boxed(x));  // move-only value
  *out = *box;
  return Status::Ok();
}

TEST(MacrosTest, AssignOrReturnAssignsOrPropagates) {
  auto q = Quarter(12);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(*q, 3);
  auto odd = Quarter(6);  // 6 -> 3 -> odd
  ASSERT_FALSE(odd.ok());
  EXPECT_EQ(odd.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(odd.status().message(), "3 is odd");

  int out = 0;
  EXPECT_TRUE(UseBoxed(9, &out).ok());
  EXPECT_EQ(out, 9);
  out = 0;
  Status s = UseBoxed(-1, &out);
  EXPECT_EQ(s.message(), "negative");
  EXPECT_EQ(out, 0);
}

TEST(MacrosTest, AssignOrReturnIntoExistingVariable) {
  auto f = [](int x) -> Status {
    int v = -1;
    SYNCLINE_ASSIGN_OR_RETURN(v, Half(x));
    return v == x / 2 ? Status::Ok() : Internal("wrong value");
  };
  EXPECT_TRUE(f(8).ok());
  EXPECT_EQ(f(7).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace syncline
