// The C API end to end: a worker made by syncline_init from environment
// variables joins a real (in-process, TCP) scheduler and server.
#include "proxy/c_api.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <vector>

#include "tests/unit/testing/in_process_job.h"

namespace syncline {
namespace {

TEST(CApi, InitDeclarePushPullShutdown) {
  testing::InProcessJob::Options o;
  o.transport = "tcp";
  o.workers = 1;
  o.servers = 1;
  o.external_workers = 1;
  testing::InProcessJob job(o);
  ASSERT_TRUE(job.Start().ok());
  const std::string address = job.scheduler_address();  // tcp://127.0.0.1:PORT
  const std::string port = address.substr(address.rfind(':') + 1);
  setenv("DMLC_ROLE", "worker", 1);  // BytePS spelling on purpose
  setenv("DMLC_NUM_WORKER", "1", 1);
  setenv("DMLC_NUM_SERVER", "1", 1);
  setenv("DMLC_PS_ROOT_URI", "127.0.0.1", 1);
  setenv("DMLC_PS_ROOT_PORT", port.c_str(), 1);
  setenv("SYNCLINE_JOB_TOKEN", "test-token", 1);
  setenv("BYTEPS_PARTITION_BYTES", "1024", 1);
  setenv("SYNCLINE_SHM", "0", 1);  // as the in-process server (which shares this machine)

  syncline_worker* w = nullptr;
  ASSERT_EQ(0, syncline_init(&w)) << syncline_last_error();
  EXPECT_EQ(0, syncline_rank(w));
  EXPECT_EQ(1, syncline_size(w));
  EXPECT_EQ(0, syncline_local_rank(w));  // no local settings: alone on its host
  EXPECT_EQ(1, syncline_local_size(w));
  EXPECT_EQ(0, syncline_cross_iteration(w));  // off unless SYNCLINE_CROSS_ITERATION says so
  EXPECT_STREQ("bsp", syncline_sync_mode(w));  // unless SYNCLINE_SYNC_MODE says otherwise
  EXPECT_EQ(0, syncline_osp_period(w));  // chosen by the shims
  EXPECT_EQ(nullptr, syncline_sync_mode(nullptr));
  int compressed = -1;
  ASSERT_EQ(0, syncline_would_compress(w, 1, 1 << 20, nullptr, &compressed)) << syncline_last_error();
  EXPECT_EQ(0, compressed);  // the job's compression: none unless SYNCLINE_COMPRESSION says otherwise
  ASSERT_EQ(0, syncline_would_compress(w, 1, 1 << 20, "int8", &compressed)) << syncline_last_error();
  EXPECT_EQ(1, compressed);
  ASSERT_EQ(0, syncline_would_compress(w, 1, 4, "int8", &compressed)) << syncline_last_error();
  EXPECT_EQ(0, compressed);  // below SYNCLINE_MIN_COMPRESS_BYTES
  EXPECT_NE(0, syncline_would_compress(w, 2, 1 << 20, "int8", &compressed));  // int8 takes fp32 only
  EXPECT_NE(0, syncline_would_compress(nullptr, 1, 4, nullptr, &compressed));

  uint32_t id = 0;
  EXPECT_NE(0, syncline_declare(w, "bad", 42, 10, &id));
  EXPECT_NE(std::string(syncline_last_error()).find("dtype"), std::string::npos) << syncline_last_error();

  ASSERT_EQ(0, syncline_declare(w, "x", SYNCLINE_FLOAT64, 1000, &id)) << syncline_last_error();
  std::vector<double> x(1000);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<double>(i);
  syncline_op* op = nullptr;
  ASSERT_EQ(0, syncline_push_pull_async(w, id, x.data(), 0, /*priority=*/0, nullptr, nullptr, &op))
      << syncline_last_error();
  ASSERT_EQ(0, syncline_wait(op, 10000)) << syncline_last_error();
  EXPECT_EQ(1, syncline_poll(op));
  EXPECT_EQ(0, syncline_wait(op, 0)) << "an ended op can be waited on again";
  syncline_op_free(op);
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(x[i], static_cast<double>(i));

  // Into a separate output: the input is only read.
  std::vector<double> sum(x.size(), -1.0);
  ASSERT_EQ(0, syncline_push_pull_to(w, id, x.data(), sum.data(), 0, 0, nullptr, nullptr, &op))
      << syncline_last_error();
  ASSERT_EQ(0, syncline_wait(op, 10000)) << syncline_last_error();
  syncline_op_free(op);
  EXPECT_EQ(sum, x);
  // A framework's stream is for device memory: host memory ignores it.
  std::fill(sum.begin(), sum.end(), -1.0);
  int not_a_stream = 0;
  ASSERT_EQ(0, syncline_push_pull_on_stream(w, id, x.data(), sum.data(), 0, 0, &not_a_stream, nullptr, nullptr, &op))
      << syncline_last_error();
  ASSERT_EQ(0, syncline_wait(op, 10000)) << syncline_last_error();
  syncline_op_free(op);
  EXPECT_EQ(sum, x);
  // Started and waited for in one call: into an output, and in place.
  std::fill(sum.begin(), sum.end(), -1.0);
  ASSERT_EQ(0, syncline_push_pull(w, id, x.data(), sum.data(), 0, 0)) << syncline_last_error();
  EXPECT_EQ(sum, x);
  ASSERT_EQ(0, syncline_push_pull(w, id, sum.data(), sum.data(), 1, 0)) << syncline_last_error();
  EXPECT_EQ(sum, x);
  EXPECT_NE(0, syncline_push_pull(w, 999, x.data(), sum.data(), 0, 0)) << "an undeclared tensor id fails";
  EXPECT_NE(std::string(syncline_last_error()), "");
  EXPECT_NE(0, syncline_push_pull(nullptr, id, x.data(), sum.data(), 0, 0));

  // The done callback, with and without a handle.
  struct Done {
    std::atomic<int> calls{0};
    std::atomic<int> status{-1};
  } done;
  auto on_done = [](void* user, int status, const char*) {
    auto* d = static_cast<Done*>(user);
    d->status = status;
    ++d->calls;
  };
  ASSERT_EQ(0, syncline_push_pull_async(w, id, x.data(), 1, 5, on_done, &done, &op)) << syncline_last_error();
  ASSERT_EQ(0, syncline_wait(op, 10000)) << syncline_last_error();
  syncline_op_free(op);
  for (int i = 0; i < 1000 && done.calls == 0; ++i) usleep(1000);  // the callback may trail Wait a little
  EXPECT_EQ(done.calls, 1);
  EXPECT_EQ(done.status, 0);
  ASSERT_EQ(0, syncline_push_pull_async(w, id, x.data(), 0, 0, on_done, &done, nullptr)) << syncline_last_error();
  for (int i = 0; i < 10000 && done.calls < 2; ++i) usleep(1000);
  EXPECT_EQ(done.calls, 2) << "a callback-only push_pull must end too";

  EXPECT_NE(0, syncline_push_pull_async(w, id, x.data(), 0, 0, nullptr, nullptr, nullptr));
  EXPECT_NE(std::string(syncline_last_error()).find("neither op_out nor done"), std::string::npos);
  EXPECT_NE(0, syncline_push_pull_async(w, 99, x.data(), 0, 0, nullptr, nullptr, &op));
  EXPECT_NE(std::string(syncline_last_error()).find("not declared"), std::string::npos);
  // Steps drive the tuner: a one-worker job tunes alone, and sums stay exact.
  for (int step = 0; step < 20; ++step) {
    ASSERT_EQ(0, syncline_begin_step(w)) << syncline_last_error();
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<double>(i);
    ASSERT_EQ(0, syncline_push_pull_async(w, id, x.data(), 0, 0, nullptr, nullptr, &op)) << syncline_last_error();
    ASSERT_EQ(0, syncline_wait(op, 10000)) << syncline_last_error();
    syncline_op_free(op);
    ASSERT_EQ(x[999], 999.0);
  }
  EXPECT_EQ(0, syncline_trace_span(w, "forward", syncline_now_us(), syncline_now_us()));
  EXPECT_EQ(0, syncline_barrier(w)) << syncline_last_error();
  EXPECT_EQ(0, syncline_shutdown(w)) << syncline_last_error();
  EXPECT_TRUE(job.Finish().ok());
}

}  // namespace
}  // namespace syncline
