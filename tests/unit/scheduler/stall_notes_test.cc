// The scheduler's handling of workers' stall notes (scheduler/stalls.cc):
// the job ends once every worker is stalled, saying whether their push_pull
// counts differ; one stalled worker alone, a worker moving again, and notes
// that are not a worker's to send or that count undeclared tensors change
// nothing. Declarations the others never make end the job the same way.
#include "scheduler/scheduler.h"

#include "tests/unit/scheduler/scheduler_testing.h"
#include "transport/wire.h"

namespace syncline {
namespace {

using namespace scheduler_testing;

class StallNotesTest : public SchedulerTest {
 protected:
  // A started 2-worker, 1-server job with tensors 'a' and 'b' declared.
  void SetUpJob(int stall_timeout_ms = 2000) {
    Settings s = JobSettings(2, 1);
    s.stall_timeout_ms = stall_timeout_ms;
    StartScheduler(s);
    w0_ = &AddNode("w0", Role::kWorker, s);
    w1_ = &AddNode("w1", Role::kWorker, s);
    srv_ = &AddNode("s0", Role::kServer, s);
    JoinAll({w0_, w1_, srv_});
    for (const char* name : {"a", "b"}) {
      auto d0 = Declare(*w0_, name);
      auto d1 = Declare(*w1_, name);
      ASSERT_TRUE(d0.get().ok());
      ASSERT_TRUE(d1.get().ok());
    }
  }
  // `from` declares a float32[100] tensor `name`; the future ends when every worker did.
  std::future<Result<proto::DeclareReply>> Declare(Node& from, const std::string& name) {
    proto::TensorSpec spec;
    spec.set_name(name);
    spec.set_dtype(proto::FLOAT32);
    spec.set_num_elements(100);
    spec.set_partition_bytes(4096);
    return std::async(std::launch::async, [&from, spec] { return from.client->Declare(spec, Deadline::AfterMs(5000)); });
  }
  std::string Rank(Node* n) { return std::to_string(n->client->my_rank()); }
  // `from` says it is stalled waiting for `waiting_for`, with these counts.
  void Stalled(Node& from, const std::string& waiting_for, std::vector<std::pair<std::string, uint64_t>> calls) {
    Message m = MakeMessage(proto::WORKER_STALLED, from.client->my_id());
    proto::WorkerStalled* note = m.header.mutable_worker_stalled();
    note->set_stalled(true);
    note->set_waiting_for(waiting_for);
    note->set_waited_ms(2000);
    for (const auto& [tensor, n] : calls) {
      proto::TensorCalls* c = note->add_calls();
      c->set_tensor(tensor);
      c->set_push_pulls(n);
    }
    ASSERT_TRUE(from.endpoint->Send(kSchedulerPeer, std::move(m), Deadline::AfterMs(1000)).ok());
  }
  void MovingAgain(Node& from) {
    Message m = MakeMessage(proto::WORKER_STALLED, from.client->my_id());
    m.header.mutable_worker_stalled()->set_stalled(false);
    ASSERT_TRUE(from.endpoint->Send(kSchedulerPeer, std::move(m), Deadline::AfterMs(1000)).ok());
  }
  bool StillRunning() { return !Ready(run_, 500); }

  Node* w0_ = nullptr;
  Node* w1_ = nullptr;
  Node* srv_ = nullptr;
};

TEST_F(StallNotesTest, EveryWorkerStalledWithDifferentCountsEndsTheJobNamingThem) {
  SetUpJob();
  Stalled(*w0_, "b", {{"a", 2}, {"b", 2}});
  ASSERT_TRUE(StillRunning()) << "worker 1 is not waiting: only a warning";
  Stalled(*w1_, "a", {{"a", 3}});  // never push_pulled 'b'
  Status st = RunResult();
  EXPECT_EQ(st.code(), StatusCode::kAborted) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr("every worker waits for the others"));
  // Ranks go by registration order, which the concurrent joins leave open.
  const std::string r0 = std::to_string(w0_->client->my_rank()), r1 = std::to_string(w1_->client->my_rank());
  EXPECT_THAT(st.message(), HasSubstr("tensor 'a': 2 by worker " + r0 + ", 3 by worker " + r1));
  EXPECT_THAT(st.message(), HasSubstr("tensor 'b': 0 by worker " + r1 + ", 2 by worker " + r0));
}

TEST_F(StallNotesTest, EveryWorkerStalledWithTheSameCountsPointsAtTheServers) {
  SetUpJob();
  Stalled(*w0_, "a", {{"a", 4}, {"b", 4}});
  Stalled(*w1_, "b", {{"a", 4}, {"b", 4}});
  Status st = RunResult();
  EXPECT_EQ(st.code(), StatusCode::kAborted) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr("although they made the same push_pull calls"));
  EXPECT_THAT(st.message(), HasSubstr(w0_->client->my_rank() == 0 ? "'a' (worker 0), 'b' (worker 1)"
                                                                   : "'b' (worker 0), 'a' (worker 1)"));
}

TEST_F(StallNotesTest, AWorkerMovingAgainIsNoLongerCounted) {
  SetUpJob();
  Stalled(*w0_, "a", {{"a", 1}, {"b", 1}});
  MovingAgain(*w0_);
  Stalled(*w1_, "a", {{"a", 1}, {"b", 1}});
  EXPECT_TRUE(StillRunning());
}

TEST_F(StallNotesTest, NotesNotAWorkersToSendOrCountingUndeclaredTensorsAreIgnored) {
  SetUpJob();
  Stalled(*srv_, "a", {{"a", 1}});                   // a server has no push_pulls
  Stalled(*w0_, "a", {{"a", 1}, {"zzz", 1}});        // undeclared tensor
  Stalled(*w0_, "a", {{"a", 1}, {"a", 2}});          // counted twice
  Stalled(*w0_, "zzz", {{"a", 1}});                  // waits for an undeclared tensor
  Stalled(*w1_, "a", {{"a", 1}, {"b", 1}});
  EXPECT_TRUE(StillRunning()) << "only worker 1's note stands";
}

TEST_F(StallNotesTest, WorkersWaitingInDifferentDeclarationsEndTheJobNamingEach) {
  SetUpJob(300);
  auto x = Declare(*w0_, "x");
  auto y = Declare(*w1_, "y");
  Status st = RunResult();
  EXPECT_EQ(st.code(), StatusCode::kAborted) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr("workers wait in declarations the others do not make"));
  EXPECT_THAT(st.message(), HasSubstr("worker " + Rank(w0_) + " has waited "));
  EXPECT_THAT(st.message(), HasSubstr(" ms in the declaration of tensor 'x' (fp32[100] in chunks of 4096 bytes), "
                                      "which worker " + Rank(w1_) + " has not declared"));
  EXPECT_THAT(st.message(), HasSubstr("in the declaration of tensor 'y'"));
  EXPECT_FALSE(x.get().ok());
  EXPECT_FALSE(y.get().ok());
}

TEST_F(StallNotesTest, ADeclarationWaitsForAWorkerThatMayStillMakeIt) {
  SetUpJob(300);
  auto x0 = Declare(*w0_, "x");
  EXPECT_TRUE(StillRunning()) << "worker 1 waits for nothing: it may be computing";
  EXPECT_TRUE(StillRunning());
  auto x1 = Declare(*w1_, "x");
  EXPECT_TRUE(x0.get().ok());
  EXPECT_TRUE(x1.get().ok());
  // A declaration that waits for a worker stuck at a barrier ends the job, naming both.
  auto at_barrier = std::async(std::launch::async, [this] {
    return w1_->client->Barrier(proto::WORKER, Deadline::AfterMs(5000));
  });
  auto z = Declare(*w0_, "z");
  Status st = RunResult();
  EXPECT_EQ(st.code(), StatusCode::kAborted) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr("in the declaration of tensor 'z'"));
  EXPECT_THAT(st.message(), HasSubstr("worker " + Rank(w1_) + " waits at a barrier"));
  EXPECT_FALSE(at_barrier.get().ok());
  EXPECT_FALSE(z.get().ok());
}

TEST_F(StallNotesTest, ADeclarationAFinishedWorkerNeverMadeEndsTheJobNamingIt) {
  SetUpJob(300);
  ASSERT_TRUE(w1_->client->Finish().ok());
  auto x = Declare(*w0_, "x");
  Status st = RunResult();
  EXPECT_EQ(st.code(), StatusCode::kAborted) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr("in the declaration of tensor 'x' (fp32[100] in chunks of 4096 bytes), which "
                                      "worker " + Rank(w1_) + " has not declared; worker " + Rank(w1_) +
                                      " has finished"));
  EXPECT_FALSE(x.get().ok());
}

}  // namespace
}  // namespace syncline
