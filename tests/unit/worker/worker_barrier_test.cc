// Barriers and mismatched work: a worker's barrier waits for its own
// push_pulls, so a worker waiting at a barrier while the others wait for its
// push ends the job fast, naming the worker and the tensor; matched work with
// barriers in between, even with push_pulls still in flight at the call,
// never trips it.
#include <gtest/gtest.h>

#include <chrono>

#include "tests/unit/testing/in_process_job.h"

namespace syncline {
namespace {

using testing::InProcessJob;
using testing::OnAllWorkers;

InProcessJob::Options ThreeWorkers() {
  InProcessJob::Options o;
  o.workers = 3;
  o.servers = 2;
  o.heartbeat_timeout_ms = 60000;  // only the mismatch detection can end the job in time
  o.request_timeout_ms = 60000;
  return o;
}

TEST(WorkerBarrier, AWorkerAtABarrierWhileTheOthersPushEndsTheJobNamingItAndTheTensor) {
  InProcessJob job(ThreeWorkers());
  ASSERT_TRUE(job.Start().ok());
  for (const Status& st : OnAllWorkers(job, [&](int rank) { return job.worker(rank).Declare("steps", DType::kFloat32, 3000).status(); }))
    ASSERT_TRUE(st.ok()) << st.ToString();
  const auto start = std::chrono::steady_clock::now();
  auto statuses = OnAllWorkers(job, [&](int rank) -> Status {
    Worker& w = job.worker(rank);
    if (rank == 2) return w.Barrier();  // one push_pull short of the others
    SYNCLINE_ASSIGN_OR_RETURN(TensorId id, w.Declare("steps", DType::kFloat32, 3000));
    std::vector<float> x(3000, 1.0f);
    SYNCLINE_ASSIGN_OR_RETURN(OpHandle h, w.PushPull(id, x.data(), false));
    return h.Wait(w.DefaultDeadline());
  });
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(15));
  for (int rank = 0; rank < 3; ++rank) {
    const Status& st = statuses[rank];
    EXPECT_EQ(st.code(), StatusCode::kAborted) << rank << ": " << st.ToString();
    EXPECT_NE(st.message().find("worker 2 waits at a barrier"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("[tensor 'steps'"), std::string::npos) << st.message();
  }
  job.JoinAll();
}

TEST(WorkerBarrier, MatchedWorkWithBarriersInBetweenIsNeverMistakenForAMismatch) {
  InProcessJob::Options o = ThreeWorkers();
  o.heartbeat_interval_ms = 20;  // the servers' grace before they believe a mismatch: 1 s
  InProcessJob job(o);
  ASSERT_TRUE(job.Start().ok());
  auto statuses = OnAllWorkers(job, [&](int rank) -> Status {
    Worker& w = job.worker(rank);
    SYNCLINE_ASSIGN_OR_RETURN(TensorId a, w.Declare("a", DType::kFloat32, 5000));
    SYNCLINE_ASSIGN_OR_RETURN(TensorId b, w.Declare("b", DType::kFloat64, 700));
    std::vector<float> x(5000);
    std::vector<double> y(700);
    for (int step = 0; step < 20; ++step) {
      std::fill(x.begin(), x.end(), float(rank + step));
      std::fill(y.begin(), y.end(), double(rank));
      // Posted and not waited for: the barrier waits for them first.
      SYNCLINE_ASSIGN_OR_RETURN(OpHandle ha, w.PushPull(a, x.data(), false));
      SYNCLINE_ASSIGN_OR_RETURN(OpHandle hb, w.PushPull(b, y.data(), false));
      // Workers reach the barrier at different times: rank 0 late.
      if (rank == 0 && step % 5 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1500));
      SYNCLINE_RETURN_IF_ERROR(w.Barrier());
      if (!ha.Done() || !hb.Done()) return Internal("the barrier returned before this worker's push_pulls");
      SYNCLINE_RETURN_IF_ERROR(ha.Wait(w.DefaultDeadline()));
      SYNCLINE_RETURN_IF_ERROR(hb.Wait(w.DefaultDeadline()));
      if (x[0] != float(3 + 3 * step) || y[0] != 3.0) return Internal("wrong sum at step " + std::to_string(step));
    }
    return Status::Ok();
  });
  for (int rank = 0; rank < 3; ++rank) EXPECT_TRUE(statuses[rank].ok()) << rank << ": " << statuses[rank].ToString();
  EXPECT_TRUE(job.Finish().ok());
}

}  // namespace
}  // namespace syncline
