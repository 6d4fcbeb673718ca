#include "deploy/launch_plan.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <set>

namespace syncline::deploy {
namespace {

JobShape Shape() {
  JobShape s;
  s.num_workers = 3;
  s.num_servers = 2;
  s.scheduler_port = 12345;
  s.job_token = "cafe";
  return s;
}

// A user's shell: unrelated variables, plus stale BytePS/Syncline settings.
Environment UserEnv() {
  return {{"PATH", "/usr/bin:/bin"},       {"HOME", "/home/u"},        {"DMLC_ROLE", "server"},
          {"DMLC_NUM_WORKER", "8"},         {"DMLC_NUM_SERVER", "8"},   {"DMLC_PS_ROOT_URI", "10.1.1.1"},
          {"DMLC_PS_ROOT_PORT", "1234"},    {"DMLC_WORKER_ID", "7"},    {"SYNCLINE_ROLE", "worker"},
          {"SYNCLINE_WORKER_RANK", "6"},    {"BYTEPS_PARTITION_BYTES", "1024"}};
}

std::string Get(const Environment& env, const std::string& name) {
  auto it = env.find(name);
  return it == env.end() ? "<unset>" : it->second;
}

TEST(LaunchPlanTest, LocalJobStartsSchedulerServersThenWorkers) {
  auto plan = PlanLocalJob(LocalJob{Shape(), "/opt/syncline/bin", {"python", "train.py", "--lr", "0.1"}}, UserEnv());
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_EQ(plan->size(), 6u);
  std::vector<std::string> labels;
  for (const auto& p : *plan) labels.push_back(p.label);
  EXPECT_EQ(labels, (std::vector<std::string>{"scheduler", "server 0", "server 1", "worker 0", "worker 1",
                                              "worker 2"}));
  EXPECT_EQ((*plan)[0].spec.argv, std::vector<std::string>{"/opt/syncline/bin/syncline-scheduler"});
  EXPECT_EQ((*plan)[1].spec.argv, std::vector<std::string>{"/opt/syncline/bin/syncline-server"});
  EXPECT_EQ((*plan)[4].spec.argv, (std::vector<std::string>{"python", "train.py", "--lr", "0.1"}));
  EXPECT_FALSE((*plan)[0].primary);
  EXPECT_FALSE((*plan)[2].primary);
  EXPECT_TRUE((*plan)[3].primary);
  EXPECT_EQ((*plan)[5].role, Role::kWorker);
  EXPECT_EQ((*plan)[5].rank, 2);
}

TEST(LaunchPlanTest, LocalJobEnvironment) {
  auto plan = PlanLocalJob(LocalJob{Shape(), "/b", {"w"}}, UserEnv());
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  const char* roles[] = {"scheduler", "server", "server", "worker", "worker", "worker"};
  for (size_t i = 0; i < plan->size(); ++i) {
    const Environment& env = (*plan)[i].spec.env;
    SCOPED_TRACE((*plan)[i].label);
    EXPECT_EQ(Get(env, "SYNCLINE_ROLE"), roles[i]);
    EXPECT_EQ(Get(env, "SYNCLINE_NUM_WORKERS"), "3");
    EXPECT_EQ(Get(env, "SYNCLINE_NUM_SERVERS"), "2");
    EXPECT_EQ(Get(env, "SYNCLINE_SCHEDULER_HOST"), "127.0.0.1");
    EXPECT_EQ(Get(env, "SYNCLINE_SCHEDULER_PORT"), "12345");
    EXPECT_EQ(Get(env, "SYNCLINE_JOB_TOKEN"), "cafe");
    EXPECT_EQ(Get(env, "SYNCLINE_TRANSPORT"), "<unset>");  // not given: not set
    // Inherited aliases of what pslaunch sets are gone; the rest is inherited.
    for (const char* alias : {"DMLC_ROLE", "DMLC_NUM_WORKER", "DMLC_NUM_SERVER", "DMLC_PS_ROOT_URI",
                              "DMLC_PS_ROOT_PORT", "DMLC_WORKER_ID"})
      EXPECT_EQ(Get(env, alias), "<unset>") << alias;
    EXPECT_EQ(Get(env, "PATH"), "/usr/bin:/bin");
    EXPECT_EQ(Get(env, "BYTEPS_PARTITION_BYTES"), "1024");
    EXPECT_EQ(env.count("SYNCLINE_SERVER_RANK"), (*plan)[i].role == Role::kServer ? 1u : 0u);
    // What the node binaries will read back.
    auto settings = Settings::FromEnvironment(env);
    ASSERT_TRUE(settings.ok()) << settings.status().ToString();
    EXPECT_EQ(settings->num_workers, 3);
    EXPECT_EQ(settings->scheduler_port, 12345);
    EXPECT_EQ(settings->worker_rank, (*plan)[i].role == Role::kWorker ? (*plan)[i].rank : -1);
    EXPECT_EQ(settings->server_rank, (*plan)[i].role == Role::kServer ? (*plan)[i].rank : -1);
    // Every worker of a local job is on this host: local rank = rank, local size = workers.
    EXPECT_EQ(settings->local_rank, (*plan)[i].role == Role::kWorker ? (*plan)[i].rank : 0);
    EXPECT_EQ(settings->local_size, (*plan)[i].role == Role::kWorker ? 3 : 1);
  }
  EXPECT_EQ(Get((*plan)[1].spec.env, "SYNCLINE_WORKER_RANK"), "<unset>");  // the stale "6" is gone
  EXPECT_EQ(Get((*plan)[3].spec.env, "SYNCLINE_WORKER_RANK"), "0");
  EXPECT_EQ(Get((*plan)[5].spec.env, "SYNCLINE_WORKER_RANK"), "2");
}

TEST(LaunchPlanTest, EmulatedHostsSplitTheWorkersIntoContiguousGroupsWithTheirOwnLabelsAndLocalRanks) {
  JobShape shape = Shape();
  shape.num_workers = 5;
  shape.emulated_hosts = 2;
  auto plan = PlanLocalJob(LocalJob{shape, "/b", {"w"}}, UserEnv());
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  std::vector<std::string> seen;
  for (const auto& p : *plan) {
    const Environment& env = p.spec.env;
    if (p.role != Role::kWorker) {
      EXPECT_EQ(Get(env, "SYNCLINE_HOST_LABEL"), "<unset>") << p.label;
      continue;
    }
    auto settings = Settings::FromEnvironment(env);
    ASSERT_TRUE(settings.ok()) << settings.status().ToString();
    seen.push_back(settings->host_label + " " + std::to_string(settings->local_rank) + "/" +
                   std::to_string(settings->local_size));
  }
  EXPECT_EQ(seen, (std::vector<std::string>{"emulated-host-0 0/2", "emulated-host-0 1/2", "emulated-host-1 0/3",
                                            "emulated-host-1 1/3", "emulated-host-1 2/3"}));
  shape.emulated_hosts = 1;  // the default: no label, one host
  auto one = PlanLocalJob(LocalJob{shape, "/b", {"w"}}, UserEnv());
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(Get(one->back().spec.env, "SYNCLINE_HOST_LABEL"), "<unset>");
  EXPECT_EQ(Get(one->back().spec.env, "SYNCLINE_LOCAL_SIZE"), "5");
}

TEST(LaunchPlanTest, TransportAndExtraEnvironment) {
  JobShape s = Shape();
  s.transport = "ipc";
  s.extra_env = {{"SYNCLINE_LOG_LEVEL", "debug"}, {"HOME", "/tmp/h"}, {"EMPTY", ""}};
  auto plan = PlanLocalJob(LocalJob{s, "/b", {"w"}}, UserEnv());
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  for (const auto& p : *plan) {
    EXPECT_EQ(Get(p.spec.env, "SYNCLINE_TRANSPORT"), "ipc");
    EXPECT_EQ(Get(p.spec.env, "SYNCLINE_LOG_LEVEL"), "debug");
    EXPECT_EQ(Get(p.spec.env, "HOME"), "/tmp/h");
    EXPECT_EQ(Get(p.spec.env, "EMPTY"), "");
  }
}

TEST(LaunchPlanTest, ExtraEnvironmentMayNotOverrideWhatPslaunchSets) {
  for (const char* name : {"SYNCLINE_NUM_WORKERS", "DMLC_NUM_WORKER", "SYNCLINE_ROLE", "DMLC_PS_ROOT_PORT",
                           "SYNCLINE_WORKER_RANK", "SYNCLINE_JOB_TOKEN", "SYNCLINE_LOCAL_RANK", "BYTEPS_LOCAL_SIZE"}) {
    JobShape s = Shape();
    s.extra_env = {{name, "1"}};
    auto plan = PlanLocalJob(LocalJob{s, "/b", {"w"}}, {});
    ASSERT_FALSE(plan.ok()) << name;
    EXPECT_EQ(plan.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(plan.status().message().find(name), std::string::npos) << plan.status().message();
  }
}

TEST(LaunchPlanTest, LocalPortsAreRefusedWithTheReason) {
  // A port for every process of a local job would let only one bind it.
  for (const char* name : {"SYNCLINE_PORT", "SYNCLINE_METRICS_PORT"}) {
    JobShape s = Shape();
    s.extra_env = {{name, "9100"}};
    auto plan = PlanLocalJob(LocalJob{s, "/b", {"w"}}, {});
    ASSERT_FALSE(plan.ok()) << name;
    EXPECT_NE(plan.status().message().find("same port"), std::string::npos) << plan.status().message();
  }
  // Inherited from the shell: removed, not passed to every process.
  auto plan = PlanLocalJob(LocalJob{Shape(), "/b", {"w"}}, {{"SYNCLINE_PORT", "7000"}, {"SYNCLINE_METRICS_PORT", "9100"}});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  for (const auto& p : *plan) {
    EXPECT_EQ(Get(p.spec.env, "SYNCLINE_PORT"), "<unset>") << p.label;
    EXPECT_EQ(Get(p.spec.env, "SYNCLINE_METRICS_PORT"), "<unset>") << p.label;
  }
}

TEST(LaunchPlanTest, LocalJobGivesEachProcessItsOwnMetricsPort) {
  JobShape s = Shape();  // 2 servers, 3 workers
  s.metrics_port = 9100;
  auto plan = PlanLocalJob(LocalJob{s, "/b", {"w"}}, {});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  std::vector<std::string> ports;
  for (const auto& p : *plan) ports.push_back(p.label + ":" + Get(p.spec.env, "SYNCLINE_METRICS_PORT"));
  EXPECT_EQ(ports, (std::vector<std::string>{"scheduler:9100", "server 0:9101", "server 1:9102", "worker 0:9103",
                                             "worker 1:9104", "worker 2:9105"}));
  s.metrics_port = 65532;  // 6 ports do not fit
  EXPECT_FALSE(PlanLocalJob(LocalJob{s, "/b", {"w"}}, {}).ok());
}

TEST(LaunchPlanTest, NodeMetricsPortIsThisProcesssOwn) {
  JobShape s = Shape();
  s.metrics_port = 9100;
  auto p = PlanNode(NodeJob{s, Role::kServer, -1, "10.0.0.2", "/b", {}}, {});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(Get(p->spec.env, "SYNCLINE_METRICS_PORT"), "9100");
  // Multi-host: each process has its own host, so an inherited port is kept.
  p = PlanNode(NodeJob{Shape(), Role::kServer, -1, "10.0.0.2", "/b", {}}, {{"SYNCLINE_METRICS_PORT", "9200"}});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(Get(p->spec.env, "SYNCLINE_METRICS_PORT"), "9200");
}

TEST(LaunchPlanTest, LocalJobRejectsBadShapes) {
  JobShape s = Shape();
  EXPECT_FALSE(PlanLocalJob(LocalJob{s, "/b", {}}, {}).ok());  // no command
  s.num_workers = 0;
  EXPECT_FALSE(PlanLocalJob(LocalJob{s, "/b", {"w"}}, {}).ok());
  s = Shape();
  s.num_servers = 0;
  EXPECT_FALSE(PlanLocalJob(LocalJob{s, "/b", {"w"}}, {}).ok());
  s = Shape();
  s.scheduler_port = 70000;
  EXPECT_FALSE(PlanLocalJob(LocalJob{s, "/b", {"w"}}, {}).ok());
  s = Shape();
  s.transport = "rdma";
  EXPECT_FALSE(PlanLocalJob(LocalJob{s, "/b", {"w"}}, {}).ok());
}

TEST(LaunchPlanTest, NodeWorker) {
  NodeJob job;
  job.shape = Shape();
  job.shape.scheduler_host = "10.0.0.1";
  job.shape.job_token = "";
  job.role = Role::kWorker;
  job.rank = 2;
  job.host = "10.0.0.9";
  job.command = {"python", "train.py"};
  Environment parent = UserEnv();
  parent["SYNCLINE_JOB_TOKEN"] = "from-env";
  parent["DMLC_NODE_HOST"] = "10.9.9.9";
  auto p = PlanNode(job, parent);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_TRUE(p->primary);
  EXPECT_EQ(p->label, "worker 2");
  EXPECT_EQ(p->spec.argv, job.command);
  EXPECT_EQ(Get(p->spec.env, "SYNCLINE_ROLE"), "worker");
  EXPECT_EQ(Get(p->spec.env, "SYNCLINE_SCHEDULER_HOST"), "10.0.0.1");
  EXPECT_EQ(Get(p->spec.env, "SYNCLINE_WORKER_RANK"), "2");
  EXPECT_EQ(Get(p->spec.env, "SYNCLINE_HOST"), "10.0.0.9");
  EXPECT_EQ(Get(p->spec.env, "DMLC_NODE_HOST"), "<unset>");
  EXPECT_EQ(Get(p->spec.env, "SYNCLINE_JOB_TOKEN"), "from-env");  // no --token: the environment's
  EXPECT_TRUE(Settings::FromEnvironment(p->spec.env).ok());

  job.shape.job_token = "flag";
  p = PlanNode(job, parent);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(Get(p->spec.env, "SYNCLINE_JOB_TOKEN"), "flag");
}

TEST(LaunchPlanTest, NodeWorkerWithoutRankKeepsAnInheritedOne) {
  NodeJob job;
  job.shape = Shape();
  job.command = {"w"};
  auto p = PlanNode(job, {{"DMLC_WORKER_ID", "1"}});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->label, "worker");
  EXPECT_EQ(Get(p->spec.env, "DMLC_WORKER_ID"), "1");
  EXPECT_EQ(Get(p->spec.env, "SYNCLINE_WORKER_RANK"), "<unset>");
}

// A host of a multi-host job running several workers (the Helm chart's
// processesPerPod, torchrun's --nproc-per-node): contiguous ranks by the
// host's index, local ranks and size, each its own metrics port, and no
// inherited port that all of them would bind.
TEST(LaunchPlanTest, NodeWorkersOfOneHost) {
  NodeJob job;
  job.shape = Shape();
  job.shape.num_workers = 6;
  job.shape.metrics_port = 9100;
  job.host = "10.0.0.9";
  job.command = {"python", "train.py"};
  job.local_workers = 2;
  job.node_rank = 1;
  Environment parent = UserEnv();
  parent["SYNCLINE_PORT"] = "7000";
  parent["BYTEPS_LOCAL_RANK"] = "5";
  auto plan = PlanNodeWorkers(job, parent);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_EQ(plan->size(), 2u);
  for (int i = 0; i < 2; ++i) {
    const PlannedProcess& p = (*plan)[i];
    EXPECT_TRUE(p.primary);
    EXPECT_EQ(p.label, "worker " + std::to_string(2 + i));
    EXPECT_EQ(p.spec.argv, job.command);
    EXPECT_EQ(Get(p.spec.env, "SYNCLINE_WORKER_RANK"), std::to_string(2 + i));
    EXPECT_EQ(Get(p.spec.env, "DMLC_WORKER_ID"), "<unset>");
    EXPECT_EQ(Get(p.spec.env, "SYNCLINE_LOCAL_RANK"), std::to_string(i));
    EXPECT_EQ(Get(p.spec.env, "SYNCLINE_LOCAL_SIZE"), "2");
    EXPECT_EQ(Get(p.spec.env, "BYTEPS_LOCAL_RANK"), "<unset>");
    EXPECT_EQ(Get(p.spec.env, "SYNCLINE_HOST_LABEL"), "<unset>");  // a real host: registration tells it
    EXPECT_EQ(Get(p.spec.env, "SYNCLINE_HOST"), "10.0.0.9");
    EXPECT_EQ(Get(p.spec.env, "SYNCLINE_METRICS_PORT"), std::to_string(9100 + i));
    EXPECT_EQ(Get(p.spec.env, "SYNCLINE_PORT"), "<unset>");
    EXPECT_EQ(Get(p.spec.env, "SYNCLINE_NUM_WORKERS"), "6");
    EXPECT_TRUE(Settings::FromEnvironment(p.spec.env).ok()) << p.label;
  }
  // Without --metrics-port an inherited one is not given to both.
  job.shape.metrics_port = 0;
  parent["SYNCLINE_METRICS_PORT"] = "9100";
  plan = PlanNodeWorkers(job, parent);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  for (const PlannedProcess& p : *plan) EXPECT_EQ(Get(p.spec.env, "SYNCLINE_METRICS_PORT"), "<unset>") << p.label;
  // The last host may hold the last ranks exactly.
  job.node_rank = 2;
  plan = PlanNodeWorkers(job, parent);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->back().label, "worker 5");
}

TEST(LaunchPlanTest, NodeWorkersRefuseRanksPastTheJobWithTheReason) {
  NodeJob job;
  job.shape = Shape();  // 3 workers
  job.command = {"w"};
  job.local_workers = 2;
  auto message = [&job]() {
    auto plan = PlanNodeWorkers(job, {});
    return plan.ok() ? std::string("ok") : plan.status().message();
  };
  EXPECT_NE(message().find("needs --node-rank"), std::string::npos) << message();
  job.node_rank = 1;  // ranks 2..3 of 3
  EXPECT_NE(message().find("gives ranks 2..3, past --workers 3"), std::string::npos) << message();
  job.node_rank = 0;
  job.rank = 1;
  EXPECT_NE(message().find("--rank names one worker"), std::string::npos) << message();
  job.rank = -1;
  job.local_workers = 4;
  EXPECT_NE(message().find("must be in [1, --workers 3]"), std::string::npos) << message();
  job.local_workers = 2;
  job.command.clear();
  EXPECT_NE(message().find("needs the worker command"), std::string::npos) << message();
  job.command = {"w"};
  job.role = Role::kServer;
  EXPECT_NE(message().find("--role worker only"), std::string::npos) << message();
  job.role = Role::kWorker;
  job.shape.metrics_port = 65535;
  EXPECT_NE(message().find("consecutive ports"), std::string::npos) << message();
  job.shape.metrics_port = 0;
  EXPECT_EQ(message(), "ok");
}

TEST(LaunchPlanTest, NodeSchedulerAndServer) {
  NodeJob job;
  job.shape = Shape();
  job.bin_dir = "/b/";
  job.role = Role::kScheduler;
  auto p = PlanNode(job, UserEnv());
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->label, "scheduler");
  EXPECT_EQ(p->spec.argv, std::vector<std::string>{"/b/syncline-scheduler"});
  EXPECT_EQ(Get(p->spec.env, "SYNCLINE_WORKER_RANK"), "<unset>");
  EXPECT_EQ(Get(p->spec.env, "DMLC_WORKER_ID"), "<unset>");
  job.role = Role::kServer;
  p = PlanNode(job, UserEnv());
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->label, "server");
  EXPECT_EQ(Get(p->spec.env, "SYNCLINE_ROLE"), "server");
  EXPECT_EQ(p->spec.argv, std::vector<std::string>{"/b/syncline-server"});
}

TEST(LaunchPlanTest, NodeRejectsBadCombinations) {
  NodeJob job;
  job.shape = Shape();
  job.role = Role::kWorker;
  EXPECT_FALSE(PlanNode(job, {}).ok());  // worker without a command
  job.command = {"w"};
  job.rank = 3;  // == num_workers
  EXPECT_FALSE(PlanNode(job, {}).ok());
  job.rank = -1;
  job.role = Role::kScheduler;
  EXPECT_FALSE(PlanNode(job, {}).ok());  // a command for the scheduler
  job.command.clear();
  job.rank = 0;
  EXPECT_FALSE(PlanNode(job, {}).ok());  // --rank for the scheduler
  job.role = Role::kServer;
  job.rank = 2;  // == num_servers
  EXPECT_FALSE(PlanNode(job, {}).ok());
}

TEST(LaunchPlanTest, ServersGetTheRankTheirLabelSays) {
  // Local: server i is rank i of the job, as its output label says.
  auto plan = PlanLocalJob(LocalJob{Shape(), "/b", {"w"}}, {{"SYNCLINE_SERVER_RANK", "5"}});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  for (const auto& p : *plan) {
    const std::string want = p.role == Role::kServer ? std::to_string(p.rank) : "<unset>";
    EXPECT_EQ(Get(p.spec.env, "SYNCLINE_SERVER_RANK"), want) << p.label;
  }
  EXPECT_EQ((*plan)[2].label, "server 1");
  // Multi-host: --rank for a server.
  auto node = PlanNode(NodeJob{Shape(), Role::kServer, 1, "", "/b", {}}, {});
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  EXPECT_EQ(node->label, "server 1");
  EXPECT_EQ(Get(node->spec.env, "SYNCLINE_SERVER_RANK"), "1");
}

TEST(LaunchPlanTest, ParseHostPort) {
  auto hp = ParseHostPort("node1:9000");
  ASSERT_TRUE(hp.ok());
  EXPECT_EQ(hp->first, "node1");
  EXPECT_EQ(hp->second, 9000);
  hp = ParseHostPort("[fe80::1]:65535");
  ASSERT_TRUE(hp.ok());
  EXPECT_EQ(hp->first, "fe80::1");
  EXPECT_EQ(hp->second, 65535);
  for (const char* bad : {"node1", "node1:", ":9000", "node1:0", "node1:65536", "node1:90x", "fe80::1:9000",
                          "[]:9000", "node1:-1"})
    EXPECT_FALSE(ParseHostPort(bad).ok()) << bad;
}

TEST(LaunchPlanTest, ParseEnvAssignment) {
  auto a = ParseEnvAssignment("K_1=a=b");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->first, "K_1");
  EXPECT_EQ(a->second, "a=b");
  a = ParseEnvAssignment("EMPTY=");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->second, "");
  for (const char* bad : {"NOVALUE", "=v", "1X=v", "A-B=v", "A B=v"}) EXPECT_FALSE(ParseEnvAssignment(bad).ok()) << bad;
}

TEST(LaunchPlanTest, PickFreePortGivesABindablePort) {
  auto port = PickFreePort("127.0.0.1");
  ASSERT_TRUE(port.ok()) << port.status().ToString();
  ASSERT_GT(*port, 0);
  ASSERT_LE(*port, 65535);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(*port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  close(fd);
  EXPECT_FALSE(PickFreePort("no-such-host.invalid").ok());
}

TEST(LaunchPlanTest, JobTokensAreRandomHex) {
  auto a = NewJobToken();
  auto b = NewJobToken();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->size(), 32u);
  EXPECT_EQ(a->find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_NE(*a, *b);
}

TEST(LaunchPlanTest, ExecutableDir) {
  auto dir = ExecutableDir();
  ASSERT_TRUE(dir.ok()) << dir.status().ToString();
  EXPECT_EQ(access((*dir + "/deploy_launch_plan_test").c_str(), X_OK), 0) << *dir;
}

}  // namespace
}  // namespace syncline::deploy
