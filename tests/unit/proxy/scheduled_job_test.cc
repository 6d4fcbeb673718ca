// Whole jobs in one process whose workers send through the CreditScheduler:
// no deadlock when workers become ready in opposite orders, per-tensor
// release of urgent tensors, and sums bit-identical to unscheduled sending.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <future>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <unistd.h>

#include "proxy/credit_scheduler.h"
#include "proxy/step_tuner.h"
#include "tests/unit/testing/in_process_job.h"
#include "tests/unit/testing/worker_trace.h"

namespace syncline {
namespace {

using testing::ExpectAllOk;
using testing::InProcessJob;
using testing::OnAllWorkers;

InProcessJob::Options CreditJob(const std::string& transport, uint64_t credit, int workers = 2) {
  InProcessJob::Options o;
  o.transport = transport;
  o.workers = workers;
  o.servers = 2;
  o.partition_bytes = 4096;
  o.request_timeout_ms = 20000;
  o.chunk_scheduler = [credit](int) {
    return std::make_unique<CreditScheduler>(CreditScheduler::Order::kPriority, credit);
  };
  return o;
}

class ScheduledJobTest : public ::testing::TestWithParam<std::string> {};

INSTANTIATE_TEST_SUITE_P(Transports, ScheduledJobTest, ::testing::Values("loopback", "tcp"));

// Worker 0 sends A then B, worker 1 B then A, with room for one chunk in
// flight. Were credit freed by the summed reply, each worker's first chunk
// would wait for the other's, queued behind it: both would hang until the
// request timeout. Freed by the push's acknowledgement, both finish.
TEST_P(ScheduledJobTest, WorkersReadyInOppositeOrdersWithASmallCreditFinish) {
  InProcessJob job(CreditJob(GetParam(), /*credit=*/4096));
  ASSERT_TRUE(job.Start().ok());
  constexpr size_t kElements = 16 * 1024;  // 16 chunks of 4 KiB each
  ExpectAllOk(OnAllWorkers(job, [&](int rank) -> Status {
    Worker& w = job.worker(rank);
    SYNCLINE_ASSIGN_OR_RETURN(TensorId a, w.Declare("a", DType::kFloat32, kElements));
    SYNCLINE_ASSIGN_OR_RETURN(TensorId b, w.Declare("b", DType::kFloat32, kElements));
    for (int round = 0; round < 3; ++round) {
      std::vector<float> va(kElements, 1.0f + rank + round), vb(kElements, 10.0f * (rank + 1) + round);
      std::vector<std::pair<TensorId, float*>> order{{a, va.data()}, {b, vb.data()}};
      if (rank == 1) std::reverse(order.begin(), order.end());
      std::vector<OpHandle> handles;
      for (auto& [id, data] : order) {
        SYNCLINE_ASSIGN_OR_RETURN(OpHandle h, w.PushPull(id, data, false));
        handles.push_back(h);
      }
      for (auto& h : handles) SYNCLINE_RETURN_IF_ERROR(h.Wait(Deadline::AfterMs(15000)));
      for (size_t i = 0; i < kElements; ++i) {
        if (va[i] != 3.0f + 2 * round || vb[i] != 30.0f + 2 * round)
          return Internal("wrong sum at " + std::to_string(i) + ": " + std::to_string(va[i]) + ", " +
                          std::to_string(vb[i]));
      }
    }
    return Status::Ok();
  }));
  EXPECT_TRUE(job.Finish().ok());
}

// The same, over many seeds: 3 workers, 4 tensors of uneven sizes and
// priorities, each worker posting them in its own random order every round
// with room for one chunk in flight. Every round must finish with exact sums.
// (A tcp job takes about half a second to start and stop, so it gets fewer seeds.)
TEST_P(ScheduledJobTest, WorkersPostingInRandomOrdersFinishForEverySeed) {
  constexpr int kWorkers = 3;
  constexpr int kRounds = 2;
  const std::vector<size_t> kElements{1024, 5 * 1024, 3 * 1024 + 7, 8 * 1024};  // 1-8 chunks of 4 KiB
  const uint32_t seeds = GetParam() == "loopback" ? 24 : 4;
  for (uint32_t seed = 1; seed <= seeds; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    InProcessJob job(CreditJob(GetParam(), /*credit=*/4096, kWorkers));
    ASSERT_TRUE(job.Start().ok());
    ExpectAllOk(OnAllWorkers(job, [&](int rank) -> Status {
      Worker& w = job.worker(rank);
      std::vector<TensorId> ids;
      for (size_t t = 0; t < kElements.size(); ++t) {
        SYNCLINE_ASSIGN_OR_RETURN(TensorId id, w.Declare("t" + std::to_string(t), DType::kFloat32, kElements[t]));
        ids.push_back(id);
      }
      std::mt19937 order_rng(seed * 101 + rank);
      for (int round = 0; round < kRounds; ++round) {
        std::vector<std::vector<float>> values;
        for (size_t t = 0; t < kElements.size(); ++t)
          values.emplace_back(kElements[t], static_cast<float>((rank + 1) * (t + 1) + round));
        std::vector<size_t> order(kElements.size());
        for (size_t t = 0; t < order.size(); ++t) order[t] = t;
        std::shuffle(order.begin(), order.end(), order_rng);
        std::vector<OpHandle> handles;
        for (size_t t : order) {
          SYNCLINE_ASSIGN_OR_RETURN(OpHandle h, w.PushPull(ids[t], values[t].data(), false));
          handles.push_back(h);
        }
        for (auto& h : handles) SYNCLINE_RETURN_IF_ERROR(h.Wait(Deadline::AfterMs(15000)));
        for (size_t t = 0; t < kElements.size(); ++t) {
          // sum over ranks r of (r + 1) * (t + 1) + round
          const float expected = static_cast<float>(6 * (t + 1) + kWorkers * round);
          for (size_t i = 0; i < kElements[t]; ++i) {
            if (values[t][i] != expected)
              return Internal("tensor " + std::to_string(t) + " element " + std::to_string(i) + ": " +
                              std::to_string(values[t][i]) + ", expected " + std::to_string(expected));
          }
        }
      }
      return Status::Ok();
    }));
    EXPECT_TRUE(job.Finish().ok());
  }
}

// A large tensor of low priority is posted first, a small urgent one right
// after: the urgent one overtakes the queued chunks, and its own done
// callback fires while the large one is still in flight.
TEST_P(ScheduledJobTest, AnUrgentTensorIsReleasedBeforeTheWholeStepEnds) {
  InProcessJob job(CreditJob(GetParam(), /*credit=*/4096));
  ASSERT_TRUE(job.Start().ok());
  constexpr size_t kLarge = 64 * 1024, kSmall = 1024;  // 64 chunks; 1 chunk
  ExpectAllOk(OnAllWorkers(job, [&](int rank) -> Status {
    Worker& w = job.worker(rank);
    SYNCLINE_ASSIGN_OR_RETURN(TensorId large, w.Declare("late.layer", DType::kFloat32, kLarge));
    SYNCLINE_ASSIGN_OR_RETURN(TensorId small, w.Declare("first.layer", DType::kFloat32, kSmall));
    std::vector<float> vl(kLarge, 1.0f), vs(kSmall, 2.0f);
    std::mutex mu;
    std::vector<std::string> done_order;
    std::promise<bool> large_busy_when_small_done;
    OpHandle hl;
    auto record = [&](const std::string& name) {
      return [&, name](const Status& st) {
        std::lock_guard<std::mutex> lock(mu);
        done_order.push_back(name + (st.ok() ? "" : " failed: " + st.ToString()));
      };
    };
    {
      std::lock_guard<std::mutex> lock(mu);  // the small tensor's callback reads hl
      SYNCLINE_ASSIGN_OR_RETURN(hl, w.PushPull(large, vl.data(), PushPullOptions{false, -10, record("large")}));
    }
    auto small_done = [&, rec = record("small")](const Status& st) {
      rec(st);
      std::lock_guard<std::mutex> lock(mu);
      large_busy_when_small_done.set_value(!hl.Done());
    };
    SYNCLINE_ASSIGN_OR_RETURN(OpHandle hs, w.PushPull(small, vs.data(), PushPullOptions{false, 0, small_done}));
    SYNCLINE_RETURN_IF_ERROR(hs.Wait(Deadline::AfterMs(15000)));
    SYNCLINE_RETURN_IF_ERROR(hl.Wait(Deadline::AfterMs(15000)));
    auto busy = large_busy_when_small_done.get_future();
    if (busy.wait_for(std::chrono::seconds(5)) != std::future_status::ready)
      return Internal("the small tensor's callback never ran");
    if (!busy.get()) return Internal("the large tensor was done before the urgent one was released");
    for (int i = 0; i < 1000; ++i) {  // the large tensor's callback may trail its Wait
      {
        std::lock_guard<std::mutex> lock(mu);
        if (done_order.size() == 2) break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    std::lock_guard<std::mutex> lock(mu);
    if (done_order != std::vector<std::string>{"small", "large"})
      return Internal("callbacks in the wrong order or failed: " + done_order.front());
    if (vl[0] != 2.0f || vl[kLarge - 1] != 2.0f || vs[0] != 4.0f || vs[kSmall - 1] != 4.0f)
      return Internal("wrong sums");
    return Status::Ok();
  }));
  EXPECT_TRUE(job.Finish().ok());
}

// Deterministic mode sums in rank order, so how chunks were scheduled must
// not change one bit of the results: random fractions, uneven tensor sizes,
// random priorities and a credit of three chunks against sending everything
// at once.
TEST(ScheduledJobDeterminism, SumsAreBitIdenticalWithAndWithoutTheProxy) {
  const std::vector<size_t> sizes = {1, 1000, 4097, 30000, 12345};
  auto run = [&](bool scheduled) {
    InProcessJob::Options o = CreditJob("loopback", 3 * 4096, /*workers=*/3);
    o.deterministic = true;
    if (!scheduled) o.chunk_scheduler = nullptr;
    InProcessJob job(o);
    EXPECT_TRUE(job.Start().ok());
    std::vector<std::vector<std::vector<float>>> results(3);
    ExpectAllOk(OnAllWorkers(job, [&](int rank) -> Status {
      Worker& w = job.worker(rank);
      std::mt19937 rng(100 + rank);
      std::uniform_real_distribution<float> value(-1.0f, 1.0f);
      std::vector<TensorId> ids;
      for (size_t t = 0; t < sizes.size(); ++t) {
        SYNCLINE_ASSIGN_OR_RETURN(TensorId id, w.Declare("t" + std::to_string(t), DType::kFloat32, sizes[t]));
        ids.push_back(id);
      }
      for (int round = 0; round < 2; ++round) {
        std::vector<std::vector<float>> data;
        for (size_t n : sizes) {
          data.emplace_back(n);
          for (float& x : data.back()) x = value(rng) / 3.0f;
        }
        std::vector<OpHandle> handles;
        for (size_t t = 0; t < sizes.size(); ++t) {
          SYNCLINE_ASSIGN_OR_RETURN(OpHandle h, w.PushPull(ids[t], data[t].data(),
                                                           PushPullOptions{true, int64_t(rng() % 7), nullptr}));
          handles.push_back(h);
        }
        for (auto& h : handles) SYNCLINE_RETURN_IF_ERROR(h.Wait(Deadline::AfterMs(15000)));
        for (auto& d : data) results[rank].push_back(std::move(d));
      }
      return Status::Ok();
    }));
    EXPECT_TRUE(job.Finish().ok());
    return results;
  };
  auto plain = run(false), scheduled = run(true);
  for (int rank = 0; rank < 3; ++rank) {
    ASSERT_EQ(plain[rank].size(), scheduled[rank].size());
    for (size_t t = 0; t < plain[rank].size(); ++t) {
      ASSERT_EQ(plain[rank][t].size(), scheduled[rank][t].size());
      EXPECT_EQ(0, std::memcmp(plain[rank][t].data(), scheduled[rank][t].data(), plain[rank][t].size() * 4))
          << "rank " << rank << " tensor " << t;
      EXPECT_EQ(0, std::memcmp(plain[0][t].data(), plain[rank][t].data(), plain[rank][t].size() * 4))
          << "workers disagree";
    }
  }
}

// A tuner for tests: a small grid, each point measured on one step, no settling step.
TunerOptions QuickTuner(std::vector<uint64_t> partitions, std::vector<uint64_t> credits) {
  TunerOptions options;
  options.partitions = std::move(partitions);
  options.credits = std::move(credits);
  options.settle_steps = 0;
  options.measure_steps = 1;
  return options;
}

// The online tuner in a job: worker 0 decides from its step times, every
// worker switches credit and partition at the same step (the sequence of
// points is the same on each), it settles within 50 steps, and every sum of
// every step is exact across the switches.
TEST(ScheduledJobTuner, AllWorkersSwitchTogetherAndSumsStayExact) {
  InProcessJob job(CreditJob("loopback", 2 * 4096, /*workers=*/3));
  ASSERT_TRUE(job.Start().ok());
  TunerOptions options = QuickTuner({1024, 4096, 16384}, {1, 2, 4});
  std::vector<std::vector<TunerPoint>> seen(3);
  ExpectAllOk(OnAllWorkers(job, [&](int rank) -> Status {
    Worker& w = job.worker(rank);
    StepTuner tuner(&w, options);
    SYNCLINE_ASSIGN_OR_RETURN(TensorId a, w.Declare("a", DType::kFloat32, 20000));
    SYNCLINE_ASSIGN_OR_RETURN(TensorId b, w.Declare("b", DType::kFloat64, 777));
    int steps = 0, after_settling = 0;
    for (; steps < 60 && after_settling < 3; ++steps) {
      SYNCLINE_RETURN_IF_ERROR(tuner.BeginStep());
      seen[rank].push_back(tuner.current());
      if (tuner.settled()) ++after_settling;
      std::vector<float> va(20000, float(rank + steps));
      std::vector<double> vb(777, rank * 0.5 + steps);
      SYNCLINE_ASSIGN_OR_RETURN(OpHandle ha, w.PushPull(a, va.data(), false));
      SYNCLINE_ASSIGN_OR_RETURN(OpHandle hb, w.PushPull(b, vb.data(), false));
      SYNCLINE_RETURN_IF_ERROR(ha.Wait(Deadline::AfterMs(10000)));
      SYNCLINE_RETURN_IF_ERROR(hb.Wait(Deadline::AfterMs(10000)));
      if (va.front() != 3.0f + 3 * steps || va.back() != 3.0f + 3 * steps || vb[776] != 1.5 + 3 * steps)
        return Internal("wrong sum at step " + std::to_string(steps));
    }
    if (!tuner.settled()) return Internal("not settled after " + std::to_string(steps) + " steps");
    return Status::Ok();
  }));
  EXPECT_EQ(seen[0], seen[1]);
  EXPECT_EQ(seen[0], seen[2]);
  std::set<uint64_t> partitions;
  for (const auto& p : seen[0]) partitions.insert(p.partition_bytes);
  EXPECT_GT(partitions.size(), 1u) << "the tuner never tried another partition";
  EXPECT_TRUE(job.Finish().ok());
}

// Settled, the tuner watches; a drift (here any change at all: drift 0)
// makes every worker search again at the same step, the sums stay exact, and
// each worker counts both searches in its metrics.
TEST(ScheduledJobTuner, ADriftStartsASearchOnEveryWorkerAtTheSameStep) {
  InProcessJob job(CreditJob("loopback", 2 * 4096, /*workers=*/2));
  ASSERT_TRUE(job.Start().ok());
  TunerOptions options = QuickTuner({4096, 16384}, {1, 2});
  options.watch_steps = 2;
  options.drift = 0;  // every window drifts
  options.drift_windows = 1;
  std::vector<std::vector<bool>> settled(2);
  ExpectAllOk(OnAllWorkers(job, [&](int rank) -> Status {
    Worker& w = job.worker(rank);
    StepTuner tuner(&w, options);
    SYNCLINE_ASSIGN_OR_RETURN(TensorId a, w.Declare("a", DType::kFloat32, 10000));
    for (int step = 0; step < 40; ++step) {
      SYNCLINE_RETURN_IF_ERROR(tuner.BeginStep());
      settled[rank].push_back(tuner.settled());
      std::vector<float> va(10000, float(rank + step));
      SYNCLINE_ASSIGN_OR_RETURN(OpHandle h, w.PushPull(a, va.data(), false));
      SYNCLINE_RETURN_IF_ERROR(h.Wait(Deadline::AfterMs(10000)));
      if (va.front() != 1.0f + 2 * step || va.back() != 1.0f + 2 * step)
        return Internal("wrong sum at step " + std::to_string(step));
    }
    return Status::Ok();
  }));
  EXPECT_EQ(settled[0], settled[1]) << "both workers settle and search again at the same steps";
  int searches = 0;
  for (size_t i = 1; i < settled[0].size(); ++i) searches += settled[0][i - 1] && !settled[0][i];
  EXPECT_GE(searches, 1) << "the drift never started a search";
  // Worker 0 counts a search when it begins one, the others when it reaches
  // them: the last may not have reached worker 1 by the end of the loop.
  const std::string counted = "syncline_tuner_searches_total " + std::to_string(1 + searches) + "\n";
  const std::string one_more = "syncline_tuner_searches_total " + std::to_string(2 + searches) + "\n";
  const std::string text0 = job.worker(0).metrics().Render(), text1 = job.worker(1).metrics().Render();
  EXPECT_NE(text1.find(counted), std::string::npos) << text1;
  EXPECT_TRUE(text0.find(counted) != std::string::npos || text0.find(one_more) != std::string::npos) << text0;
  EXPECT_TRUE(job.Finish().ok());
}

// With tracing on, each worker writes at Shutdown a Chrome trace holding, for
// every chunk of every recorded step, its queued, push and sum spans in that
// order, and the compute spans the caller reported; steps outside the range
// leave nothing.
TEST(ScheduledJobTrace, EveryChunkOfTheRecordedStepsHasItsStagesInOrder) {
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("syncline-trace-" + std::to_string(getpid()))).string();
  std::filesystem::remove_all(dir);
  InProcessJob::Options o = CreditJob("loopback", 2 * 4096);
  o.trace_dir = dir;  // steps 0 and 1
  // Workers on hosts of their own: each pushes every chunk itself.
  o.host_label = [](int rank) { return "host-" + std::to_string(rank); };
  InProcessJob job(o);
  ASSERT_TRUE(job.Start().ok());
  constexpr size_t kElements = 3000;  // 3 chunks of 4 KiB
  ExpectAllOk(OnAllWorkers(job, [&](int rank) -> Status {
    Worker& w = job.worker(rank);
    Timeline* trace = w.timeline();
    if (trace == nullptr) return Internal("tracing is on, but the worker has no timeline");
    SYNCLINE_ASSIGN_OR_RETURN(TensorId a, w.Declare("a", DType::kFloat32, kElements));
    SYNCLINE_ASSIGN_OR_RETURN(TensorId b, w.Declare("b", DType::kFloat32, 10));
    std::vector<float> va(kElements, 1.0f), vb(10, 1.0f);
    for (int step = 0; step < 3; ++step) {
      trace->BeginStep();
      const int64_t begin = Timeline::NowUs();
      trace->Span("backward", "compute", "compute", begin, begin + 100);
      SYNCLINE_ASSIGN_OR_RETURN(OpHandle ha, w.PushPull(a, va.data(), PushPullOptions{true, -1, nullptr}));
      SYNCLINE_ASSIGN_OR_RETURN(OpHandle hb, w.PushPull(b, vb.data(), PushPullOptions{true, 0, nullptr}));
      SYNCLINE_RETURN_IF_ERROR(ha.Wait(Deadline::AfterMs(10000)));
      SYNCLINE_RETURN_IF_ERROR(hb.Wait(Deadline::AfterMs(10000)));
    }
    return Status::Ok();
  }));
  ASSERT_TRUE(job.Finish().ok());  // Shutdown writes the traces
  for (int rank = 0; rank < 2; ++rank) {
    SCOPED_TRACE("worker " + std::to_string(rank));
    const std::optional<nlohmann::json> trace = testing::ReadWorkerTrace(dir, rank);
    ASSERT_TRUE(trace) << "no trace file";
    std::map<std::string, std::vector<nlohmann::json>> spans_by_row;
    int compute = 0;
    for (const auto& [row, spans] : testing::SpansByRow(*trace)) {
      for (const auto& e : spans) {
        EXPECT_EQ(e["pid"], rank);
        if (e["cat"] == "compute") ++compute;
        if (e["cat"] == "chunk") spans_by_row[row].push_back(e);
      }
    }
    EXPECT_EQ(compute, 2) << "steps 0 and 1 only";
    ASSERT_EQ(spans_by_row.size(), 4u) << "a #0-#2 and b #0";
    for (const auto& [row, spans] : spans_by_row) {
      ASSERT_EQ(spans.size(), 6u) << row << ": queued, push, sum in each of the two recorded steps";
      for (size_t i = 0; i < spans.size(); ++i) {
        EXPECT_EQ(spans[i]["name"], (std::vector<std::string>{"queued", "push", "sum"})[i % 3]) << row;
        if (i > 0) {
          const int64_t end_before = spans[i - 1]["ts"].get<int64_t>() + spans[i - 1]["dur"].get<int64_t>();
          EXPECT_LE(end_before, spans[i]["ts"].get<int64_t>()) << row << ": stages out of order";
        }
      }
    }
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace syncline
