// The attacks of issue 14 against the control plane, by a process that never
// joined (or holds another token): each forged message is dropped and the job
// goes on, or ends for its real cause. Nodes are threads of this test over the
// loopback network; the forger is a plain endpoint on the same network.
#include "scheduler/scheduler.h"

#include "tests/unit/scheduler/scheduler_testing.h"
#include "transport/faulty_endpoint.h"
#include "transport/wire.h"

namespace syncline {
namespace {

using namespace scheduler_testing;

class ForgedMessagesTest : public SchedulerTest {
 protected:
  // A 2-worker, 1-server job that has started, and a forger connected to
  // the scheduler (peer 0) and to every node (by its node id).
  void SetUpJob() {
    Settings s = JobSettings(2, 1);
    StartScheduler(s);
    w0_ = &AddNode("w0", Role::kWorker, s);
    w1_ = &AddNode("w1", Role::kWorker, s);
    srv_ = &AddNode("s0", Role::kServer, s);
    JoinAll({w0_, w1_, srv_});
    forger_ = net_.CreateEndpoint();
    ASSERT_TRUE(forger_->Listen("loop://forger", [](Message&&) {}).ok());
    ASSERT_TRUE(forger_->Connect(0, kSchedulerAddress).ok());
    for (Node* n : {w0_, w1_, srv_}) ASSERT_TRUE(forger_->Connect(n->client->my_id(), n->address).ok());
  }
  // Sends `m` from the forger, unsigned or signed with a key of its own
  // (a guessed token gives it one).
  void Forge(int32_t to, Message m, bool sign_with_own_key) {
    if (sign_with_own_key) {
      KeyRing own;
      own.SetPeerKey(to, NodeKey(JobKey("guessed"), std::string(kRegistrationNonceBytes, 'x')));
      ASSERT_TRUE(own.Sign(to, &m.header).ok());
    }
    ASSERT_TRUE(forger_->Send(to, std::move(m), Deadline::AfterMs(1000)).ok());
  }
  void TearDown() override {
    if (forger_) forger_->Close();
    SchedulerTest::TearDown();
  }

  Node* w0_ = nullptr;
  Node* w1_ = nullptr;
  Node* srv_ = nullptr;
  std::unique_ptr<Endpoint> forger_;
};

// The scheduler's count of messages it refused as unauthenticated.
double UnauthenticatedAtTheScheduler(const Scheduler& scheduler) {
  const std::string text = scheduler.metrics().Render();
  const std::string series = "syncline_dropped_messages_total{reason=\"unauthenticated\"} ";
  const size_t at = text.find(series);
  return at == std::string::npos ? -1 : std::stod(text.substr(at + series.size()));
}

TEST_F(ForgedMessagesTest, WhatTheSchedulerHeldForIdsOutsideTheJobIsDroppedOnceTheJobStarts) {
  // Before the address book, ids not handed out yet may be real nodes' soon:
  // messages in their names wait for the keys. Once the book is out, no id
  // outside it will ever have one, and what waited is dropped (issue 28).
  Settings s = JobSettings(1, 1);
  StartScheduler(s);
  forger_ = net_.CreateEndpoint();
  ASSERT_TRUE(forger_->Listen("loop://forger", [](Message&&) {}).ok());
  ASSERT_TRUE(forger_->Connect(0, kSchedulerAddress).ok());
  for (int32_t id : {5, 6, 7}) Forge(0, MakeMessage(proto::HEARTBEAT, id), /*sign_with_own_key=*/true);
  Forge(0, MakeMessage(proto::HEARTBEAT, 5), /*sign_with_own_key=*/false);  // no proof: refused at once
  // In order from one sender: once the last is counted, the three before it are held.
  ASSERT_TRUE(Eventually([&] { return UnauthenticatedAtTheScheduler(*scheduler_) == 1; }));
  Node& w0 = AddNode("w0", Role::kWorker, s);
  Node& s0 = AddNode("s0", Role::kServer, s);
  JoinAll({&w0, &s0});
  // The nodes' heartbeats after the book make the scheduler look at what it holds again.
  EXPECT_TRUE(Eventually([&] { return UnauthenticatedAtTheScheduler(*scheduler_) == 4; }))
      << UnauthenticatedAtTheScheduler(*scheduler_);
}

TEST_F(ForgedMessagesTest, ARegistrationRecordedInAnEarlierJobDoesNotJoinALaterOne) {
  // A token holder's registration, recorded on the wire of one job and
  // replayed to the scheduler of a later job with the same token (issue 28).
  // It proves the token, but carries back a challenge that the later
  // scheduler never issued: it takes no slot, and the real node still joins.
  Settings s = JobSettings(1, 1);
  std::vector<Message> recorded;  // what the first job's worker sent, as signed
  {
    Settings first = s;
    first.role = Role::kScheduler;
    Scheduler scheduler(first, net_.CreateEndpoint());
    ASSERT_TRUE(scheduler.Listen("loop://first-scheduler").ok());
    auto run = std::async(std::launch::async, [&] { return scheduler.Run(); });
    auto tap = std::make_unique<FaultyEndpoint>(net_.CreateEndpoint());
    tap->SetSendFilter([&](PeerId, Message& m) {
      if (m.header.op() == proto::REGISTER) recorded.push_back(m);
      return true;
    });
    KeyRing* keys = nullptr;
    auto endpoint = Authenticated(s.job_token, std::move(tap), &keys);
    Settings ws = s;
    ws.role = Role::kWorker;
    SchedulerClient worker(ws, Role::kWorker, endpoint.get(), "loop://first-scheduler", keys);
    ASSERT_TRUE(endpoint->Listen("loop://old-w0", [&](Message&& m) { worker.Handle(m); }).ok());
    auto joined = std::async(std::launch::async, [&] { return worker.Join("loop://old-w0"); });
    // Its job never starts (no server): the recording is all this side is for.
    ASSERT_TRUE(Eventually([&] {
      const std::string text = scheduler.metrics().Render();
      return text.find("syncline_registered_nodes{role=\"worker\"} 1") != std::string::npos;
    }));
    scheduler.RequestAbort("first job over");
    ASSERT_TRUE(Ready(run, 10000));
    ASSERT_TRUE(Ready(joined, 10000));
    endpoint->Close();
  }
  ASSERT_EQ(recorded.size(), 2u) << "a registration asks for a challenge, then answers it";
  EXPECT_TRUE(recorded[0].header.register_body().challenge().empty());
  EXPECT_EQ(recorded[1].header.register_body().challenge().size(), kRegistrationChallengeBytes);

  StartScheduler(s);
  forger_ = net_.CreateEndpoint();
  ASSERT_TRUE(forger_->Listen("loop://forger", [](Message&&) {}).ok());
  ASSERT_TRUE(forger_->Connect(0, kSchedulerAddress).ok());
  for (const Message& m : recorded) ASSERT_TRUE(forger_->Send(0, m, Deadline::AfterMs(1000)).ok());
  // The answer with the old challenge is refused, and counted.
  ASSERT_TRUE(Eventually([&] { return UnauthenticatedAtTheScheduler(*scheduler_) == 1; }))
      << UnauthenticatedAtTheScheduler(*scheduler_);
  EXPECT_THAT(scheduler_->metrics().Render(), HasSubstr("syncline_registered_nodes{role=\"worker\"} 0"));
  // The job's own worker takes the slot the replay asked for.
  Node& w0 = AddNode("w0", Role::kWorker, s);
  Node& s0 = AddNode("s0", Role::kServer, s);
  JoinAll({&w0, &s0});
  EXPECT_TRUE(w0.client->health().ok());
}

TEST_F(ForgedMessagesTest, ForgedAbortsInEitherDirectionDoNotEndTheJob) {
  SetUpJob();
  for (bool sign : {false, true}) {
    // To the scheduler, in a worker's name (blaming it) and with an empty reason.
    Message blame = MakeMessage(proto::ABORT, w0_->client->my_id());
    blame.header.mutable_abort()->set_reason("forged");
    blame.header.mutable_abort()->set_culprit(w1_->client->my_id());
    Forge(0, blame, sign);
    Message empty = MakeMessage(proto::ABORT, w1_->client->my_id());
    empty.header.mutable_abort()->set_culprit(-1);
    Forge(0, empty, sign);
    // Before an id: the registration nonce of no one.
    Message early = MakeMessage(proto::ABORT, -1);
    early.header.mutable_abort()->set_reason("forged early");
    early.header.mutable_abort()->set_address(w0_->address);
    Forge(0, early, sign);
    // To a worker and the server, in the scheduler's name (and with no sender field at all).
    Message from_scheduler = MakeMessage(proto::ABORT, 0);
    from_scheduler.header.mutable_abort()->set_reason("forged by the scheduler");
    Forge(w0_->client->my_id(), from_scheduler, sign);
    from_scheduler.header.clear_sender();
    Forge(srv_->client->my_id(), from_scheduler, sign);
  }
  EXPECT_FALSE(Ready(run_, 300)) << "a forged abort ended the job";
  for (Node* n : {w0_, w1_, srv_}) EXPECT_TRUE(n->client->health().ok()) << n->address;
  // The real ones still work.
  w1_->client->Abort("real reason");
  Status st = RunResult();
  EXPECT_THAT(st.message(), HasSubstr("real reason"));
}

TEST_F(ForgedMessagesTest, ForgedShutdownAndWorkerFinishedAreIgnoredByTheServer) {
  SetUpJob();
  bool worker_finished = false;
  srv_->client->SetWorkerFinishedHandler([&](int) { worker_finished = true; });
  for (bool sign : {false, true}) {
    Forge(srv_->client->my_id(), MakeMessage(proto::SHUTDOWN, 0), sign);
    Message finished = MakeMessage(proto::WORKER_FINISHED, 0);
    finished.header.mutable_worker_finished()->set_rank(0);
    Forge(srv_->client->my_id(), finished, sign);
  }
  // A shutdown the server took would end this wait at once.
  Status st = srv_->client->WaitForShutdown(Deadline::AfterMs(300));
  EXPECT_EQ(st.code(), StatusCode::kDeadlineExceeded) << st.ToString();
  EXPECT_FALSE(worker_finished);
  auto* auth = dynamic_cast<AuthenticatedEndpoint*>(srv_->endpoint.get());
  ASSERT_NE(auth, nullptr);
  EXPECT_EQ(auth->stats().messages_unauthenticated, 4u);
}

TEST_F(ForgedMessagesTest, ForgedHeartbeatsDoNotKeepAFrozenNodeAlive) {
  SetUpJob();
  const int32_t frozen = w1_->client->my_id();
  net_.Isolate("loop://w1");  // w1 stops: it sends and hears nothing
  const auto start = Clock::now();
  // The forger keeps sending heartbeats in w1's name.
  while (!Ready(run_, 20) && Clock::now() - start < Millis(kHeartbeatTimeoutMs * 5)) {
    Forge(0, MakeMessage(proto::HEARTBEAT, frozen), false);
    Forge(0, MakeMessage(proto::HEARTBEAT, frozen), true);
  }
  Status st = RunResult(1000);
  EXPECT_EQ(st.code(), StatusCode::kAborted) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr("loop://w1"));
  EXPECT_THAT(st.message(), HasSubstr("presumed dead"));
}

TEST_F(ForgedMessagesTest, ForgedRegistrationsDoNotTakeASlot) {
  Settings s = JobSettings(1, 1);
  StartScheduler(s);
  auto forger = net_.CreateEndpoint();
  ASSERT_TRUE(forger->Listen("loop://forger", [](Message&&) {}).ok());
  ASSERT_TRUE(forger->Connect(0, kSchedulerAddress).ok());
  for (int i = 0; i < 3; ++i) {
    Message reg = MakeMessage(proto::REGISTER, -1);
    reg.header.mutable_register_body()->set_role(proto::WORKER);
    reg.header.mutable_register_body()->set_address("loop://forger");
    reg.header.mutable_register_body()->set_requested_rank(0);
    if (i > 0) {  // with a guessed token's key, then a replay of that
      KeyRing own;
      own.SetOwnNonce(std::string(kRegistrationNonceBytes, 'f'));
      own.SetPeerKey(0, NodeKey(JobKey("guessed"), std::string(kRegistrationNonceBytes, 'f')));
      ASSERT_TRUE(own.Sign(0, &reg.header).ok());
    }
    ASSERT_TRUE(forger->Send(0, reg, Deadline::AfterMs(1000)).ok());
  }
  Node& w = AddNode("w0", Role::kWorker, s);
  Node& srv = AddNode("s0", Role::kServer, s);
  JoinAll({&w, &srv});
  EXPECT_EQ(w.client->my_rank(), 0) << "the forged registration took rank 0";
  auto workers = w.client->NodesOf(proto::WORKER);
  ASSERT_EQ(workers.size(), 1u);
  EXPECT_EQ(workers[0].address(), "loop://w0");
  forger->Close();
}

}  // namespace
}  // namespace syncline
