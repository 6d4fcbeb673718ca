// The fixture of the Scheduler tests: a scheduler and SchedulerClient nodes
// as threads of the test, over the in-process loopback network, with bounded
// waits.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "control/authenticated_endpoint.h"
#include "control/client.h"
#include "scheduler/scheduler.h"
#include "transport/loopback/loopback_network.h"

namespace syncline::scheduler_testing {

using ::testing::HasSubstr;

constexpr char kSchedulerAddress[] = "loop://scheduler";
constexpr int kHeartbeatTimeoutMs = 400;

inline bool Eventually(const std::function<bool()>& condition, int ms = 5000) {
  const auto end = Clock::now() + Millis(ms);
  while (!condition()) {
    if (Clock::now() >= end) return false;
    std::this_thread::sleep_for(Millis(2));
  }
  return true;
}

template <typename T>
bool Ready(std::future<T>& f, int ms) {
  return f.wait_for(Millis(ms)) == std::future_status::ready;
}

// One server or worker: its endpoint and its control-plane client.
struct Node {
  std::string address;
  std::unique_ptr<Endpoint> endpoint;
  std::unique_ptr<SchedulerClient> client;
};

class SchedulerTest : public ::testing::Test {
 protected:
  Settings JobSettings(int workers, int servers) {
    Settings s;
    s.num_workers = workers;
    s.num_servers = servers;
    s.job_token = "right-token";
    s.heartbeat_interval_ms = 20;
    s.heartbeat_timeout_ms = kHeartbeatTimeoutMs;
    s.startup_timeout_ms = 5000;
    s.request_timeout_ms = 5000;
    return s;
  }

  void StartScheduler(const Settings& s, SchedulerLimits limits = {}) {
    Settings sched = s;
    sched.role = Role::kScheduler;
    scheduler_ = std::make_unique<Scheduler>(sched, net_.CreateEndpoint(), limits);
    auto address = scheduler_->Listen(kSchedulerAddress);
    ASSERT_TRUE(address.ok()) << address.status().ToString();
    run_ = std::async(std::launch::async, [this] { return scheduler_->Run(); });
  }

  Node& AddNode(const std::string& name, Role role, Settings s) {
    auto node = std::make_unique<Node>();
    node->address = "loop://" + name;
    KeyRing* keys = nullptr;
    node->endpoint = Authenticated(s.job_token, net_.CreateEndpoint(), &keys);
    s.role = role;
    node->client = std::make_unique<SchedulerClient>(s, role, node->endpoint.get(), kSchedulerAddress, keys);
    SchedulerClient* client = node->client.get();
    auto listening = node->endpoint->Listen(node->address, [client](Message&& m) { client->Handle(m); });
    EXPECT_TRUE(listening.ok()) << listening.status().ToString();
    nodes_.push_back(std::move(node));
    return *nodes_.back();
  }

  // A started scheduler and a joined job of one worker ("w0") and one server ("s0").
  struct SmallJob {
    Node& worker;
    Node& server;
  };
  SmallJob StartOneWorkerOneServer(const Settings& s, SchedulerLimits limits = {}) {
    StartScheduler(s, limits);
    SmallJob job{AddNode("w0", Role::kWorker, s), AddNode("s0", Role::kServer, s)};
    JoinAll({&job.worker, &job.server});
    return job;
  }

  std::future<Status> JoinAsync(Node& n) {
    return std::async(std::launch::async, [&n] { return n.client->Join(n.address); });
  }

  // Joins all `nodes` concurrently and expects every join to succeed.
  void JoinAll(const std::vector<Node*>& nodes) {
    std::vector<std::future<Status>> joins;
    for (Node* n : nodes) joins.push_back(JoinAsync(*n));
    for (size_t i = 0; i < joins.size(); ++i) {
      ASSERT_TRUE(Ready(joins[i], 10000)) << nodes[i]->address << " never joined";
      Status st = joins[i].get();
      ASSERT_TRUE(st.ok()) << nodes[i]->address << ": " << st.ToString();
    }
  }

  // Expects the job to end aborted, and every node of `joins` to hear it
  // (its Join returns kAborted); returns the scheduler's outcome.
  Status ExpectAbortHeardByAll(const std::vector<std::future<Status>*>& joins) {
    Status st = RunResult(5000);
    EXPECT_EQ(st.code(), StatusCode::kAborted) << st.ToString();
    for (auto* j : joins) {
      EXPECT_TRUE(Ready(*j, 3000)) << "a node never heard that the job was aborted";
      if (j->valid() && Ready(*j, 0)) {
        EXPECT_EQ(j->get().code(), StatusCode::kAborted);
      }
    }
    return st;
  }

  // The scheduler's outcome, waiting at most `ms`.
  Status RunResult(int ms = 10000) {
    if (!Ready(run_, ms)) return Internal("Scheduler::Run did not return within " + std::to_string(ms) + " ms");
    return run_.get();
  }

  void TearDown() override {
    if (scheduler_) scheduler_->RequestAbort("test over");
    if (run_.valid()) {
      EXPECT_TRUE(Ready(run_, 10000)) << "Scheduler::Run hung";
    }
    for (auto& n : nodes_) n->endpoint->Close();
    for (auto& n : nodes_) n->client.reset();
    nodes_.clear();
    scheduler_.reset();
  }

  LoopbackNetwork net_;
  std::unique_ptr<Scheduler> scheduler_;
  std::future<Status> run_;
  std::vector<std::unique_ptr<Node>> nodes_;
};

}  // namespace syncline::scheduler_testing
