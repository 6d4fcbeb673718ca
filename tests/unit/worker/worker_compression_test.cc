// Compressed tensors through a whole job in one process (issue 32): workers
// push chunks in the tensor's compressed form with error feedback, servers
// sum them and send the compressed sum back, every worker decodes the same
// result; over many rounds the decoded results track the true sums (error
// feedback on both sides keeps what each round lost). Declarations that
// differ, dtypes and modes a compression cannot take, and broadcasts of a
// compressed tensor are refused with the reason.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

#include "tests/unit/testing/in_process_job.h"

namespace syncline {
namespace {

using testing::ExpectAllOk;
using testing::InProcessJob;
using testing::OnAllWorkers;

// With 4 KiB partitions: chunks of 1024 values uncompressed and in fp16 (whose
// 2056-byte chunk of 1024 values does not leave room for a whole 4 KiB more),
// 3072 in int8, 2048 in randomk:0.4, 4096 in topk:0.1, each with a short last
// one; onebit's would hold 16384 (16 partitions), so its feedback test takes
// 1 KiB partitions: chunks of 4096 and 904 values.
constexpr size_t kValues = 5000;

std::vector<float> Gradient(int rank, int round) {
  std::mt19937 rng(uint32_t(rank * 1000 + round));
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> g(kValues);
  for (float& x : g) x = dist(rng);
  return g;
}

// One round of a push_pull of small integers (exact in fp16), checked against
// their sum over `workers`.
Status PushPullSmallIntegersExactly(Worker& w, TensorId id, int rank, int round, int workers) {
  std::vector<float> x(kValues);
  for (size_t i = 0; i < kValues; ++i) x[i] = float((rank * 7 + round * 3 + i) % 13) - 4;
  SYNCLINE_ASSIGN_OR_RETURN(OpHandle h, w.PushPull(id, x.data(), false));
  SYNCLINE_RETURN_IF_ERROR(h.Wait(Deadline::AfterMs(20000)));
  for (size_t i = 0; i < kValues; ++i) {
    float want = 0;
    for (int r = 0; r < workers; ++r) want += float((r * 7 + round * 3 + i) % 13) - 4;
    if (x[i] != want)
      return Internal("value " + std::to_string(i) + " of round " + std::to_string(round) + " is " +
                      std::to_string(x[i]) + ", not " + std::to_string(want));
  }
  return Status::Ok();
}

TEST(WorkerCompression, Fp16CarriesSmallIntegersExactlyBothWays) {
  InProcessJob::Options o;
  o.compression = "fp16";
  InProcessJob job(o);
  ASSERT_TRUE(job.Start().ok());
  ExpectAllOk(OnAllWorkers(job, [&](int rank) -> Status {
    Worker& w = job.worker(rank);
    SYNCLINE_ASSIGN_OR_RETURN(TensorId id, w.Declare("w", DType::kFloat32, kValues));
    // One value would grow compressed (its header): under the job's setting it travels as it is.
    SYNCLINE_ASSIGN_OR_RETURN(TensorId one, w.Declare("one", DType::kFloat32, 1));
    float third = 1.0f / 3;
    SYNCLINE_ASSIGN_OR_RETURN(OpHandle h1, w.PushPull(one, &third, false));
    SYNCLINE_RETURN_IF_ERROR(h1.Wait(Deadline::AfterMs(20000)));
    if (third != 1.0f / 3 + 1.0f / 3 + 1.0f / 3) return Internal("a one-value tensor was compressed");
    for (int round = 0; round < 3; ++round)
      SYNCLINE_RETURN_IF_ERROR(PushPullSmallIntegersExactly(w, id, rank, round, job.num_workers()));
    return Status::Ok();
  }));
  EXPECT_TRUE(job.Finish().ok());
}

// The tuner's partition switch on a compressed tensor, whose chunks follow the
// partition on the wire (fp16 at 4 KiB: 1024 values; at 8 KiB: 3072; at 16
// KiB: 7168; at 1 KiB: 256): every round's sums stay exact, after a return to
// a size used before (and its keys) too.
TEST(WorkerCompression, ARepartitionMidJobKeepsCompressedSumsExact) {
  InProcessJob::Options o;
  o.compression = "fp16";
  InProcessJob job(o);
  ASSERT_TRUE(job.Start().ok());
  const std::map<int, uint64_t> switch_at = {{1, 8192}, {2, 1024}, {3, 16384}, {4, 4096}, {5, 8192}};
  ExpectAllOk(OnAllWorkers(job, [&](int rank) -> Status {
    Worker& w = job.worker(rank);
    SYNCLINE_ASSIGN_OR_RETURN(TensorId id, w.Declare("w", DType::kFloat32, kValues));
    for (int round = 0; round < 7; ++round) {
      if (auto it = switch_at.find(round); it != switch_at.end()) SYNCLINE_RETURN_IF_ERROR(w.Repartition(id, it->second));
      SYNCLINE_RETURN_IF_ERROR(PushPullSmallIntegersExactly(w, id, rank, round, job.num_workers()));
    }
    return Status::Ok();
  }));
  EXPECT_TRUE(job.Finish().ok());
}

// Over `rounds` rounds of random gradients, every worker decodes the same
// averages, and their running total stays within `bound` (per value) of the
// true averages' total: the residuals on workers and servers stay bounded.
void ExpectFeedbackTracksTheTrueSum(const std::string& form, int rounds, float bound, float per_round_error_at_least,
                                    uint64_t partition_bytes = 4096) {
  InProcessJob::Options o;
  o.workers = 2;
  o.compression = form;
  o.partition_bytes = partition_bytes;
  InProcessJob job(o);
  ASSERT_TRUE(job.Start().ok());
  std::vector<std::vector<float>> decoded_total(2, std::vector<float>(kValues, 0.0f));
  std::vector<float> largest_round_error(2, 0.0f);
  ExpectAllOk(OnAllWorkers(job, [&](int rank) -> Status {
    Worker& w = job.worker(rank);
    SYNCLINE_ASSIGN_OR_RETURN(TensorId id, w.Declare("grad", DType::kFloat32, kValues));
    std::vector<double> true_total(kValues, 0.0);
    for (int round = 0; round < rounds; ++round) {
      std::vector<float> x = Gradient(rank, round);
      SYNCLINE_ASSIGN_OR_RETURN(OpHandle h, w.PushPull(id, x.data(), /*average=*/true));
      SYNCLINE_RETURN_IF_ERROR(h.Wait(Deadline::AfterMs(20000)));
      const std::vector<float> a = Gradient(0, round), b = Gradient(1, round);
      for (size_t i = 0; i < kValues; ++i) {
        const float truth = (a[i] + b[i]) / 2;
        largest_round_error[rank] = std::max(largest_round_error[rank], std::abs(x[i] - truth));
        true_total[i] += truth;
        decoded_total[rank][i] += x[i];
      }
    }
    for (size_t i = 0; i < kValues; ++i)
      if (std::abs(decoded_total[rank][i] - true_total[i]) > bound)
        return Internal(form + ": value " + std::to_string(i) + " totals " + std::to_string(decoded_total[rank][i]) +
                        " after " + std::to_string(rounds) + " rounds, the truth " + std::to_string(true_total[i]));
    return Status::Ok();
  }));
  EXPECT_EQ(decoded_total[0], decoded_total[1]) << "every worker decodes the same sums";
  // The form did lose something each round: the bound is error feedback's doing.
  EXPECT_GE(largest_round_error[0], per_round_error_at_least);
  EXPECT_TRUE(job.Finish().ok());
}

TEST(WorkerCompression, Int8WithErrorFeedbackTracksTheTrueSum) { ExpectFeedbackTracksTheTrueSum("int8", 30, 0.05f, 0.001f); }
TEST(WorkerCompression, OnebitWithErrorFeedbackTracksTheTrueSum) { ExpectFeedbackTracksTheTrueSum("onebit", 30, 8.0f, 1.0f, 1024); }
TEST(WorkerCompression, TopkWithErrorFeedbackTracksTheTrueSum) { ExpectFeedbackTracksTheTrueSum("topk:0.1", 30, 8.0f, 1.0f); }
// A random 10% would leave ~4% of the values unsent by the servers in 30
// rounds (0.9^30): 40% makes an unsent value a one in millions event.
TEST(WorkerCompression, RandomkWithErrorFeedbackTracksTheTrueSum) { ExpectFeedbackTracksTheTrueSum("randomk:0.4", 30, 10.0f, 1.0f); }

TEST(WorkerCompression, WorkersThatCompressATensorDifferentlyEndTheJobNamingIt) {
  InProcessJob::Options o;
  o.workers = 2;
  InProcessJob job(o);
  ASSERT_TRUE(job.Start().ok());
  auto statuses = OnAllWorkers(job, [&](int rank) -> Status {
    DeclareOptions options;
    options.compression = rank == 0 ? "int8" : "onebit";
    return job.worker(rank).Declare("fc.weight", DType::kFloat32, kValues, options).status();
  });
  for (const Status& st : statuses) EXPECT_NE(st.message().find("fc.weight"), std::string::npos) << st.message();
  job.JoinAll();
  const std::string why = job.scheduler_status().message();
  EXPECT_NE(why.find("mismatched declaration of tensor 'fc.weight'"), std::string::npos) << why;
  EXPECT_NE(why.find("compressed as int8"), std::string::npos) << why;
  EXPECT_NE(why.find("compressed as onebit"), std::string::npos) << why;
}

TEST(WorkerCompression, WhatACompressionCannotTakeIsRefusedWithTheReason) {
  InProcessJob::Options o;
  o.workers = 1;
  o.compression = "int8";
  o.min_compress_bytes = 1024;
  InProcessJob job(o);
  ASSERT_TRUE(job.Start().ok());
  Worker& w = job.worker(0);
  DeclareOptions onebit;
  onebit.compression = "onebit";
  Result<TensorId> f64 = w.Declare("f64", DType::kFloat64, kValues, onebit);
  ASSERT_FALSE(f64.ok());
  EXPECT_NE(f64.status().message().find("fp64"), std::string::npos) << f64.status().message();
  DeclareOptions dense_topk;
  dense_topk.compression = "topk:0.6";
  Result<TensorId> topk = w.Declare("topk", DType::kFloat32, kValues, dense_topk);
  ASSERT_FALSE(topk.ok());
  EXPECT_NE(topk.status().message().find("below 0.5"), std::string::npos) << topk.status().message();
  DeclareOptions unknown;
  unknown.compression = "gzip";
  EXPECT_FALSE(w.Declare("gzip", DType::kFloat32, kValues, unknown).ok());

  // The job's int8 leaves a float64 tensor and a tensor under the threshold alone: exact.
  for (auto [name, dtype, n] : {std::tuple{"job f64", DType::kFloat64, kValues}, std::tuple{"small", DType::kFloat32, size_t{100}}}) {
    Result<TensorId> id = w.Declare(name, dtype, n);
    ASSERT_TRUE(id.ok()) << id.status().ToString();
    std::vector<uint8_t> bytes(n * DTypeSize(dtype));
    for (size_t i = 0; i < n; ++i) {
      if (dtype == DType::kFloat64) reinterpret_cast<double*>(bytes.data())[i] = 0.1 * double(i);
      else reinterpret_cast<float*>(bytes.data())[i] = 0.1f * float(i);
    }
    const std::vector<uint8_t> before = bytes;
    Result<OpHandle> h = w.PushPull(*id, bytes.data(), false);
    ASSERT_TRUE(h.ok());
    ASSERT_TRUE(h->Wait(Deadline::AfterMs(20000)).ok());
    EXPECT_EQ(bytes, before) << name << " went through compressed";
  }

  // A compressed tensor is not broadcast: the copy would not be exact.
  Result<TensorId> id = w.Declare("big", DType::kFloat32, kValues);
  ASSERT_TRUE(id.ok());
  std::vector<float> x(kValues, 1.0f);
  Status st = w.Broadcast(*id, x.data(), 0);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("compressed (int8)"), std::string::npos) << st.message();
  EXPECT_TRUE(job.Finish().ok());
}

TEST(WorkerCompression, IsRefusedWhereServersKeepRunningValues) {
  InProcessJob::Options o;
  o.workers = 1;
  o.sync_mode = "ssp";
  InProcessJob job(o);
  ASSERT_TRUE(job.Start().ok());
  DeclareOptions int8;
  int8.compression = "int8";
  Result<TensorId> id = job.worker(0).Declare("w", DType::kFloat32, kValues, int8);
  ASSERT_FALSE(id.ok());
  EXPECT_NE(id.status().message().find("whole rounds"), std::string::npos) << id.status().message();
  EXPECT_TRUE(job.Finish().ok());

  Settings s;
  s.compression = "int8";
  s.sync_mode = "ssp";
  EXPECT_NE(s.Validate().message().find("SYNCLINE_COMPRESSION=int8 needs whole rounds"), std::string::npos);
}

}  // namespace
}  // namespace syncline
