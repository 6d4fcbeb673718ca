// Scheduler + SchedulerClient over the in-process loopback network: rendezvous,
// barriers, job tokens, startup and declarations. Every node is a thread of
// this test; every wait is bounded.
#include "scheduler/scheduler.h"

#include <set>

#include "tests/unit/scheduler/scheduler_testing.h"

namespace syncline {
namespace {

using namespace scheduler_testing;

TEST_F(SchedulerTest, RendezvousAssignsDistinctRanksHonoringRequestsAndPublishesEveryone) {
  Settings s = JobSettings(3, 2);
  StartScheduler(s);
  Settings wants_two = s;
  wants_two.worker_rank = 2;
  Node& w_a = AddNode("w-a", Role::kWorker, s);
  Node& w_b = AddNode("w-b", Role::kWorker, wants_two);
  Node& w_c = AddNode("w-c", Role::kWorker, s);
  Node& s_a = AddNode("s-a", Role::kServer, s);
  Node& s_b = AddNode("s-b", Role::kServer, s);
  JoinAll({&w_a, &w_b, &w_c, &s_a, &s_b});

  EXPECT_EQ(w_b.client->my_rank(), 2) << "the requested rank was not honored";
  std::set<int32_t> worker_ranks = {w_a.client->my_rank(), w_b.client->my_rank(), w_c.client->my_rank()};
  EXPECT_EQ(worker_ranks, (std::set<int32_t>{0, 1, 2}));
  std::set<int32_t> server_ranks = {s_a.client->my_rank(), s_b.client->my_rank()};
  EXPECT_EQ(server_ranks, (std::set<int32_t>{0, 1}));
  std::set<int32_t> ids;
  for (auto& n : nodes_) {
    EXPECT_GT(n->client->my_id(), 0) << "id 0 is the scheduler's";
    ids.insert(n->client->my_id());
  }
  EXPECT_EQ(ids.size(), 5u);

  // Every node sees the same address book, listing everyone by rank.
  for (auto& n : nodes_) {
    auto workers = n->client->NodesOf(proto::WORKER);
    auto servers = n->client->NodesOf(proto::SERVER);
    ASSERT_EQ(workers.size(), 3u);
    ASSERT_EQ(servers.size(), 2u);
    std::set<std::string> addresses;
    for (size_t r = 0; r < workers.size(); ++r) {
      EXPECT_EQ(workers[r].rank(), static_cast<int32_t>(r));
      addresses.insert(workers[r].address());
    }
    for (size_t r = 0; r < servers.size(); ++r) {
      EXPECT_EQ(servers[r].rank(), static_cast<int32_t>(r));
      addresses.insert(servers[r].address());
    }
    EXPECT_EQ(addresses, (std::set<std::string>{"loop://w-a", "loop://w-b", "loop://w-c", "loop://s-a", "loop://s-b"}));
    EXPECT_EQ(workers[2].address(), "loop://w-b");
    auto scheduler = n->client->NodesOf(proto::SCHEDULER);
    ASSERT_EQ(scheduler.size(), 1u);
    EXPECT_EQ(scheduler[0].id(), 0);
  }
  // The book agrees with each node's own view of itself.
  for (auto& n : nodes_) {
    const bool is_worker = n->address.rfind("loop://w", 0) == 0;
    auto group = n->client->NodesOf(is_worker ? proto::WORKER : proto::SERVER);
    const auto& me = group.at(n->client->my_rank());
    EXPECT_EQ(me.id(), n->client->my_id());
    EXPECT_EQ(me.address(), n->address);
    EXPECT_THAT(n->client->Describe(n->client->my_id()), HasSubstr(n->address));
  }
  EXPECT_FALSE(Ready(run_, 0)) << "the job ended on its own";
}

TEST_F(SchedulerTest, BarrierReleasesOnlyWhenEveryMemberArrived) {
  Settings s = JobSettings(3, 1);
  StartScheduler(s);
  Node& w0 = AddNode("w0", Role::kWorker, s);
  Node& w1 = AddNode("w1", Role::kWorker, s);
  Node& w2 = AddNode("w2", Role::kWorker, s);
  Node& srv = AddNode("s0", Role::kServer, s);
  JoinAll({&w0, &w1, &w2, &srv});

  auto barrier = [](Node& n, proto::Role group, int ms) {
    return std::async(std::launch::async, [&n, group, ms] { return n.client->Barrier(group, Deadline::AfterMs(ms)); });
  };
  auto b0 = barrier(w0, proto::WORKER, 5000);
  auto b1 = barrier(w1, proto::WORKER, 5000);
  EXPECT_FALSE(Ready(b0, 150)) << "released before the third worker arrived";
  EXPECT_FALSE(Ready(b1, 0));
  auto b2 = barrier(w2, proto::WORKER, 5000);
  ASSERT_TRUE(Ready(b0, 5000) && Ready(b1, 5000) && Ready(b2, 5000));
  EXPECT_TRUE(b0.get().ok());
  EXPECT_TRUE(b1.get().ok());
  EXPECT_TRUE(b2.get().ok());

  // A barrier of every node (ROLE_UNKNOWN) waits for the server too.
  auto a0 = barrier(w0, proto::ROLE_UNKNOWN, 5000);
  auto a1 = barrier(w1, proto::ROLE_UNKNOWN, 5000);
  auto a2 = barrier(w2, proto::ROLE_UNKNOWN, 5000);
  EXPECT_FALSE(Ready(a0, 150)) << "released without the server";
  auto a3 = barrier(srv, proto::ROLE_UNKNOWN, 5000);
  for (auto* f : {&a0, &a1, &a2, &a3}) {
    ASSERT_TRUE(Ready(*f, 5000));
    EXPECT_TRUE(f->get().ok());
  }

  // Consecutive barriers of the same group are distinct: a second round works.
  auto c0 = barrier(w0, proto::WORKER, 5000);
  auto c1 = barrier(w1, proto::WORKER, 5000);
  auto c2 = barrier(w2, proto::WORKER, 5000);
  for (auto* f : {&c0, &c1, &c2}) {
    ASSERT_TRUE(Ready(*f, 5000));
    EXPECT_TRUE(f->get().ok());
  }
}

TEST_F(SchedulerTest, BarrierWithAMissingMemberTimesOut) {
  Settings s = JobSettings(2, 1);
  StartScheduler(s);
  Node& w0 = AddNode("w0", Role::kWorker, s);
  Node& w1 = AddNode("w1", Role::kWorker, s);
  Node& srv = AddNode("s0", Role::kServer, s);
  JoinAll({&w0, &w1, &srv});
  const auto start = Clock::now();
  Status st = w0.client->Barrier(proto::WORKER, Deadline::AfterMs(200));
  const auto waited = std::chrono::duration_cast<Millis>(Clock::now() - start).count();
  EXPECT_EQ(st.code(), StatusCode::kDeadlineExceeded) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr("barrier"));
  EXPECT_GE(waited, 190);
  EXPECT_LT(waited, 2000);
  EXPECT_TRUE(w0.client->health().ok()) << "a timed-out barrier is not an abort";
}

TEST_F(SchedulerTest, ANonMemberCannotCompleteAGroupBarrier) {
  Settings s = JobSettings(2, 1);
  StartScheduler(s);
  Node& w0 = AddNode("w0", Role::kWorker, s);
  Node& w1 = AddNode("w1", Role::kWorker, s);
  Node& srv = AddNode("s0", Role::kServer, s);
  JoinAll({&w0, &w1, &srv});
  // The server (not a worker) arrives at a WORKER barrier, then one of the two workers.
  auto stray = std::async(std::launch::async,
                          [&] { return srv.client->Barrier(proto::WORKER, Deadline::AfterMs(300)); });
  std::this_thread::sleep_for(Millis(30));
  Status st = w0.client->Barrier(proto::WORKER, Deadline::AfterMs(300));
  ASSERT_TRUE(Ready(stray, 3000));
  (void)stray.get();
  EXPECT_EQ(st.code(), StatusCode::kDeadlineExceeded) << st.ToString();
}

TEST_F(SchedulerTest, RequestedRankOutsideTheJobIsNotAssigned) {
  Settings s = JobSettings(2, 1);
  // The bad rank is rejected at once, but the job can then never fill up: the
  // other nodes hear of it when the scheduler's startup timeout aborts the
  // job, which must come well within the wait below.
  s.startup_timeout_ms = 2000;
  StartScheduler(s);
  Settings bad = s;
  bad.worker_rank = 5;  // a node built without Settings::Validate, or a hostile peer
  Node& w0 = AddNode("w0", Role::kWorker, bad);
  Node& w1 = AddNode("w1", Role::kWorker, s);
  Node& srv = AddNode("s0", Role::kServer, s);
  auto j0 = JoinAsync(w0), j1 = JoinAsync(w1), j2 = JoinAsync(srv);
  ASSERT_TRUE(Ready(j0, 5000) && Ready(j1, 5000) && Ready(j2, 5000));
  Status s0 = j0.get();
  (void)j1.get();
  (void)j2.get();
  EXPECT_EQ(s0.code(), StatusCode::kAborted) << s0.ToString();
  EXPECT_THAT(s0.message(), HasSubstr("rank 5"));
}

TEST_F(SchedulerTest, WrongJobTokenIsNotHeardAndDoesNotCount) {
  Settings s = JobSettings(1, 1);
  StartScheduler(s);
  // Its registration fails authentication, so nothing it says is believed,
  // and nothing answers it: it waits out its startup timeout, and its error
  // points at the token.
  Settings wrong = s;
  wrong.job_token = "guessed";
  wrong.startup_timeout_ms = 300;
  Node& intruder = AddNode("intruder", Role::kWorker, wrong);
  auto join = JoinAsync(intruder);
  ASSERT_TRUE(Ready(join, 5000));
  Status st = join.get();
  EXPECT_EQ(st.code(), StatusCode::kDeadlineExceeded) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr("SYNCLINE_JOB_TOKEN (or SYNCLINE_ENCRYPT) differs"));

  // The real worker still gets the one worker slot.
  Node& w = AddNode("w0", Role::kWorker, s);
  Node& srv = AddNode("s0", Role::kServer, s);
  JoinAll({&w, &srv});
  EXPECT_EQ(w.client->my_rank(), 0);
  auto workers = w.client->NodesOf(proto::WORKER);
  ASSERT_EQ(workers.size(), 1u);
  EXPECT_EQ(workers[0].address(), "loop://w0");
  EXPECT_FALSE(Ready(run_, 0)) << "the rejected node aborted the whole job";
}

TEST_F(SchedulerTest, NodesBeyondTheJobSizeAreRejected) {
  Settings s = JobSettings(1, 1);
  Node& w = StartOneWorkerOneServer(s).worker;  // and server s0
  Node& late = AddNode("late", Role::kWorker, s);
  auto join = JoinAsync(late);
  ASSERT_TRUE(Ready(join, 5000));
  Status st = join.get();
  EXPECT_EQ(st.code(), StatusCode::kAborted);
  EXPECT_THAT(st.message(), HasSubstr("already"));
  EXPECT_TRUE(w.client->health().ok());
  EXPECT_FALSE(Ready(run_, 0));
}

TEST_F(SchedulerTest, DuplicateRequestedRanksAbortTheJob) {
  Settings s = JobSettings(2, 1);
  StartScheduler(s);
  Settings rank1 = s;
  rank1.worker_rank = 1;
  Node& w0 = AddNode("w0", Role::kWorker, rank1);
  Node& w1 = AddNode("w1", Role::kWorker, rank1);
  Node& srv = AddNode("s0", Role::kServer, s);
  auto j0 = JoinAsync(w0), j1 = JoinAsync(w1), j2 = JoinAsync(srv);
  Status st = ExpectAbortHeardByAll({&j0, &j1, &j2});
  EXPECT_THAT(st.message(), HasSubstr("two workers asked for rank 1"));
}

TEST_F(SchedulerTest, ServersGetTheRanksTheyAskForAndKeysFollowTheRank) {
  Settings s = JobSettings(1, 3);
  StartScheduler(s);
  // Requested ranks 2, none, 0: whatever the arrival order, the one without
  // a request fills the gap.
  Settings wants_two = s, wants_zero = s;
  wants_two.server_rank = 2;
  wants_zero.server_rank = 0;
  Node& s_a = AddNode("s-a", Role::kServer, wants_two);
  Node& s_b = AddNode("s-b", Role::kServer, s);
  Node& s_c = AddNode("s-c", Role::kServer, wants_zero);
  Node& w = AddNode("w", Role::kWorker, s);
  JoinAll({&s_a, &s_b, &s_c, &w});
  EXPECT_EQ(s_a.client->my_rank(), 2);
  EXPECT_EQ(s_b.client->my_rank(), 1);
  EXPECT_EQ(s_c.client->my_rank(), 0);
  auto servers = w.client->NodesOf(proto::SERVER);
  ASSERT_EQ(servers.size(), 3u);
  EXPECT_EQ(servers[0].address(), "loop://s-c");
  EXPECT_EQ(servers[2].address(), "loop://s-a");
}

TEST_F(SchedulerTest, DuplicateOrOutOfRangeServerRanksAreRefused) {
  Settings s = JobSettings(1, 2);
  s.startup_timeout_ms = 2000;
  StartScheduler(s);
  Settings beyond = s;
  beyond.server_rank = 2;  // == num_servers
  Node& bad = AddNode("bad", Role::kServer, beyond);
  auto j = JoinAsync(bad);
  ASSERT_TRUE(Ready(j, 5000));
  Status st = j.get();
  EXPECT_EQ(st.code(), StatusCode::kAborted);
  EXPECT_THAT(st.message(), HasSubstr("not below the number of servers"));

  Settings one = s;
  one.server_rank = 1;
  Node& s0 = AddNode("s0", Role::kServer, one);
  Node& s1 = AddNode("s1", Role::kServer, one);
  Node& w = AddNode("w", Role::kWorker, s);
  auto j0 = JoinAsync(s0), j1 = JoinAsync(s1), j2 = JoinAsync(w);
  Status run = RunResult(5000);
  EXPECT_EQ(run.code(), StatusCode::kAborted);
  EXPECT_THAT(run.message(), HasSubstr("two servers asked for rank 1"));
  for (auto* f : {&j0, &j1, &j2}) ASSERT_TRUE(Ready(*f, 3000));
}

TEST_F(SchedulerTest, StartupTimeoutWhenAWorkerNeverRegisters) {
  Settings s = JobSettings(2, 1);
  s.startup_timeout_ms = 300;
  StartScheduler(s);
  Settings patient = JobSettings(2, 1);  // the nodes would wait 5 s themselves
  Node& w0 = AddNode("w0", Role::kWorker, patient);
  Node& srv = AddNode("s0", Role::kServer, patient);
  auto j0 = JoinAsync(w0), j1 = JoinAsync(srv);
  const auto start = Clock::now();
  Status st = RunResult(5000);
  const auto took = std::chrono::duration_cast<Millis>(Clock::now() - start).count();
  EXPECT_EQ(st.code(), StatusCode::kDeadlineExceeded) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr("only 1 of 2 workers and 1 of 1 servers"));
  EXPECT_THAT(st.message(), HasSubstr("300 ms"));
  EXPECT_LT(took, 3000);
  // The nodes that did register are told, instead of waiting out their own timeout.
  for (auto* j : {&j0, &j1}) {
    ASSERT_TRUE(Ready(*j, 3000));
    Status js = j->get();
    EXPECT_EQ(js.code(), StatusCode::kAborted) << js.ToString();
    EXPECT_THAT(js.message(), HasSubstr("only 1 of 2 workers"));
  }
}

TEST(SchedulerToken, AJobWithoutATokenIsRefusedUnlessAllowed) {
  Settings s;
  Status st = Scheduler::CheckJobToken(s);
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(st.message(), HasSubstr("SYNCLINE_JOB_TOKEN"));
  EXPECT_THAT(st.message(), HasSubstr("SYNCLINE_ALLOW_NO_TOKEN=1"));
  s.allow_no_token = true;
  EXPECT_TRUE(Scheduler::CheckJobToken(s).ok());
  s.allow_no_token = false;
  s.job_token = "secret";
  EXPECT_TRUE(Scheduler::CheckJobToken(s).ok());
}

TEST_F(SchedulerTest, JoinWithoutASchedulerTimesOut) {
  Settings s = JobSettings(1, 1);
  s.startup_timeout_ms = 200;
  Node& w = AddNode("w0", Role::kWorker, s);
  const auto start = Clock::now();
  Status st = w.client->Join(w.address);
  const auto took = std::chrono::duration_cast<Millis>(Clock::now() - start).count();
  EXPECT_EQ(st.code(), StatusCode::kDeadlineExceeded) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr(kSchedulerAddress));
  EXPECT_GE(took, 190);
  EXPECT_LT(took, 3000);
}

TEST_F(SchedulerTest, DeclareGivesEveryWorkerTheSamePlacement) {
  Settings s = JobSettings(2, 2);
  StartScheduler(s);
  Node& w0 = AddNode("w0", Role::kWorker, s);
  Node& w1 = AddNode("w1", Role::kWorker, s);
  Node& s0 = AddNode("s0", Role::kServer, s);
  Node& s1 = AddNode("s1", Role::kServer, s);
  JoinAll({&w0, &w1, &s0, &s1});
  proto::TensorSpec spec;
  spec.set_name("layer1.weight");
  spec.set_dtype(proto::FLOAT32);
  spec.set_num_elements(3000);
  spec.set_partition_bytes(4096);
  auto d0 = std::async(std::launch::async, [&] { return w0.client->Declare(spec, Deadline::AfterMs(5000)); });
  EXPECT_FALSE(Ready(d0, 100)) << "declared before every worker did";
  auto d1 = std::async(std::launch::async, [&] { return w1.client->Declare(spec, Deadline::AfterMs(5000)); });
  ASSERT_TRUE(Ready(d0, 5000) && Ready(d1, 5000));
  auto r0 = d0.get(), r1 = d1.get();
  ASSERT_TRUE(r0.ok()) << r0.status().ToString();
  ASSERT_TRUE(r1.ok()) << r1.status().ToString();
  EXPECT_EQ(r0->tensor_id(), r1->tensor_id());
  EXPECT_EQ(r0->name(), "layer1.weight");
  ASSERT_EQ(r0->chunks_size(), 3);  // 12000 bytes in 4096-byte chunks
  ASSERT_EQ(r1->chunks_size(), 3);
  std::set<int32_t> server_ids = {s0.client->my_id(), s1.client->my_id()};
  std::set<int32_t> used;
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(r0->chunks(i).key(), r1->chunks(i).key());
    EXPECT_EQ(r0->chunks(i).server_id(), r1->chunks(i).server_id());
    EXPECT_TRUE(server_ids.count(r0->chunks(i).server_id())) << "chunk placed on a non-server";
    used.insert(r0->chunks(i).server_id());
  }
  EXPECT_EQ(used, server_ids) << "three chunks on two servers use both";
}

TEST_F(SchedulerTest, DeclarationsBeyondTheJobsChunkLimitAbortNamingTheTensor) {
  Settings s = JobSettings(1, 1);
  Node& w = StartOneWorkerOneServer(s, SchedulerLimits{/*max_chunks=*/5}).worker;  // and server s0
  proto::TensorSpec spec;
  spec.set_dtype(proto::FLOAT32);
  spec.set_num_elements(3000);  // 3 chunks of 4096 bytes
  spec.set_partition_bytes(4096);
  spec.set_name("a");
  ASSERT_TRUE(w.client->Declare(spec, Deadline::AfterMs(5000)).ok());
  spec.set_name("b");  // 6 chunks in all
  Status st = w.client->Declare(spec, Deadline::AfterMs(5000)).status();
  EXPECT_EQ(st.code(), StatusCode::kAborted) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr("tensor 'b'"));
  EXPECT_THAT(st.message(), HasSubstr("over the limit of 5"));
  EXPECT_EQ(RunResult(5000).code(), StatusCode::kAborted);
}

TEST_F(SchedulerTest, ChunksAboveTheJobsLargestAbortNamingTheTensor) {
  // Servers and workers refuse frames above the job's largest chunk at the
  // socket: a declaration with larger chunks ends the job saying so, rather
  // than leaving its pushes to vanish there.
  Settings s = JobSettings(1, 1);
  Node& w = StartOneWorkerOneServer(s).worker;
  proto::TensorSpec spec;
  spec.set_name("huge");
  spec.set_dtype(proto::FLOAT32);
  spec.set_num_elements(s.LargestChunkBytes());  // four times the largest chunk, in one
  spec.set_partition_bytes(4 * s.LargestChunkBytes());
  Status st = w.client->Declare(spec, Deadline::AfterMs(5000)).status();
  EXPECT_EQ(st.code(), StatusCode::kAborted) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr("tensor 'huge'"));
  EXPECT_THAT(st.message(), HasSubstr("over this job's largest (" + std::to_string(s.LargestChunkBytes())));
  EXPECT_EQ(RunResult(5000).code(), StatusCode::kAborted);
}

TEST_F(SchedulerTest, MismatchedDeclarationAbortsNamingTheTensor) {
  Settings s = JobSettings(2, 1);
  StartScheduler(s);
  Node& w0 = AddNode("w0", Role::kWorker, s);
  Node& w1 = AddNode("w1", Role::kWorker, s);
  Node& srv = AddNode("s0", Role::kServer, s);
  JoinAll({&w0, &w1, &srv});
  proto::TensorSpec a;
  a.set_name("emb");
  a.set_dtype(proto::FLOAT32);
  a.set_num_elements(100);
  a.set_partition_bytes(4096);
  proto::TensorSpec b = a;
  b.set_num_elements(101);
  auto d0 = std::async(std::launch::async, [&] { return w0.client->Declare(a, Deadline::AfterMs(5000)).status(); });
  auto d1 = std::async(std::launch::async, [&] { return w1.client->Declare(b, Deadline::AfterMs(5000)).status(); });
  Status st = RunResult(5000);
  EXPECT_EQ(st.code(), StatusCode::kAborted);
  EXPECT_THAT(st.message(), HasSubstr("mismatched declaration of tensor 'emb'"));
  for (auto* d : {&d0, &d1}) {
    ASSERT_TRUE(Ready(*d, 3000));
    Status ds = d->get();
    EXPECT_EQ(ds.code(), StatusCode::kAborted) << ds.ToString();
    EXPECT_THAT(ds.message(), HasSubstr("'emb'"));
  }
}

}  // namespace
}  // namespace syncline
