// StageQueue (worker/stage_queue.h): the most urgent item is served first,
// ties in posting order; Stop drops what is queued, and what comes later,
// with its reason; Drain returns once nothing is queued or being served.
#include "worker/stage_queue.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace syncline {
namespace {

struct Item {
  int64_t priority = 0;
  uint64_t sequence = 0;
  std::string name;
};

// Served items and dropped ones, as the stage's callbacks report them; the
// first item served holds the stage until Release.
class Recorder {
 public:
  void Serve(Item&& item) {
    MutexLock lock(mu_);
    served_.push_back(item.name);
    cv_.NotifyAll();
    if (served_.size() == 1) cv_.WaitUntil(mu_, Deadline::AfterMs(10000), [this]() REQUIRES(mu_) { return released_; });
  }
  void Drop(Item&& item, const Status& why) {
    MutexLock lock(mu_);
    dropped_.push_back(item.name + ": " + why.message());
  }
  // The two as a stage's callbacks.
  StageQueue<Item>::Serve Serving() {
    return [this](Item&& i) { Serve(std::move(i)); };
  }
  StageQueue<Item>::Drop Dropping() {
    return [this](Item&& i, const Status& why) { Drop(std::move(i), why); };
  }
  bool AwaitServed(size_t n) {
    MutexLock lock(mu_);
    return cv_.WaitUntil(mu_, Deadline::AfterMs(10000), [&]() REQUIRES(mu_) { return served_.size() >= n; });
  }
  void Release() {
    MutexLock lock(mu_);
    released_ = true;
    cv_.NotifyAll();
  }
  std::vector<std::string> served() {
    MutexLock lock(mu_);
    return served_;
  }
  std::vector<std::string> dropped() {
    MutexLock lock(mu_);
    return dropped_;
  }

 private:
  Mutex mu_;
  CondVar cv_;
  bool released_ GUARDED_BY(mu_) = false;
  std::vector<std::string> served_ GUARDED_BY(mu_);
  std::vector<std::string> dropped_ GUARDED_BY(mu_);
};

TEST(StageQueue, ServesTheMostUrgentFirstAndTiesInPostingOrder) {
  Recorder r;
  StageQueue<Item> stage(r.Serving(), r.Dropping());
  stage.Post({0, 0, "first"});
  ASSERT_TRUE(r.AwaitServed(1));  // held: what follows queues
  stage.Post({1, 1, "low-a"});
  stage.Post({9, 2, "high-a"});
  stage.Post({1, 3, "low-b"});
  stage.Post({9, 4, "high-b"});
  stage.Post({5, 5, "middle"});
  r.Release();
  ASSERT_TRUE(r.AwaitServed(6));
  EXPECT_EQ(r.served(), (std::vector<std::string>{"first", "high-a", "high-b", "middle", "low-a", "low-b"}));
  EXPECT_TRUE(r.dropped().empty());
}

TEST(StageQueue, StopDropsWhatIsQueuedAndWhatComesLaterWithTheReason) {
  Recorder r;
  {
    StageQueue<Item> stage(r.Serving(), r.Dropping());
    stage.Post({0, 0, "served"});
    ASSERT_TRUE(r.AwaitServed(1));
    stage.Post({0, 1, "queued"});
    stage.Stop(Aborted("job over"));
    stage.Post({0, 2, "late"});
    EXPECT_EQ(stage.queued(), 0u);
    r.Release();
  }  // the destructor joins the thread, which ends after the item it serves
  EXPECT_EQ(r.served(), std::vector<std::string>{"served"});
  EXPECT_EQ(r.dropped(), (std::vector<std::string>{"queued: job over", "late: job over"}));
}

TEST(StageQueue, DrainWaitsForTheItemBeingServedAndEveryQueuedOne) {
  Recorder r;
  StageQueue<Item> stage(r.Serving(), r.Dropping());
  stage.Post({0, 0, "held"});
  ASSERT_TRUE(r.AwaitServed(1));
  stage.Post({0, 1, "queued"});
  EXPECT_EQ(stage.Drain(Deadline::AfterMs(50)).code(), StatusCode::kDeadlineExceeded);
  r.Release();
  EXPECT_TRUE(stage.Drain(Deadline::AfterMs(10000)).ok());
  EXPECT_EQ(r.served(), (std::vector<std::string>{"held", "queued"}));
}

}  // namespace
}  // namespace syncline
