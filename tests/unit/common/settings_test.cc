// Settings::FromEnvironment: defaults, canonical SYNCLINE_* names, the
// BytePS/ps-lite aliases, precedence, and errors that name the variable.
#include "common/settings.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

namespace syncline {
namespace {

using ::testing::HasSubstr;

Settings MustParse(const Environment& env, std::vector<std::string>* warnings = nullptr) {
  auto s = Settings::FromEnvironment(env, warnings);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? s.value() : Settings{};
}

// Parsing must fail with InvalidArgument and a message containing every `parts`.
void ExpectError(const Environment& env, const std::vector<std::string>& parts) {
  auto s = Settings::FromEnvironment(env);
  ASSERT_FALSE(s.ok()) << "accepted an environment that should be rejected";
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument) << s.status().ToString();
  for (const auto& p : parts) EXPECT_THAT(s.status().message(), HasSubstr(p));
}

TEST(SettingsTest, EmptyEnvironmentGivesDocumentedDefaults) {
  std::vector<std::string> warnings;
  Settings s = MustParse({}, &warnings);
  EXPECT_TRUE(warnings.empty());
  EXPECT_EQ(s.role, Role::kWorker);
  EXPECT_EQ(s.num_workers, 1);
  EXPECT_EQ(s.num_servers, 1);
  EXPECT_EQ(s.scheduler_host, "127.0.0.1");
  EXPECT_EQ(s.scheduler_port, 9000);
  EXPECT_EQ(s.host, "127.0.0.1");
  EXPECT_EQ(s.port, 0);
  EXPECT_EQ(s.worker_rank, -1);
  EXPECT_EQ(s.transport, "tcp");
  EXPECT_EQ(s.job_token, "");
  EXPECT_EQ(s.partition_bytes, 256ull << 10);
  EXPECT_FALSE(s.async);
  EXPECT_FALSE(s.deterministic);
  EXPECT_FALSE(s.cross_iteration);
  EXPECT_EQ(s.local_rank, 0);
  EXPECT_EQ(s.local_size, 1);
  EXPECT_EQ(s.heartbeat_interval_ms, 1000);
  EXPECT_EQ(s.heartbeat_timeout_ms, 10000);
  EXPECT_EQ(s.startup_timeout_ms, 120000);
  EXPECT_EQ(s.request_timeout_ms, 600000);
  EXPECT_EQ(s.server_threads, 2);
  EXPECT_EQ(s.sum_threads, 0);
  EXPECT_EQ(s.scheduling, "priority");
  EXPECT_EQ(s.SchedulingCreditBytes(), 2u << 20) << "8 partitions";
  EXPECT_EQ(s.log_level, "info");
  EXPECT_EQ(s.SchedulerAddress(), "tcp://127.0.0.1:9000");
  EXPECT_TRUE(s.Validate().ok());
  // A default-constructed struct agrees with the parsed defaults.
  Settings d;
  EXPECT_EQ(d.partition_bytes, s.partition_bytes);
  EXPECT_EQ(d.heartbeat_timeout_ms, s.heartbeat_timeout_ms);
}

TEST(SettingsTest, CanonicalNamesSetEveryField) {
  Settings s = MustParse({
      {"SYNCLINE_ROLE", "server"},
      {"SYNCLINE_NUM_WORKERS", "8"},
      {"SYNCLINE_NUM_SERVERS", "3"},
      {"SYNCLINE_SCHEDULER_HOST", "10.0.0.7"},
      {"SYNCLINE_SCHEDULER_PORT", "1234"},
      {"SYNCLINE_HOST", "10.0.0.9"},
      {"SYNCLINE_PORT", "5555"},
      {"SYNCLINE_WORKER_RANK", "7"},
      {"SYNCLINE_TRANSPORT", "ipc"},
      {"SYNCLINE_JOB_TOKEN", "s3cret"},
      {"SYNCLINE_PARTITION_BYTES", "65536"},
      {"SYNCLINE_ASYNC", "yes"},
      {"SYNCLINE_DETERMINISTIC", "on"},
      {"SYNCLINE_CROSS_ITERATION", "1"},
      {"SYNCLINE_HEARTBEAT_INTERVAL_MS", "250"},
      {"SYNCLINE_HEARTBEAT_TIMEOUT_MS", "2000"},
      {"SYNCLINE_STARTUP_TIMEOUT_MS", "3000"},
      {"SYNCLINE_REQUEST_TIMEOUT_MS", "4000"},
      {"SYNCLINE_SERVER_THREADS", "4"},
      {"SYNCLINE_SUM_THREADS", "6"},
      {"SYNCLINE_SCHEDULING", "fifo"},
      {"SYNCLINE_SCHEDULING_CREDIT", "1048576"},
      {"SYNCLINE_LOG_LEVEL", "WARNING"},
  });
  EXPECT_EQ(s.role, Role::kServer);
  EXPECT_EQ(s.num_workers, 8);
  EXPECT_EQ(s.num_servers, 3);
  EXPECT_EQ(s.scheduler_host, "10.0.0.7");
  EXPECT_EQ(s.scheduler_port, 1234);
  EXPECT_EQ(s.host, "10.0.0.9");
  EXPECT_EQ(s.port, 5555);
  EXPECT_EQ(s.worker_rank, 7);
  EXPECT_EQ(s.transport, "ipc");
  EXPECT_EQ(s.job_token, "s3cret");
  EXPECT_EQ(s.partition_bytes, 65536u);
  EXPECT_TRUE(s.async);
  EXPECT_TRUE(s.deterministic);
  EXPECT_TRUE(s.cross_iteration);
  EXPECT_EQ(s.heartbeat_interval_ms, 250);
  EXPECT_EQ(s.heartbeat_timeout_ms, 2000);
  EXPECT_EQ(s.startup_timeout_ms, 3000);
  EXPECT_EQ(s.request_timeout_ms, 4000);
  EXPECT_EQ(s.server_threads, 4);
  EXPECT_EQ(s.sum_threads, 6);
  EXPECT_EQ(s.scheduling, "fifo");
  EXPECT_EQ(s.SchedulingCreditBytes(), 1048576u);
  EXPECT_EQ(s.log_level, "warn");
  EXPECT_EQ(s.SchedulerAddress(), "tcp://10.0.0.7:1234");
}

TEST(SettingsTest, BytePsAndDmlcAliases) {
  std::vector<std::string> warnings;
  Settings s = MustParse(
      {
          {"DMLC_ROLE", "scheduler"},
          {"DMLC_NUM_WORKER", "4"},
          {"DMLC_NUM_SERVER", "2"},
          {"DMLC_PS_ROOT_URI", "192.168.1.5"},
          {"DMLC_PS_ROOT_PORT", "9123"},
          {"DMLC_NODE_HOST", "192.168.1.6"},
          {"DMLC_WORKER_ID", "3"},
          {"BYTEPS_PARTITION_BYTES", "1024000"},
          {"BYTEPS_ENABLE_ASYNC", "1"},
          {"PS_HEARTBEAT_INTERVAL", "2"},
          {"PS_HEARTBEAT_TIMEOUT", "30"},
          {"BYTEPS_SERVER_ENGINE_THREAD", "8"},
          {"BYTEPS_OMP_THREAD_PER_GPU", "3"},
          {"BYTEPS_LOG_LEVEL", "DEBUG"},
          {"BYTEPS_TRACE_ON", "1"},
          {"BYTEPS_TRACE_DIR", "/tmp/traces"},
          {"BYTEPS_TRACE_START_STEP", "3"},
          {"BYTEPS_TRACE_END_STEP", "5"},
      },
      &warnings);
  EXPECT_TRUE(warnings.empty()) << "known aliases must not warn; first: " << warnings.front();
  EXPECT_EQ(s.role, Role::kScheduler);
  EXPECT_EQ(s.num_workers, 4);
  EXPECT_EQ(s.num_servers, 2);
  EXPECT_EQ(s.scheduler_host, "192.168.1.5");
  EXPECT_EQ(s.scheduler_port, 9123);
  EXPECT_EQ(s.host, "192.168.1.6");
  EXPECT_EQ(s.worker_rank, 3);
  EXPECT_EQ(s.partition_bytes, 1024000u);
  EXPECT_TRUE(s.async);
  // ps-lite's heartbeat settings are in seconds.
  EXPECT_EQ(s.heartbeat_interval_ms, 2000);
  EXPECT_EQ(s.heartbeat_timeout_ms, 30000);
  EXPECT_EQ(s.server_threads, 8);
  EXPECT_EQ(s.sum_threads, 3);
  EXPECT_EQ(s.log_level, "debug");
  EXPECT_TRUE(s.trace);
  EXPECT_EQ(s.trace_dir, "/tmp/traces");
  EXPECT_EQ(s.trace_start_step, 3);
  EXPECT_EQ(s.trace_end_step, 5);
}

// SYNCLINE_SCHEDULING_CREDIT is in bytes; BytePS's name keeps BytePS's unit,
// partitions, and its 0 (scheduling off); the canonical name wins.
TEST(SettingsTest, SchedulingCreditInBytesOrInBytePsPartitions) {
  std::vector<std::string> warnings;
  EXPECT_EQ(MustParse({{"SYNCLINE_SCHEDULING_CREDIT", "4096"}}, &warnings).SchedulingCreditBytes(), 4096u);
  EXPECT_EQ(MustParse({{"SYNCLINE_SCHEDULING_CREDIT", "0"}}).SchedulingCreditBytes(), 0u) << "0 = unlimited";
  EXPECT_EQ(MustParse({{"BYTEPS_SCHEDULING_CREDIT", "3"}, {"BYTEPS_PARTITION_BYTES", "4096000"}})
                .SchedulingCreditBytes(),
            3u * 4096000u);
  EXPECT_EQ(MustParse({{"BYTEPS_SCHEDULING_CREDIT", "0"}}).SchedulingCreditBytes(), 0u);
  EXPECT_EQ(MustParse({{"BYTEPS_SCHEDULING_CREDIT", "3"}, {"SYNCLINE_SCHEDULING_CREDIT", "100"}})
                .SchedulingCreditBytes(),
            100u);
  EXPECT_EQ(MustParse({{"SYNCLINE_PARTITION_BYTES", "65536"}}).SchedulingCreditBytes(), 8u * 65536u);
  EXPECT_TRUE(warnings.empty()) << "the credit is enforced now: nothing to warn about";
  EXPECT_FALSE(Settings::FromEnvironment({{"SYNCLINE_SCHEDULING", "lifo"}}).ok());
}

// Servers schedule their replies by default; BytePS's switch turns it off,
// which the window in bytes cannot (it is at least 1).
TEST(SettingsTest, ServerReplyWindowUnlessServerSchedulingIsOff) {
  EXPECT_EQ(MustParse({}).ServerReplyWindowBytes(), 1u << 20);
  EXPECT_EQ(MustParse({{"SYNCLINE_SERVER_REPLY_WINDOW_BYTES", "65536"}}).ServerReplyWindowBytes(), 65536u);
  EXPECT_EQ(MustParse({{"BYTEPS_SERVER_ENABLE_SCHEDULE", "0"}}).ServerReplyWindowBytes(), 0u);
  EXPECT_EQ(MustParse({{"SYNCLINE_SERVER_SCHEDULE", "off"}, {"SYNCLINE_SERVER_REPLY_WINDOW_BYTES", "65536"}})
                .ServerReplyWindowBytes(),
            0u);
  EXPECT_FALSE(Settings::FromEnvironment({{"SYNCLINE_SERVER_REPLY_WINDOW_BYTES", "0"}}).ok());
}

// The send buffer of a connection to another machine: 32 KiB unless set; 0
// gives the kernel's autotuning back.
TEST(SettingsTest, TcpSendBufferIs32KiBByDefaultAndZeroMeansTheKernels) {
  EXPECT_EQ(MustParse({}).tcp_send_buffer_bytes, 32u << 10);
  EXPECT_EQ(MustParse({{"SYNCLINE_TCP_SEND_BUFFER_BYTES", "0"}}).tcp_send_buffer_bytes, 0u);
  EXPECT_EQ(MustParse({{"SYNCLINE_TCP_SEND_BUFFER_BYTES", "65536"}}).tcp_send_buffer_bytes, 65536u);
  EXPECT_FALSE(Settings::FromEnvironment({{"SYNCLINE_TCP_SEND_BUFFER_BYTES", "-1"}}).ok());
  EXPECT_FALSE(Settings::FromEnvironment({{"SYNCLINE_TCP_SEND_BUFFER_BYTES", "2147483648"}}).ok());
}

TEST(SettingsTest, CrossIterationIsOffUnlessSet) {
  EXPECT_FALSE(MustParse({}).cross_iteration);
  EXPECT_FALSE(MustParse({{"SYNCLINE_CROSS_ITERATION", "0"}}).cross_iteration);
  EXPECT_TRUE(MustParse({{"SYNCLINE_CROSS_ITERATION", "true"}}).cross_iteration);
  ExpectError({{"SYNCLINE_CROSS_ITERATION", "sometimes"}}, {"SYNCLINE_CROSS_ITERATION"});
}

TEST(SettingsTest, SyncModeIsOneOfBspOspSspAsyncAndAsyncIsItsAlias) {
  EXPECT_EQ(MustParse({}).sync_mode, "bsp");
  EXPECT_EQ(MustParse({}).osp_period, 0);  // chosen from measurement
  Settings osp = MustParse({{"SYNCLINE_SYNC_MODE", "osp"}, {"SYNCLINE_OSP_PERIOD", "4"}});
  EXPECT_EQ(osp.sync_mode, "osp");
  EXPECT_EQ(osp.osp_period, 4);
  EXPECT_FALSE(osp.async);
  EXPECT_TRUE(MustParse({{"SYNCLINE_SYNC_MODE", "async"}}).async);
  EXPECT_EQ(MustParse({{"BYTEPS_ENABLE_ASYNC", "1"}}).sync_mode, "async");
  EXPECT_EQ(MustParse({{"SYNCLINE_ASYNC", "1"}, {"SYNCLINE_SYNC_MODE", "async"}}).sync_mode, "async");
  ExpectError({{"SYNCLINE_ASYNC", "1"}, {"SYNCLINE_SYNC_MODE", "osp"}}, {"SYNCLINE_ASYNC", "osp", "set one of them"});
  ExpectError({{"SYNCLINE_SYNC_MODE", "stale"}}, {"SYNCLINE_SYNC_MODE", "'stale' is not one of async, bsp, osp, ssp"});
  Settings ssp = MustParse({{"SYNCLINE_SYNC_MODE", "ssp"}});
  EXPECT_EQ(ssp.ssp_staleness, 2);
  EXPECT_FALSE(ssp.async);
  EXPECT_EQ(MustParse({{"SYNCLINE_SYNC_MODE", "ssp"}, {"SYNCLINE_SSP_STALENESS", "0"}}).ssp_staleness, 0);
  ExpectError({{"SYNCLINE_SSP_STALENESS", "65"}}, {"SYNCLINE_SSP_STALENESS", "65"});
  ExpectError({{"SYNCLINE_ASYNC", "1"}, {"SYNCLINE_SYNC_MODE", "ssp"}}, {"SYNCLINE_ASYNC", "ssp", "set one of them"});
  ExpectError({{"SYNCLINE_SYNC_MODE", "ssp"}, {"SYNCLINE_DETERMINISTIC", "1"}},
              {"SYNCLINE_DETERMINISTIC", "ssp mode", "choose one"});
  ExpectError({{"SYNCLINE_OSP_PERIOD", "-1"}}, {"SYNCLINE_OSP_PERIOD"});
}

TEST(SettingsTest, LargestChunkIsThePartitionOrTheTunersLargest) {
  EXPECT_EQ(MustParse({}).LargestChunkBytes(), kLargestTunedPartitionBytes);
  EXPECT_EQ(MustParse({{"SYNCLINE_PARTITION_BYTES", "65536"}}).LargestChunkBytes(), kLargestTunedPartitionBytes);
  EXPECT_EQ(MustParse({{"SYNCLINE_PARTITION_BYTES", "16777216"}}).LargestChunkBytes(), 16777216u);
}

TEST(SettingsTest, TraceStepsMustBeInOrder) {
  auto s = Settings::FromEnvironment({{"SYNCLINE_TRACE_START_STEP", "9"}, {"SYNCLINE_TRACE_END_STEP", "2"}});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("trace end step"), std::string::npos) << s.status().ToString();
}

TEST(SettingsTest, CanonicalNameWinsOverAlias) {
  Settings s = MustParse({
      {"SYNCLINE_NUM_WORKERS", "4"},
      {"DMLC_NUM_WORKER", "8"},
      {"SYNCLINE_HEARTBEAT_INTERVAL_MS", "300"},
      {"PS_HEARTBEAT_INTERVAL", "5"},
      {"SYNCLINE_ROLE", "worker"},
      {"DMLC_ROLE", "server"},
      {"SYNCLINE_ASYNC", "0"},
      {"BYTEPS_ENABLE_ASYNC", "1"},
  });
  EXPECT_EQ(s.num_workers, 4);
  EXPECT_EQ(s.heartbeat_interval_ms, 300);
  EXPECT_EQ(s.role, Role::kWorker);
  EXPECT_FALSE(s.async);
}

TEST(SettingsTest, ShadowedAliasIsNotParsed) {
  // The canonical name decides; a malformed alias beside it is never looked at.
  Settings s = MustParse({{"SYNCLINE_NUM_SERVERS", "2"}, {"DMLC_NUM_SERVER", "lots"}});
  EXPECT_EQ(s.num_servers, 2);
}

TEST(SettingsTest, UnknownSynclineNameIsAnErrorNamingIt) {
  ExpectError({{"SYNCLINE_FOO", "1"}}, {"SYNCLINE_FOO"});
  // A typo of a real name is caught, not silently ignored.
  ExpectError({{"SYNCLINE_NUM_WORKER", "2"}}, {"SYNCLINE_NUM_WORKER"});
}

TEST(SettingsTest, ThePythonPackagesOwnSettingsAreAcceptedByEveryNode) {
  // Read by the package, exported to the whole job by whoever sets them.
  Settings s = MustParse({{"SYNCLINE_NATIVE_DIR", "/opt/syncline"}, {"SYNCLINE_TF_OP", "0"}});
  EXPECT_EQ(s.native_dir, "/opt/syncline");
  EXPECT_FALSE(s.tf_op);
}

TEST(SettingsTest, UnrelatedVariablesAreIgnored) {
  std::vector<std::string> warnings;
  Settings s = MustParse({{"PATH", "/usr/bin"}, {"HOME", "/root"}, {"NCCL_DEBUG", "INFO"}, {"PORT", "8080"}}, &warnings);
  EXPECT_TRUE(warnings.empty());
  EXPECT_EQ(s.num_workers, 1);
}

TEST(SettingsTest, UnknownBytePsNamesWarnInsteadOfFailing) {
  std::vector<std::string> warnings;
  Settings s = MustParse({{"BYTEPS_FORCE_DISTRIBUTED", "1"}, {"DMLC_INTERFACE", "eth0"},
                          {"DMLC_NUM_WORKER", "2"}},
                         &warnings);
  EXPECT_EQ(s.num_workers, 2);
  ASSERT_EQ(warnings.size(), 2u);
  std::string all = warnings[0] + "\n" + warnings[1];
  EXPECT_THAT(all, HasSubstr("BYTEPS_FORCE_DISTRIBUTED"));
  EXPECT_THAT(all, HasSubstr("DMLC_INTERFACE"));
  // Without a warnings sink the call still succeeds.
  EXPECT_TRUE(Settings::FromEnvironment({{"BYTEPS_FORCE_DISTRIBUTED", "1"}}).ok());
}

TEST(SettingsTest, MalformedIntegersNameTheVariable) {
  ExpectError({{"SYNCLINE_NUM_WORKERS", "four"}}, {"SYNCLINE_NUM_WORKERS", "four"});
  ExpectError({{"SYNCLINE_NUM_WORKERS", "4x"}}, {"SYNCLINE_NUM_WORKERS"});
  ExpectError({{"SYNCLINE_NUM_WORKERS", ""}}, {"SYNCLINE_NUM_WORKERS"});
  ExpectError({{"SYNCLINE_NUM_WORKERS", "4.0"}}, {"SYNCLINE_NUM_WORKERS"});
  ExpectError({{"SYNCLINE_NUM_WORKERS", " 4"}}, {"SYNCLINE_NUM_WORKERS"});
  ExpectError({{"SYNCLINE_PARTITION_BYTES", "99999999999999999999999"}}, {"SYNCLINE_PARTITION_BYTES"});
  // Through an alias, the alias is what the user set, so it is what is named.
  ExpectError({{"DMLC_NUM_WORKER", "two"}}, {"DMLC_NUM_WORKER", "two"});
  ExpectError({{"PS_HEARTBEAT_TIMEOUT", "1.5"}}, {"PS_HEARTBEAT_TIMEOUT"});
}

TEST(SettingsTest, MalformedBooleansRolesAndTransportsNameTheVariable) {
  ExpectError({{"SYNCLINE_ASYNC", "maybe"}}, {"SYNCLINE_ASYNC", "maybe"});
  ExpectError({{"BYTEPS_ENABLE_ASYNC", "2"}}, {"BYTEPS_ENABLE_ASYNC"});
  ExpectError({{"SYNCLINE_DETERMINISTIC", "enabled"}}, {"SYNCLINE_DETERMINISTIC"});
  ExpectError({{"SYNCLINE_ROLE", "master"}}, {"SYNCLINE_ROLE", "master"});
  ExpectError({{"DMLC_ROLE", "joint"}}, {"DMLC_ROLE", "joint"});
  ExpectError({{"SYNCLINE_TRANSPORT", "udp"}}, {"SYNCLINE_TRANSPORT", "udp"});
  ExpectError({{"SYNCLINE_LOG_LEVEL", "loud"}}, {"SYNCLINE_LOG_LEVEL", "loud"});
}

TEST(SettingsTest, BooleanSpellings) {
  for (const char* yes : {"1", "true", "yes", "on"}) EXPECT_TRUE(MustParse({{"SYNCLINE_ASYNC", yes}}).async) << yes;
  for (const char* no : {"0", "false", "no", "off", ""})
    EXPECT_FALSE(MustParse({{"SYNCLINE_ASYNC", no}}).async) << no;
}

TEST(SettingsTest, OutOfRangeValuesAreErrorsNamingTheVariable) {
  ExpectError({{"SYNCLINE_NUM_WORKERS", "0"}}, {"SYNCLINE_NUM_WORKERS", "out of range"});
  ExpectError({{"SYNCLINE_NUM_SERVERS", "-1"}}, {"SYNCLINE_NUM_SERVERS", "out of range"});
  ExpectError({{"SYNCLINE_SCHEDULER_PORT", "0"}}, {"SYNCLINE_SCHEDULER_PORT"});
  ExpectError({{"SYNCLINE_SCHEDULER_PORT", "65536"}}, {"SYNCLINE_SCHEDULER_PORT"});
  ExpectError({{"DMLC_PS_ROOT_PORT", "70000"}}, {"DMLC_PS_ROOT_PORT"});
  ExpectError({{"SYNCLINE_PORT", "-5"}}, {"SYNCLINE_PORT"});
  ExpectError({{"SYNCLINE_WORKER_RANK", "-2"}}, {"SYNCLINE_WORKER_RANK"});
  ExpectError({{"SYNCLINE_PARTITION_BYTES", "63"}}, {"SYNCLINE_PARTITION_BYTES"});
  ExpectError({{"SYNCLINE_HEARTBEAT_INTERVAL_MS", "5"}}, {"SYNCLINE_HEARTBEAT_INTERVAL_MS"});
  ExpectError({{"SYNCLINE_SERVER_THREADS", "0"}}, {"SYNCLINE_SERVER_THREADS"});
  ExpectError({{"SYNCLINE_SERVER_THREADS", "257"}}, {"SYNCLINE_SERVER_THREADS"});
  // Alias ranges are the canonical range in the alias's unit (seconds).
  ExpectError({{"PS_HEARTBEAT_INTERVAL", "3601"}}, {"PS_HEARTBEAT_INTERVAL"});
  ExpectError({{"PS_HEARTBEAT_TIMEOUT", "86401"}}, {"PS_HEARTBEAT_TIMEOUT"});
  // Boundaries are accepted.
  EXPECT_EQ(MustParse({{"SYNCLINE_SCHEDULER_PORT", "65535"}}).scheduler_port, 65535);
  EXPECT_EQ(MustParse({{"SYNCLINE_PARTITION_BYTES", "64"}}).partition_bytes, 64u);
  EXPECT_EQ(MustParse({{"SYNCLINE_WORKER_RANK", "-1"}}).worker_rank, -1);
}

TEST(SettingsTest, ScaledAliasCannotGoBelowTheCanonicalMinimum) {
  // SYNCLINE_HEARTBEAT_INTERVAL_MS is documented as >= 10 ms. PS_HEARTBEAT_INTERVAL=0
  // (ps-lite's "heartbeats off") must either be rejected or give a legal interval,
  // never a 0 ms interval that makes every client's heartbeat loop spin.
  auto s = Settings::FromEnvironment({{"PS_HEARTBEAT_INTERVAL", "0"}});
  ASSERT_FALSE(s.ok()) << "accepted as a " << s->heartbeat_interval_ms << " ms interval";
  EXPECT_THAT(s.status().message(), HasSubstr("PS_HEARTBEAT_INTERVAL"));
}

TEST(SettingsTest, WorkerRankMustBeBelowNumberOfWorkers) {
  ExpectError({{"SYNCLINE_NUM_WORKERS", "2"}, {"SYNCLINE_WORKER_RANK", "2"}}, {"worker rank 2", "(2)"});
  ExpectError({{"DMLC_NUM_WORKER", "3"}, {"DMLC_WORKER_ID", "5"}}, {"worker rank 5"});
  EXPECT_EQ(MustParse({{"SYNCLINE_NUM_WORKERS", "2"}, {"SYNCLINE_WORKER_RANK", "1"}}).worker_rank, 1);
}

TEST(SettingsTest, LocalRankMustBeBelowLocalSize) {
  ExpectError({{"SYNCLINE_LOCAL_SIZE", "2"}, {"SYNCLINE_LOCAL_RANK", "2"}}, {"local rank 2", "(2)"});
  ExpectError({{"BYTEPS_LOCAL_RANK", "1"}}, {"local rank 1", "(1)"});
  Settings s = MustParse({{"BYTEPS_LOCAL_SIZE", "4"}, {"BYTEPS_LOCAL_RANK", "3"}});
  EXPECT_EQ(s.local_rank, 3);
  EXPECT_EQ(s.local_size, 4);
  EXPECT_TRUE(s.local_given);
  EXPECT_TRUE(MustParse({{"SYNCLINE_LOCAL_RANK", "0"}}).local_given) << "given, even as the default";
  EXPECT_FALSE(MustParse({}).local_given);
}

TEST(SettingsTest, AHostLabelIsBounded) {
  EXPECT_EQ(MustParse({{"SYNCLINE_HOST_LABEL", "numa1"}}).host_label, "numa1");
  ExpectError({{"SYNCLINE_HOST_LABEL", std::string(300, 'x')}}, {"SYNCLINE_HOST_LABEL is 300 bytes", "at most 256"});
}

TEST(SettingsTest, HeartbeatTimeoutMustExceedInterval) {
  ExpectError({{"SYNCLINE_HEARTBEAT_INTERVAL_MS", "500"}, {"SYNCLINE_HEARTBEAT_TIMEOUT_MS", "500"}},
              {"heartbeat timeout (500 ms)", "interval (500 ms)"});
  ExpectError({{"SYNCLINE_HEARTBEAT_INTERVAL_MS", "2000"}, {"SYNCLINE_HEARTBEAT_TIMEOUT_MS", "1000"}},
              {"heartbeat timeout"});
  // The default timeout (10 s) against an interval given in seconds.
  ExpectError({{"PS_HEARTBEAT_INTERVAL", "10"}}, {"heartbeat timeout"});
  Settings s = MustParse({{"SYNCLINE_HEARTBEAT_INTERVAL_MS", "500"}, {"SYNCLINE_HEARTBEAT_TIMEOUT_MS", "501"}});
  EXPECT_EQ(s.heartbeat_timeout_ms, 501);
}

TEST(SettingsTest, EmptyHostsAreRejected) {
  ExpectError({{"SYNCLINE_SCHEDULER_HOST", ""}}, {"scheduler host"});
  ExpectError({{"DMLC_NODE_HOST", ""}}, {"host is empty"});
}

TEST(SettingsTest, ValidateChecksCrossFieldConstraintsOnAStruct) {
  Settings s;
  EXPECT_TRUE(s.Validate().ok());
  s.num_workers = 3;
  s.worker_rank = 3;
  EXPECT_EQ(s.Validate().code(), StatusCode::kInvalidArgument);
  s.worker_rank = 2;
  EXPECT_TRUE(s.Validate().ok());
  s.heartbeat_timeout_ms = s.heartbeat_interval_ms;
  EXPECT_EQ(s.Validate().code(), StatusCode::kInvalidArgument);
}

TEST(SettingsTest, LogLevelsAreCaseInsensitive) {
  EXPECT_EQ(MustParse({{"SYNCLINE_LOG_LEVEL", "Trace"}}).log_level, "trace");
  EXPECT_EQ(MustParse({{"SYNCLINE_LOG_LEVEL", "off"}}).log_level, "off");
  EXPECT_EQ(MustParse({{"SYNCLINE_LOG_LEVEL", "warning"}}).log_level, "warn");
}

TEST(SettingsTest, RoleNamesRoundTrip) {
  for (Role r : {Role::kScheduler, Role::kServer, Role::kWorker}) {
    auto parsed = ParseRole(RoleName(r));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, r);
  }
  auto bad = ParseRole("Worker");
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("Worker"));
}

TEST(SettingsTest, ProcessEnvironmentReadsTheRealEnvironment) {
  ASSERT_EQ(setenv("SYNCLINE_SETTINGS_TEST_PROBE", "a=b=c", 1), 0);
  Environment env = ProcessEnvironment();
  unsetenv("SYNCLINE_SETTINGS_TEST_PROBE");
  ASSERT_TRUE(env.count("SYNCLINE_SETTINGS_TEST_PROBE"));
  EXPECT_EQ(env["SYNCLINE_SETTINGS_TEST_PROBE"], "a=b=c");  // split at the first '=' only
  // And it is an unknown SYNCLINE_ name, so parsing that environment fails naming it.
  auto s = Settings::FromEnvironment(env);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("SYNCLINE_SETTINGS_TEST_PROBE"));
}

}  // namespace
}  // namespace syncline
