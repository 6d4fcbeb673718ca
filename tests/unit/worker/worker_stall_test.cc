// Workers that did not make the same push_pull calls, none at a barrier or
// finished: each waits for a push another never makes. With a stall timeout
// the job ends soon after it, naming the tensors whose counts differ; a
// worker that is merely slow (no push_pull in flight while it computes) is
// never mistaken for one.
#include <gtest/gtest.h>

#include <chrono>

#include "tests/unit/testing/in_process_job.h"

namespace syncline {
namespace {

using testing::InProcessJob;
using testing::OnAllWorkers;

InProcessJob::Options ThreeWorkersStallingAfterOneSecond() {
  InProcessJob::Options o;
  o.workers = 3;
  o.servers = 2;
  o.heartbeat_timeout_ms = 60000;  // only the stall detection can end the job in time
  o.request_timeout_ms = 60000;
  o.stall_timeout_ms = 1000;
  return o;
}

TEST(WorkerStall, WorkersWaitingOnEachOtherEndTheJobNamingTheTensorsWhoseCallsDiffer) {
  InProcessJob job(ThreeWorkersStallingAfterOneSecond());
  ASSERT_TRUE(job.Start().ok());
  const auto start = std::chrono::steady_clock::now();
  auto statuses = OnAllWorkers(job, [&](int rank) -> Status {
    Worker& w = job.worker(rank);
    SYNCLINE_ASSIGN_OR_RETURN(TensorId a, w.Declare("a", DType::kFloat32, 3000));
    SYNCLINE_ASSIGN_OR_RETURN(TensorId b, w.Declare("b", DType::kFloat32, 500));
    std::vector<float> x(3000, 1.0f), y(500, 1.0f);
    for (int step = 0; step < 3; ++step) {
      SYNCLINE_ASSIGN_OR_RETURN(OpHandle ha, w.PushPull(a, x.data(), false));
      // Worker 2 skips 'b' from step 1 on and goes on with 'a'.
      if (rank == 2 && step > 0) {
        SYNCLINE_RETURN_IF_ERROR(ha.Wait(w.DefaultDeadline()));
        continue;
      }
      SYNCLINE_ASSIGN_OR_RETURN(OpHandle hb, w.PushPull(b, y.data(), false));
      SYNCLINE_RETURN_IF_ERROR(ha.Wait(w.DefaultDeadline()));
      SYNCLINE_RETURN_IF_ERROR(hb.Wait(w.DefaultDeadline()));
    }
    return Status::Ok();
  });
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  for (int rank = 0; rank < 3; ++rank) {
    const Status& st = statuses[rank];
    EXPECT_EQ(st.code(), StatusCode::kAborted) << rank << ": " << st.ToString();
    EXPECT_NE(st.message().find("every worker waits for the others"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("tensor 'a': 2 by workers 0 and 1, 3 by worker 2"), std::string::npos)
        << st.message();
    EXPECT_NE(st.message().find("tensor 'b': 1 by worker 2, 2 by workers 0 and 1"), std::string::npos)
        << st.message();
  }
  job.JoinAll();
}

TEST(WorkerStall, ASlowWorkerWithNothingInFlightIsNeverMistakenForAStall) {
  InProcessJob job(ThreeWorkersStallingAfterOneSecond());
  ASSERT_TRUE(job.Start().ok());
  auto statuses = OnAllWorkers(job, [&](int rank) -> Status {
    Worker& w = job.worker(rank);
    SYNCLINE_ASSIGN_OR_RETURN(TensorId a, w.Declare("a", DType::kFloat32, 3000));
    std::vector<float> x(3000);
    for (int step = 0; step < 3; ++step) {
      // Rank 0 "evaluates" for 2.5 stall timeouts before each step; the
      // others wait for its push that long, stalled, and the job goes on.
      if (rank == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2500));
      std::fill(x.begin(), x.end(), float(rank + step));
      SYNCLINE_ASSIGN_OR_RETURN(OpHandle h, w.PushPull(a, x.data(), false));
      SYNCLINE_RETURN_IF_ERROR(h.Wait(w.DefaultDeadline()));
      if (x[0] != float(3 + 3 * step)) return Internal("wrong sum at step " + std::to_string(step));
    }
    return Status::Ok();
  });
  for (int rank = 0; rank < 3; ++rank) EXPECT_TRUE(statuses[rank].ok()) << rank << ": " << statuses[rank].ToString();
  EXPECT_TRUE(job.Finish().ok());
}

}  // namespace
}  // namespace syncline
