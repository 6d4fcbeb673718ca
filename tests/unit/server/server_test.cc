// Server over the loopback network, with a real Scheduler and two hand-driven
// "workers" (an endpoint and a SchedulerClient each) that send raw PUSH/PULL
// messages: replies reach the right node, errors come back as ERROR replies,
// strangers are ignored, and the scheduler's shutdown ends Server::Run.
#include "server/server.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <future>
#include <map>
#include <set>
#include <thread>

#include "common/mutex.h"
#include "control/authenticated_endpoint.h"
#include "scheduler/scheduler.h"
#include "transport/loopback/loopback_network.h"
#include "transport/wire.h"

namespace syncline {
namespace {

using ::testing::HasSubstr;

constexpr char kSchedulerAddress[] = "loop://scheduler";
constexpr char kServerAddress[] = "loop://server";

template <typename T>
bool Ready(std::future<T>& f, int ms) {
  return f.wait_for(Millis(ms)) == std::future_status::ready;
}

// A worker played by the test: control messages go to its client, data
// replies are kept for the test to wait on.
struct FakeWorker {
  std::string address;
  std::unique_ptr<Endpoint> endpoint;
  std::unique_ptr<SchedulerClient> client;
  Mutex mu;
  CondVar cv;
  std::vector<Message> replies GUARDED_BY(mu);

  void Keep(Message&& m) {
    MutexLock lock(mu);
    replies.push_back(std::move(m));
    cv.NotifyAll();
  }
  bool WaitForReplies(size_t n, int ms = 5000) {
    MutexLock lock(mu);
    return cv.WaitUntil(mu, Deadline::AfterMs(ms), [&]() REQUIRES(mu) { return replies.size() >= n; });
  }
  Message Reply(size_t i) {
    MutexLock lock(mu);
    return replies.at(i);
  }
  size_t NumReplies() {
    MutexLock lock(mu);
    return replies.size();
  }
};

Message PushOf(uint64_t key, uint64_t round, int32_t sender, const std::vector<float>& v, uint64_t request_id) {
  Message m = MakeMessage(proto::PUSH, sender);
  m.header.set_key(key);
  m.header.set_round(round);
  m.header.set_dtype(proto::FLOAT32);
  m.header.set_flags(proto::FLAG_PULL_AFTER_PUSH);
  m.header.set_request_id(request_id);
  m.payloads.push_back(Buffer::Copy(v.data(), v.size() * sizeof(float)));
  m.header.set_byte_length(v.size() * sizeof(float));
  return m;
}

std::vector<float> Floats(const Message& m) {
  if (m.payloads.size() != 1) return {};
  std::vector<float> out(m.payloads[0].size() / sizeof(float));
  std::memcpy(out.data(), m.payloads[0].data(), m.payloads[0].size());
  return out;
}

class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    settings_.num_workers = 2;
    settings_.num_servers = 1;
    settings_.job_token = "t";
    settings_.heartbeat_interval_ms = 20;
    settings_.heartbeat_timeout_ms = 1000;
    settings_.startup_timeout_ms = 5000;
    settings_.request_timeout_ms = 5000;
    settings_.server_threads = 2;
    settings_.sum_threads = 1;
    settings_.server_reply_window_bytes = reply_window_bytes_;

    scheduler_ = std::make_unique<Scheduler>(settings_, net_.CreateEndpoint());
    ASSERT_TRUE(scheduler_->Listen(kSchedulerAddress).ok());
    scheduler_run_ = std::async(std::launch::async, [this] { return scheduler_->Run(); });
    server_ = std::make_unique<Server>(settings_, net_.CreateEndpoint(), kServerAddress, kSchedulerAddress);
    server_run_ = std::async(std::launch::async, [this] { return server_->Run(); });

    std::vector<std::future<Status>> joins;
    for (int i = 0; i < 2; ++i) {
      auto w = std::make_unique<FakeWorker>();
      w->address = "loop://worker-" + std::to_string(i);
      KeyRing* keys = nullptr;
      w->endpoint = Authenticated(settings_.job_token, net_.CreateEndpoint(), &keys);
      Settings ws = settings_;
      ws.worker_rank = i;
      // Workers on hosts of their own: each pushes for itself (no local reduce).
      ws.host_label = "host-" + std::to_string(i);
      w->client = std::make_unique<SchedulerClient>(ws, Role::kWorker, w->endpoint.get(), kSchedulerAddress, keys);
      FakeWorker* raw = w.get();
      ASSERT_TRUE(w->endpoint
                      ->Listen(w->address,
                               [raw](Message&& m) {
                                 if (raw->client->Handle(m)) return;
                                 raw->Keep(std::move(m));
                               })
                      .ok());
      joins.push_back(std::async(std::launch::async, [raw] { return raw->client->Join(raw->address); }));
      workers_.push_back(std::move(w));
    }
    for (auto& j : joins) {
      ASSERT_TRUE(Ready(j, 10000));
      Status st = j.get();
      ASSERT_TRUE(st.ok()) << st.ToString();
    }
    auto servers = workers_[0]->client->NodesOf(proto::SERVER);
    ASSERT_EQ(servers.size(), 1u);
    server_id_ = servers[0].id();
    EXPECT_EQ(servers[0].address(), kServerAddress);
    for (auto& w : workers_) ASSERT_TRUE(w->endpoint->Connect(server_id_, kServerAddress).ok());
    // The server takes requests only for keys of declared tensors: the tests'
    // keys are those of tensors "k<n>" both workers declare.
    for (uint64_t n : {1, 7, 9}) DeclareKey(n, 1 + (n == 7));
    DeclareKey(42, 3);
    for (uint64_t n = 1000; n < 1064; ++n) DeclareKey(n, 256);
  }

  // Declares tensor "k<n>" of `floats` elements on both workers; Key(n) is then its one chunk's key.
  void DeclareKey(uint64_t n, uint64_t floats) {
    proto::TensorSpec spec;
    spec.set_name("k" + std::to_string(n));
    spec.set_dtype(proto::FLOAT32);
    spec.set_num_elements(floats);
    spec.set_partition_bytes(1 << 20);
    std::vector<std::future<Result<proto::DeclareReply>>> replies;
    for (auto& w : workers_)
      replies.push_back(std::async(std::launch::async, [&w, spec] { return w->client->Declare(spec, Deadline::AfterMs(5000)); }));
    for (auto& r : replies) {
      auto reply = r.get();
      ASSERT_TRUE(reply.ok()) << reply.status().ToString();
      ASSERT_EQ(reply->chunks_size(), 1);
      keys_[n] = reply->chunks(0).key();
    }
  }
  uint64_t Key(uint64_t n) { return keys_.at(n); }
  uint64_t NameOf(uint64_t key) {
    for (const auto& [n, k] : keys_)
      if (k == key) return n;
    return 0;
  }

  void TearDown() override {
    if (scheduler_) scheduler_->RequestAbort("test over");
    if (server_) server_->RequestStop("test over");
    if (scheduler_run_.valid()) {
      EXPECT_TRUE(Ready(scheduler_run_, 10000)) << "scheduler hung";
    }
    if (server_run_.valid()) {
      EXPECT_TRUE(Ready(server_run_, 10000)) << "server hung";
    }
    for (auto& w : workers_) w->endpoint->Close();
    workers_.clear();
    server_.reset();
    scheduler_.reset();
  }

  Status Send(int rank, Message m) {
    return workers_[rank]->endpoint->Send(server_id_, std::move(m), Deadline::AfterMs(2000));
  }
  int32_t id(int rank) { return workers_[rank]->client->my_id(); }
  // Worker `rank` says `bytes` of the server's sums arrived.
  Status Acknowledge(int rank, uint64_t bytes) {
    Message ack = MakeMessage(proto::REPLY_ACK, id(rank));
    ack.header.mutable_reply_ack()->set_bytes(bytes);
    return Send(rank, std::move(ack));
  }

  Settings settings_;
  uint64_t reply_window_bytes_ = Settings{}.server_reply_window_bytes;  // a fixture may narrow it
  LoopbackNetwork net_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<Server> server_;
  std::future<Status> scheduler_run_, server_run_;
  std::vector<std::unique_ptr<FakeWorker>> workers_;
  int32_t server_id_ = -1;
  std::map<uint64_t, uint64_t> keys_;  // n -> the key of tensor "k<n>"
};

TEST_F(ServerTest, SumsPushesAndRepliesToEachWorkerThenShutsDownCleanly) {
  for (uint64_t round = 0; round < 3; ++round) {
    ASSERT_TRUE(Send(0, PushOf(Key(42), round, id(0), {1, 2, 3}, 100 + round)).ok());
    ASSERT_TRUE(Send(1, PushOf(Key(42), round, id(1), {10, 20, float(round)}, 200 + round)).ok());
    for (int r = 0; r < 2; ++r) {
      ASSERT_TRUE(workers_[r]->WaitForReplies(round + 1)) << "worker " << r << " round " << round;
      Message reply = workers_[r]->Reply(round);
      EXPECT_EQ(reply.header.op(), proto::PULL_REPLY);
      EXPECT_EQ(reply.header.sender(), server_id_) << "replies carry the server's node id";
      EXPECT_EQ(reply.header.key(), Key(42));
      EXPECT_EQ(reply.header.round(), round);
      EXPECT_EQ(reply.header.request_id(), (r == 0 ? 100u : 200u) + round);
      EXPECT_EQ(Floats(reply), (std::vector<float>{11, 22, 3.0f + round}));
    }
  }
  EXPECT_EQ(server_->key_store().num_keys(), 1u) << "only the key pushed to is held";

  for (auto& w : workers_) ASSERT_TRUE(w->client->Finish().ok());
  ASSERT_TRUE(Ready(server_run_, 5000)) << "the server did not end on the scheduler's shutdown";
  Status server_status = server_run_.get();
  EXPECT_TRUE(server_status.ok()) << server_status.ToString();
  ASSERT_TRUE(Ready(scheduler_run_, 5000));
  Status scheduler_status = scheduler_run_.get();
  EXPECT_TRUE(scheduler_status.ok()) << scheduler_status.ToString();
}

TEST_F(ServerTest, SameHostWorkersWithoutSharedMemoryGetLargeSumsOverTheirSocket) {
  // The server runs with shared memory on, these workers on the same host
  // without it (their endpoints are not ShmEndpoints, and they register so):
  // the server must not hand them references into its segments, which they
  // could not read, but the payload itself, whatever its size.
  for (auto& w : workers_) {
    for (const proto::NodeInfo& node : w->client->NodesOf(proto::SERVER)) EXPECT_TRUE(node.shm());
    for (const proto::NodeInfo& node : w->client->NodesOf(proto::WORKER)) EXPECT_FALSE(node.shm());
  }
  constexpr uint64_t kFloats = 16384;  // 64 KiB: above the size that takes shared memory
  DeclareKey(5, kFloats);
  std::vector<float> a(kFloats), b(kFloats), sum(kFloats);
  for (uint64_t i = 0; i < kFloats; ++i) {
    a[i] = static_cast<float>(i % 1000);
    b[i] = static_cast<float>(3 * i % 7);
    sum[i] = a[i] + b[i];
  }
  ASSERT_TRUE(Send(0, PushOf(Key(5), 0, id(0), a, 1)).ok());
  ASSERT_TRUE(Send(1, PushOf(Key(5), 0, id(1), b, 2)).ok());
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(workers_[r]->WaitForReplies(1)) << "worker " << r << " got no sum";
    Message reply = workers_[r]->Reply(0);
    EXPECT_EQ(reply.header.op(), proto::PULL_REPLY);
    EXPECT_FALSE(reply.header.has_shm());
    EXPECT_TRUE(Floats(reply) == sum) << "worker " << r;
  }
}

TEST_F(ServerTest, BadPushGetsAnErrorReplyAndTheKeyKeepsWorking) {
  ASSERT_TRUE(Send(0, PushOf(Key(7), 0, id(0), {1, 2}, 1)).ok());
  ASSERT_TRUE(Send(1, PushOf(Key(7), 0, id(1), {1, 2, 3}, 2)).ok());  // wrong size
  ASSERT_TRUE(workers_[1]->WaitForReplies(1));
  Message err = workers_[1]->Reply(0);
  EXPECT_EQ(err.header.op(), proto::ERROR);
  EXPECT_EQ(err.header.request_id(), 2u);
  EXPECT_EQ(err.header.sender(), server_id_);
  EXPECT_THAT(err.header.error().message(), HasSubstr("push of 12 bytes to a key of 8 bytes"));
  ASSERT_TRUE(Send(1, PushOf(Key(7), 0, id(1), {5, 5}, 3)).ok());
  ASSERT_TRUE(workers_[0]->WaitForReplies(1));
  ASSERT_TRUE(workers_[1]->WaitForReplies(2));
  EXPECT_EQ(Floats(workers_[0]->Reply(0)), (std::vector<float>{6, 7}));
  EXPECT_EQ(Floats(workers_[1]->Reply(1)), (std::vector<float>{6, 7}));
}

TEST_F(ServerTest, TrafficFromStrangersIsIgnored) {
  // An endpoint that never joined the job sends data to the server.
  auto stranger = net_.CreateEndpoint();
  std::atomic<int> got{0};
  ASSERT_TRUE(stranger->Listen("loop://stranger", [&](Message&&) { ++got; }).ok());
  ASSERT_TRUE(stranger->Connect(1, kServerAddress).ok());
  ASSERT_TRUE(stranger->Send(1, PushOf(Key(9), 0, 999, {1}, 1), Deadline::AfterMs(1000)).ok());
  // A worker impersonated by a wrong sender id is not a worker either.
  ASSERT_TRUE(Send(0, PushOf(Key(9), 0, 12345, {1}, 2)).ok());
  // Then the job goes on normally.
  ASSERT_TRUE(Send(0, PushOf(Key(9), 0, id(0), {1}, 3)).ok());
  ASSERT_TRUE(Send(1, PushOf(Key(9), 0, id(1), {2}, 4)).ok());
  ASSERT_TRUE(workers_[0]->WaitForReplies(1));
  ASSERT_TRUE(workers_[1]->WaitForReplies(1));
  EXPECT_EQ(Floats(workers_[0]->Reply(0)), (std::vector<float>{3})) << "a stranger's push was counted";
  std::this_thread::sleep_for(Millis(50));
  EXPECT_EQ(got.load(), 0);
  EXPECT_EQ(workers_[0]->NumReplies(), 1u);
  stranger->Close();
}

TEST_F(ServerTest, ForgedPushesInAWorkersNameAreDroppedAndTheSumsStayExact) {
  // A process that never joined pushes into key 9 as worker 0: unsigned,
  // signed with a key of its own, and as a replay of worker 0's real push.
  auto forger = net_.CreateEndpoint();
  ASSERT_TRUE(forger->Listen("loop://forger", [](Message&&) {}).ok());
  ASSERT_TRUE(forger->Connect(server_id_, kServerAddress).ok());
  ASSERT_TRUE(forger->Send(server_id_, PushOf(Key(9), 0, id(0), {100}, 1), Deadline::AfterMs(1000)).ok());
  KeyRing own;
  own.SetPeerKey(server_id_, RandomKey());
  Message signed_forgery = PushOf(Key(9), 0, id(0), {1000}, 2);
  ASSERT_TRUE(own.Sign(server_id_, &signed_forgery.header).ok());
  ASSERT_TRUE(forger->Send(server_id_, std::move(signed_forgery), Deadline::AfterMs(1000)).ok());
  auto* worker0 = dynamic_cast<AuthenticatedEndpoint*>(workers_[0]->endpoint.get());
  ASSERT_NE(worker0, nullptr);
  Message real = PushOf(Key(9), 0, id(0), {1}, 3);
  ASSERT_TRUE(worker0->keys().Sign(server_id_, &real.header).ok());
  ASSERT_TRUE(forger->Send(server_id_, real, Deadline::AfterMs(1000)).ok());  // the first copy counts
  ASSERT_TRUE(forger->Send(server_id_, real, Deadline::AfterMs(1000)).ok());  // its replay does not
  ASSERT_TRUE(Send(1, PushOf(Key(9), 0, id(1), {2}, 4)).ok());
  ASSERT_TRUE(workers_[1]->WaitForReplies(1));
  EXPECT_EQ(Floats(workers_[1]->Reply(0)), (std::vector<float>{3})) << "a forged push was summed";
  // Round 1 goes on normally from both workers.
  ASSERT_TRUE(Send(0, PushOf(Key(9), 1, id(0), {5}, 5)).ok());
  ASSERT_TRUE(Send(1, PushOf(Key(9), 1, id(1), {6}, 6)).ok());
  ASSERT_TRUE(workers_[1]->WaitForReplies(2));
  EXPECT_EQ(Floats(workers_[1]->Reply(1)), (std::vector<float>{11}));
  // Dropped, and counted where an operator sees it.
  EXPECT_THAT(server_->metrics().Render(), HasSubstr("syncline_dropped_messages_total{reason=\"unauthenticated\"} 3"));
  forger->Close();
}

TEST_F(ServerTest, RequestsForKeysNoDeclaredTensorHasAreRefusedAndHoldNothing) {
  uint64_t undeclared = 1;
  while (NameOf(undeclared) != 0) ++undeclared;
  ASSERT_TRUE(Send(0, PushOf(undeclared, 0, id(0), std::vector<float>(1024, 1.0f), 1)).ok());
  Message pull = MakeMessage(proto::PULL, id(1));
  pull.header.set_key(undeclared + 1000000);
  pull.header.set_dtype(proto::FLOAT32);
  pull.header.set_request_id(2);
  ASSERT_TRUE(Send(1, std::move(pull)).ok());
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(workers_[r]->WaitForReplies(1));
    Message err = workers_[r]->Reply(0);
    EXPECT_EQ(err.header.op(), proto::ERROR);
    EXPECT_THAT(err.header.error().message(), HasSubstr("not placed on this server"));
  }
  EXPECT_EQ(server_->key_store().num_keys(), 0u);
  // A declared key at another size than declared is refused as well.
  ASSERT_TRUE(Send(0, PushOf(Key(42), 0, id(0), {1, 2}, 3)).ok());
  ASSERT_TRUE(workers_[0]->WaitForReplies(2));
  EXPECT_THAT(workers_[0]->Reply(1).header.error().message(), HasSubstr("push of 8 bytes to a key of 12 bytes"));
}

TEST_F(ServerTest, ManyKeysConcurrentlyFromBothWorkers) {
  constexpr int kKeys = 64;
  auto pusher = [&](int rank) {
    return std::async(std::launch::async, [this, rank] {
      for (int k = 0; k < kKeys; ++k) {
        std::vector<float> v(256, static_cast<float>(rank + 1) * (k + 1));
        Status st = Send(rank, PushOf(Key(1000 + k), 0, id(rank), v, k));
        if (!st.ok()) return st;
      }
      return Status::Ok();
    });
  };
  auto p0 = pusher(0), p1 = pusher(1);
  ASSERT_TRUE(p0.get().ok());
  ASSERT_TRUE(p1.get().ok());
  for (int r = 0; r < 2; ++r) ASSERT_TRUE(workers_[r]->WaitForReplies(kKeys, 10000));
  for (int i = 0; i < kKeys; ++i) {
    Message m = workers_[0]->Reply(i);
    ASSERT_EQ(m.header.op(), proto::PULL_REPLY);
    const int k = static_cast<int>(NameOf(m.header.key())) - 1000;
    auto v = Floats(m);
    ASSERT_EQ(v.size(), 256u);
    EXPECT_EQ(v[0], 3.0f * (k + 1));
    EXPECT_EQ(v[255], 3.0f * (k + 1));
  }
  EXPECT_EQ(server_->key_store().num_keys(), static_cast<size_t>(kKeys));
}

// A server whose reply window per worker holds two of the 1 KiB sums below.
class ScheduledRepliesTest : public ServerTest {
 protected:
  ScheduledRepliesTest() { reply_window_bytes_ = 2048; }
};

TEST_F(ScheduledRepliesTest, AnUrgentSumOvertakesBulkSumsWaitingForTheWindow) {
  // Eight bulk sums complete, then an urgent one; no worker acknowledges yet.
  std::vector<float> v(256, 1.0f);
  const ReplyScheduler& replies = server_->reply_scheduler();
  auto wait_queued = [&](size_t n) {
    const Deadline deadline = Deadline::AfterMs(10000);
    while (replies.load().queued_replies < n && !deadline.Expired()) std::this_thread::sleep_for(Millis(1));
    return replies.load().queued_replies;
  };
  auto push_both = [&](int k, int64_t priority) {
    for (int rank = 0; rank < 2; ++rank) {
      Message push = PushOf(Key(1000 + k), 0, id(rank), v, k);
      push.header.set_priority(priority);
      ASSERT_TRUE(Send(rank, std::move(push)).ok());
    }
  };
  for (int k = 0; k < 8; ++k) push_both(k, 0);
  ASSERT_EQ(wait_queued(12), 12u) << "two bulk sums per worker left, six wait";
  push_both(8, 100);
  for (int r = 0; r < 2; ++r) ASSERT_TRUE(workers_[r]->WaitForReplies(2));
  wait_queued(14);
  ASSERT_EQ(replies.load().queued_replies, 14u) << "7 sums per worker wait beyond its window";
  EXPECT_EQ(replies.load().bytes_in_flight, 4u * 1024);
  EXPECT_EQ(workers_[0]->NumReplies(), 2u) << "nothing beyond the window left";
  for (int i = 0; i < 2; ++i)
    EXPECT_TRUE(workers_[0]->Reply(i).header.flags() & proto::FLAG_ACK_REPLY) << "a windowed sum asks for its ack";

  // Room for one more: the urgent sum comes next, though it completed last.
  ASSERT_TRUE(Acknowledge(0, 1024).ok());
  ASSERT_TRUE(workers_[0]->WaitForReplies(3));
  EXPECT_EQ(workers_[0]->Reply(2).header.key(), Key(1008));
  EXPECT_EQ(workers_[0]->Reply(2).header.priority(), 100);
  EXPECT_EQ(Floats(workers_[0]->Reply(2)), std::vector<float>(256, 2.0f));

  // Worker 1's window is its own: still two sums; each acknowledgement of
  // two lets two more through.
  EXPECT_EQ(workers_[1]->NumReplies(), 2u);
  for (size_t got = 2; got < 9; got = std::min<size_t>(got + 2, 9)) {
    ASSERT_TRUE(Acknowledge(1, 2048).ok());
    ASSERT_TRUE(workers_[1]->WaitForReplies(std::min<size_t>(got + 2, 9))) << got;
  }
  std::set<uint64_t> keys;
  for (int i = 0; i < 9; ++i) keys.insert(workers_[1]->Reply(i).header.key());
  EXPECT_EQ(keys.size(), 9u) << "every sum once";
  EXPECT_EQ(workers_[1]->Reply(2).header.key(), Key(1008)) << "the urgent sum first of those that waited";
}

TEST_F(ScheduledRepliesTest, AcknowledgementsFromStrangersOrBeyondWhatWasSentChangeNothing) {
  std::vector<float> v(256, 1.0f);
  for (int k = 0; k < 4; ++k)
    for (int rank = 0; rank < 2; ++rank) ASSERT_TRUE(Send(rank, PushOf(Key(1000 + k), 0, id(rank), v, k)).ok());
  ASSERT_TRUE(workers_[0]->WaitForReplies(2));
  // An acknowledgement from a node that is not a worker of the job is ignored.
  auto stranger = net_.CreateEndpoint();
  ASSERT_TRUE(stranger->Listen("loop://stranger", [](Message&&) {}).ok());
  ASSERT_TRUE(stranger->Connect(server_id_, kServerAddress).ok());
  Message forged = MakeMessage(proto::REPLY_ACK, id(0));
  forged.header.mutable_reply_ack()->set_bytes(1024);
  ASSERT_TRUE(stranger->Send(server_id_, std::move(forged), Deadline::AfterMs(2000)).ok());
  // Worker 1 acknowledges far more than it got: its window is not widened.
  ASSERT_TRUE(Acknowledge(1, 1 << 30).ok());
  ASSERT_TRUE(workers_[1]->WaitForReplies(4));
  EXPECT_EQ(workers_[0]->NumReplies(), 2u) << "worker 0 acknowledged nothing";
  // Worker 0's genuine acknowledgement releases the rest.
  ASSERT_TRUE(Acknowledge(0, 2048).ok());
  EXPECT_TRUE(workers_[0]->WaitForReplies(4));
  stranger->Close();
}

TEST_F(ServerTest, RequestStopAbortsTheJob) {
  // A first round trip proves the server has joined (its replies need its id).
  ASSERT_TRUE(Send(0, PushOf(Key(1), 0, id(0), {1}, 1)).ok());
  ASSERT_TRUE(Send(1, PushOf(Key(1), 0, id(1), {1}, 2)).ok());
  ASSERT_TRUE(workers_[0]->WaitForReplies(1));
  server_->RequestStop("server drained by operator");
  ASSERT_TRUE(Ready(server_run_, 5000));
  Status st = server_run_.get();
  EXPECT_EQ(st.code(), StatusCode::kAborted);
  EXPECT_THAT(st.message(), HasSubstr("server drained by operator"));
  ASSERT_TRUE(Ready(scheduler_run_, 5000));
  EXPECT_THAT(scheduler_run_.get().message(), HasSubstr("server drained by operator"));
}

}  // namespace
}  // namespace syncline
