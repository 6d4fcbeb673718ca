// NodeRuntime: a worker's and a server's runtime and a Scheduler, as threads
// of the test over the in-process loopback network, join a job, reach each
// other, and end it (FINISH, or ABORT with a reason). Every wait is bounded.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <memory>
#include <string>

#include "node/node_runtime.h"
#include "scheduler/scheduler.h"
#include "transport/loopback/loopback_network.h"
#include "transport/wire.h"

namespace syncline {
namespace {

using ::testing::HasSubstr;

constexpr char kSchedulerAddress[] = "loop://scheduler";

template <typename T>
bool Ready(std::future<T>& f, int ms = 10000) {
  return f.wait_for(Millis(ms)) == std::future_status::ready;
}

// A server or worker of the test: its runtime, whose receiver hands control
// messages to the runtime's client and the first other message to `received`.
struct TestNode {
  TestNode(LoopbackNetwork& net, const Settings& settings, Role role, const std::string& name)
      : address("loop://" + name), runtime(settings, role, net.CreateEndpoint(), metrics, kSchedulerAddress) {
    runtime.AddCommonMetrics();
  }

  Status Listen() {
    auto listening = runtime.Listen(address, [this](Message&& m) {
      if (runtime.client().Handle(m)) return;
      if (!got.exchange(true)) received.set_value(std::move(m));
    });
    return listening.status();
  }

  const std::string address;
  MetricsRegistry metrics;  // before the runtime, which registers in it
  NodeRuntime runtime;
  std::atomic<bool> got{false};
  std::promise<Message> received;
};

class NodeRuntimeTest : public ::testing::Test {
 protected:
  static Settings JobSettings() {
    Settings s;
    s.num_workers = 1;
    s.num_servers = 1;
    s.job_token = "node-token";
    s.heartbeat_interval_ms = 20;
    s.heartbeat_timeout_ms = 2000;
    s.startup_timeout_ms = 5000;
    s.request_timeout_ms = 5000;
    s.shm = false;  // one process: the control tests cover the shared-memory layer
    return s;
  }

  void SetUp() override {
    Settings s = JobSettings();
    s.role = Role::kScheduler;
    scheduler_ = std::make_unique<Scheduler>(s, net_.CreateEndpoint());
    auto address = scheduler_->Listen(kSchedulerAddress);
    ASSERT_TRUE(address.ok()) << address.status().ToString();
    run_ = std::async(std::launch::async, [this] { return scheduler_->Run(); });
  }

  void TearDown() override {
    scheduler_->RequestAbort("test over");
    if (run_.valid()) {
      EXPECT_TRUE(Ready(run_)) << "Scheduler::Run hung";
    }
    worker_.reset();
    server_.reset();
    scheduler_.reset();
  }

  // A worker ("w0") and a server ("s0") that joined the job.
  void JoinWorkerAndServer() {
    Settings s = JobSettings();
    s.role = Role::kWorker;
    worker_ = std::make_unique<TestNode>(net_, s, Role::kWorker, "w0");
    s.role = Role::kServer;
    server_ = std::make_unique<TestNode>(net_, s, Role::kServer, "s0");
    ASSERT_TRUE(worker_->Listen().ok());
    ASSERT_TRUE(server_->Listen().ok());
    // Each Join waits for the address book, which needs both registered.
    auto worker_joined = std::async(std::launch::async, [this] { return worker_->runtime.Join(worker_->address); });
    auto server_joined = std::async(std::launch::async, [this] { return server_->runtime.Join(server_->address); });
    ASSERT_TRUE(Ready(worker_joined) && Ready(server_joined)) << "Join hung";
    Status w = worker_joined.get(), s0 = server_joined.get();
    ASSERT_TRUE(w.ok()) << w.ToString();
    ASSERT_TRUE(s0.ok()) << s0.ToString();
  }

  // The scheduler's outcome, waiting at most `ms`.
  Status RunResult(int ms = 10000) {
    if (!Ready(run_, ms)) return Internal("Scheduler::Run did not return within " + std::to_string(ms) + " ms");
    return run_.get();
  }

  LoopbackNetwork net_;
  std::unique_ptr<Scheduler> scheduler_;
  std::future<Status> run_;
  std::unique_ptr<TestNode> worker_;
  std::unique_ptr<TestNode> server_;
};

TEST_F(NodeRuntimeTest, JoinConnectsThePeersOfTheOtherRole) {
  JoinWorkerAndServer();
  ASSERT_EQ(worker_->runtime.peers().size(), 1u);
  ASSERT_EQ(server_->runtime.peers().size(), 1u);
  EXPECT_EQ(worker_->runtime.peers()[0].id(), server_->runtime.client().my_id());
  EXPECT_EQ(server_->runtime.peers()[0].id(), worker_->runtime.client().my_id());
  EXPECT_NE(worker_->runtime.keys(), nullptr);  // a job with a token
  EXPECT_EQ(worker_->runtime.shm(), nullptr);   // shared memory is off

  // The worker reaches the server through the authenticated stack.
  Message push = MakeMessage(proto::PUSH, worker_->runtime.client().my_id());
  push.header.set_key(7);
  push.header.set_request_id(1);
  push.header.set_dtype(proto::FLOAT32);
  const float value = 1.5f;
  push.payloads.push_back(Buffer::Copy(&value, sizeof(value)));
  push.header.set_byte_length(sizeof(value));
  ASSERT_TRUE(worker_->runtime.endpoint()
                  .Send(server_->runtime.client().my_id(), std::move(push), Deadline::AfterMs(5000))
                  .ok());
  std::future<Message> received = server_->received.get_future();
  ASSERT_TRUE(Ready(received, 5000)) << "the server never received the push";
  const Message m = received.get();
  EXPECT_EQ(m.header.op(), proto::PUSH);
  EXPECT_EQ(m.header.key(), 7u);
  EXPECT_EQ(m.header.sender(), worker_->runtime.client().my_id());

  // The common metrics, with the node's role and rank once it joined.
  const std::string text = worker_->metrics.Render();
  EXPECT_THAT(text, HasSubstr("syncline_node_info{role=\"worker\",rank=\"0\"} 1"));
  EXPECT_THAT(text, HasSubstr("syncline_dropped_messages_total"));
  EXPECT_THAT(server_->metrics.Render(), HasSubstr("syncline_node_info{role=\"server\",rank=\"0\"} 1"));
}

TEST_F(NodeRuntimeTest, FinishEndsTheJob) {
  JoinWorkerAndServer();
  const auto start = Clock::now();
  Status finished = worker_->runtime.Finish();
  ASSERT_TRUE(finished.ok()) << finished.ToString();
  // The flush waits for the FINISH to leave, not for a fixed time.
  EXPECT_LT(Clock::now() - start, NodeRuntime::kFlushDeadline + Millis(500));
  // Every worker finished: the scheduler tells the servers to shut down.
  Status shutdown = server_->runtime.client().WaitForShutdown(Deadline::AfterMs(5000));
  ASSERT_TRUE(shutdown.ok()) << shutdown.ToString();
  ASSERT_TRUE(server_->runtime.Finish().ok());
  Status outcome = RunResult();
  EXPECT_TRUE(outcome.ok()) << outcome.ToString();
}

TEST_F(NodeRuntimeTest, AbortEndsTheJobWithTheReason) {
  JoinWorkerAndServer();
  worker_->runtime.Abort("the test gives up");
  Status outcome = RunResult();
  EXPECT_EQ(outcome.code(), StatusCode::kAborted) << outcome.ToString();
  EXPECT_THAT(outcome.message(), HasSubstr("the test gives up"));
  // The server hears of it too.
  Status server = server_->runtime.client().WaitForShutdown(Deadline::AfterMs(5000));
  EXPECT_THAT(server.message(), HasSubstr("the test gives up"));
}

TEST(NodeRuntimeScheduler, HasNoClientAndNoSharedMemory) {
  LoopbackNetwork net;
  MetricsRegistry metrics;
  Settings s;
  s.job_token = "node-token";
  s.shm = true;
  NodeRuntime with_token(s, Role::kScheduler, net.CreateEndpoint(), metrics);
  EXPECT_NE(with_token.keys(), nullptr);
  EXPECT_EQ(with_token.shm(), nullptr);
  with_token.AddCommonMetrics([] { return uint64_t{3}; });
  const std::string text = metrics.Render();
  EXPECT_THAT(text, HasSubstr("syncline_node_info{role=\"scheduler\",rank=\"-1\"} 1"));

  MetricsRegistry plain_metrics;
  s.job_token.clear();
  s.allow_no_token = true;
  NodeRuntime without_token(s, Role::kScheduler, net.CreateEndpoint(), plain_metrics);
  EXPECT_EQ(without_token.keys(), nullptr);
}

}  // namespace
}  // namespace syncline
