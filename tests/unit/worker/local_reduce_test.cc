// Local reduce (worker/local_reduce.h) in whole in-process jobs whose workers
// are split into emulated hosts (SYNCLINE_HOST_LABEL): exact sums and
// averages for every dtype with 2, 3 and 4 workers on a host and several hosts
// at once, over chunk counts that do not divide among a host's workers; one
// push per host per chunk, where flat jobs (and async and ssp ones) push one
// per worker; deterministic
// sums bit-identical from run to run; a separate output; a broadcast; a
// worker of a host that finishes early ending the job, named; a server's
// refusal of a pusher's chunk reaching its host's other workers; traces showing
// every chunk's local stages.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <latch>
#include <map>
#include <numeric>
#include <random>
#include <sstream>

#include "tests/unit/testing/dtype_values.h"
#include "tests/unit/testing/in_process_job.h"
#include "tests/unit/testing/worker_trace.h"

namespace syncline {
namespace {

using testing::InProcessJob;
using testing::Load;
using testing::Store;
using testing::OnAllWorkers;

// Workers per host, e.g. {3, 2}: ranks 0-2 on host 0, ranks 3-4 on host 1.
using Layout = std::vector<int>;

int HostOf(const Layout& layout, int rank) {
  for (int h = 0, first = 0; h < static_cast<int>(layout.size()); first += layout[h++])
    if (rank < first + layout[h]) return h;
  return -1;
}

InProcessJob::Options JobOf(const Layout& layout) {
  InProcessJob::Options o;
  o.workers = std::accumulate(layout.begin(), layout.end(), 0);
  o.servers = 2;
  o.partition_bytes = 256;
  o.host_label = [layout](int rank) { return "host-" + std::to_string(HostOf(layout, rank)); };
  return o;
}

// Value `i` of worker `rank`'s tensor: small integers, exact in every dtype
// and in any order of summation.
double ValueOf(int rank, size_t i) { return double((rank + 1) * ((i % 5) + 1)); }

// A counter of `worker`'s metrics (0 if absent).
double Metric(Worker& worker, const std::string& name) {
  std::istringstream text(worker.metrics().Render());
  for (std::string line; std::getline(text, line);)
    if (line.rfind(name + " ", 0) == 0) return std::stod(line.substr(name.size() + 1));
  return 0;
}

class LocalReduceLayouts : public ::testing::TestWithParam<Layout> {};

TEST_P(LocalReduceLayouts, SumsAndAveragesAreExactForEveryDTypeAndOneCopyPerHostIsPushed) {
  const Layout layout = GetParam();
  InProcessJob job(JobOf(layout));
  ASSERT_TRUE(job.Start().ok());
  const int n = job.num_workers();
  // 7 chunks of 256 bytes (the last one short) of 4-byte types, 13 of 8-byte, 4 of 2-byte.
  constexpr size_t kElements = 430;
  const std::vector<DType> dtypes = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16};
  constexpr int kRounds = 3;
  auto statuses = OnAllWorkers(job, [&](int rank) -> Status {
    Worker& w = job.worker(rank);
    if (w.local_group().local_size != layout[HostOf(layout, rank)])
      return Internal("local size " + std::to_string(w.local_group().local_size));
    for (DType dtype : dtypes) {
      SYNCLINE_ASSIGN_OR_RETURN(TensorId id, w.Declare(std::string("t-") + DTypeName(dtype), dtype, kElements));
      std::vector<uint8_t> data(kElements * DTypeSize(dtype));
      for (int round = 0; round < kRounds; ++round) {
        const bool average = round == 1;
        for (size_t i = 0; i < kElements; ++i) Store(dtype, data.data(), i, ValueOf(rank, i) + round);
        SYNCLINE_ASSIGN_OR_RETURN(OpHandle h, w.PushPull(id, data.data(), average));
        SYNCLINE_RETURN_IF_ERROR(h.Wait(w.DefaultDeadline()));
        for (size_t i = 0; i < kElements; ++i) {
          double sum = 0;
          for (int r = 0; r < n; ++r) sum += ValueOf(r, i) + round;
          double want = average ? sum / n : sum;
          if (average) Store(dtype, &want, 0, want), want = Load(dtype, &want, 0);  // rounded as the dtype holds it
          const double got = Load(dtype, data.data(), i);
          if (std::abs(got - want) > (average ? std::abs(want) * 1e-2 : 0.0))
            return Internal(std::string(DTypeName(dtype)) + " round " + std::to_string(round) + " element " +
                            std::to_string(i) + ": " + std::to_string(got) + " instead of " + std::to_string(want));
        }
      }
    }
    return Status::Ok();
  });
  for (int r = 0; r < n; ++r) EXPECT_TRUE(statuses[r].ok()) << r << ": " << statuses[r].ToString();
  // One push per host for each chunk of each round, spread over the host's workers.
  double chunks_per_round = 0;
  for (DType dtype : dtypes) chunks_per_round += double((kElements * DTypeSize(dtype) + 255) / 256);
  double pushed = 0;
  for (int r = 0; r < n; ++r) pushed += Metric(job.worker(r), "syncline_pushed_chunks_total");
  EXPECT_EQ(pushed, double(layout.size()) * chunks_per_round * kRounds);
  EXPECT_TRUE(job.Finish().ok());
}

INSTANTIATE_TEST_SUITE_P(Hosts, LocalReduceLayouts,
                         ::testing::Values(Layout{2}, Layout{3, 2}, Layout{4, 1, 2}),
                         [](const auto& info) {
                           std::string name = "Workers";
                           for (int l : info.param) name += "_" + std::to_string(l);
                           return name;
                         });

TEST(LocalReduce, FlatJobsPushOneCopyPerWorker) {
  InProcessJob::Options o = JobOf({3});
  o.local_reduce = false;
  InProcessJob job(o);
  ASSERT_TRUE(job.Start().ok());
  auto statuses = OnAllWorkers(job, [&](int rank) -> Status {
    Worker& w = job.worker(rank);
    SYNCLINE_ASSIGN_OR_RETURN(TensorId id, w.Declare("x", DType::kFloat32, 640));  // 10 chunks
    std::vector<float> x(640, float(rank));
    SYNCLINE_ASSIGN_OR_RETURN(OpHandle h, w.PushPull(id, x.data(), false));
    SYNCLINE_RETURN_IF_ERROR(h.Wait(w.DefaultDeadline()));
    return x[639] == 3.0f ? Status::Ok() : Internal("sum " + std::to_string(x[639]));
  });
  for (const Status& st : statuses) EXPECT_TRUE(st.ok()) << st.ToString();
  for (int r = 0; r < 3; ++r) EXPECT_EQ(Metric(job.worker(r), "syncline_pushed_chunks_total"), 10.0) << r;
  EXPECT_TRUE(job.Finish().ok());
}

TEST(LocalReduce, AsyncAndSspWorkersPushTheirOwnSoThatNoneWaitsForItsHost) {
  for (const std::string mode : {"async", "ssp"}) {
    SCOPED_TRACE(mode);
    InProcessJob::Options o = JobOf({2});
    o.async = mode == "async";
    o.sync_mode = mode == "ssp" ? "ssp" : "bsp";
    InProcessJob job(o);
    ASSERT_TRUE(job.Start().ok());
    auto statuses = OnAllWorkers(job, [&](int rank) -> Status {
      Worker& w = job.worker(rank);
      SYNCLINE_ASSIGN_OR_RETURN(TensorId id, w.Declare("x", DType::kFloat32, 640));  // 10 chunks
      std::vector<float> x(640, 1.0f);
      SYNCLINE_ASSIGN_OR_RETURN(OpHandle h, w.PushPull(id, x.data(), false));
      return h.Wait(w.DefaultDeadline());
    });
    for (const Status& st : statuses) EXPECT_TRUE(st.ok()) << st.ToString();
    for (int r = 0; r < 2; ++r) EXPECT_EQ(Metric(job.worker(r), "syncline_pushed_chunks_total"), 10.0) << r;
    EXPECT_TRUE(job.Finish().ok());
  }
}

// The bits of every worker's result after a few rounds of random floats.
std::vector<std::vector<uint32_t>> DeterministicRun(const Layout& layout) {
  InProcessJob::Options o = JobOf(layout);
  o.deterministic = true;
  InProcessJob job(o);
  EXPECT_TRUE(job.Start().ok());
  std::vector<std::vector<uint32_t>> bits(job.num_workers());
  auto statuses = OnAllWorkers(job, [&](int rank) -> Status {
    Worker& w = job.worker(rank);
    SYNCLINE_ASSIGN_OR_RETURN(TensorId id, w.Declare("x", DType::kFloat32, 1000));
    std::mt19937 random(rank);
    std::uniform_real_distribution<float> value(-1.0f, 1.0f);
    std::vector<float> x(1000);
    for (int round = 0; round < 4; ++round) {
      for (float& v : x) v = value(random);
      SYNCLINE_ASSIGN_OR_RETURN(OpHandle h, w.PushPull(id, x.data(), round % 2 == 0));
      SYNCLINE_RETURN_IF_ERROR(h.Wait(w.DefaultDeadline()));
      for (float v : x) {
        uint32_t b;
        std::memcpy(&b, &v, 4);
        bits[rank].push_back(b);
      }
    }
    return Status::Ok();
  });
  for (const Status& st : statuses) EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_TRUE(job.Finish().ok());
  return bits;
}

TEST(LocalReduce, DeterministicSumsAreBitIdenticalFromRunToRunAndOnEveryWorker) {
  const Layout layout{3, 2};
  const auto first = DeterministicRun(layout);
  const auto second = DeterministicRun(layout);
  ASSERT_EQ(first.size(), 5u);
  for (size_t r = 0; r < first.size(); ++r) {
    EXPECT_EQ(first[r], second[r]) << "worker " << r;
    EXPECT_EQ(first[r], first[0]) << "worker " << r;
  }
}

TEST(LocalReduce, ASeparateOutputAndABroadcastWork) {
  InProcessJob job(JobOf({2, 2}));
  ASSERT_TRUE(job.Start().ok());
  auto statuses = OnAllWorkers(job, [&](int rank) -> Status {
    Worker& w = job.worker(rank);
    SYNCLINE_ASSIGN_OR_RETURN(TensorId id, w.Declare("x", DType::kFloat32, 300));
    const std::vector<float> in(300, float(rank + 1));
    std::vector<float> out(300, -1.0f);
    PushPullOptions options;
    options.output = out.data();
    SYNCLINE_ASSIGN_OR_RETURN(OpHandle h, w.PushPull(id, const_cast<float*>(in.data()), options));
    SYNCLINE_RETURN_IF_ERROR(h.Wait(w.DefaultDeadline()));
    if (in[0] != float(rank + 1) || in[299] != float(rank + 1)) return Internal("the input was written");
    if (out[0] != 10.0f || out[299] != 10.0f) return Internal("sum " + std::to_string(out[299]));
    std::vector<float> b(300, float(rank * 7));
    SYNCLINE_RETURN_IF_ERROR(w.Broadcast(id, b.data(), 3));
    return b[0] == 21.0f && b[299] == 21.0f ? Status::Ok() : Internal("broadcast " + std::to_string(b[299]));
  });
  for (const Status& st : statuses) EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_TRUE(job.Finish().ok());
}

TEST(LocalReduce, AWorkerOfTheHostThatFinishedEarlyEndsTheJobNamingItAndTheTensor) {
  InProcessJob::Options o = JobOf({2});
  o.heartbeat_timeout_ms = 60000;  // only the detection can end the job in time
  InProcessJob job(o);
  ASSERT_TRUE(job.Start().ok());
  auto statuses = OnAllWorkers(job, [&](int rank) -> Status {
    Worker& w = job.worker(rank);
    SYNCLINE_ASSIGN_OR_RETURN(TensorId id, w.Declare("steps", DType::kFloat32, 500));
    std::vector<float> x(500, 1.0f);
    for (int step = 0; step < (rank == 1 ? 1 : 2); ++step) {
      SYNCLINE_ASSIGN_OR_RETURN(OpHandle h, w.PushPull(id, x.data(), false));
      SYNCLINE_RETURN_IF_ERROR(h.Wait(Deadline::AfterMs(15000)));
    }
    return rank == 1 ? w.Shutdown() : Status::Ok();
  });
  EXPECT_TRUE(statuses[1].ok()) << statuses[1].ToString();
  EXPECT_EQ(statuses[0].code(), StatusCode::kAborted) << statuses[0].ToString();
  EXPECT_NE(statuses[0].message().find("worker 1 finished without pushing round 1"), std::string::npos)
      << statuses[0].message();
  EXPECT_NE(statuses[0].message().find("[tensor 'steps'"), std::string::npos) << statuses[0].message();
  job.JoinAll();
}

// Worker 0 posts round 1 once worker 1's Shutdown returned, so worker 1's
// finish has mostly reached it already: a push_pull the finished worker should
// have pushed for the host fails as it is posted, and says the same as one
// that was waiting for it (it said "worker 1 finished" only).
TEST(LocalReduce, APushPullPostedAfterItsHostPeerFinishedNamesThePeerTheRoundAndTheTensor) {
  InProcessJob::Options o = JobOf({2});
  o.heartbeat_timeout_ms = 60000;
  InProcessJob job(o);
  ASSERT_TRUE(job.Start().ok());
  std::latch shut_down(1);
  std::vector<Status> round_one;  // worker 0's, one per tensor
  auto statuses = OnAllWorkers(job, [&](int rank) -> Status {
    Worker& w = job.worker(rank);
    std::vector<TensorId> ids;  // consecutive ids: each worker pushes one of the two for the host
    std::vector<float> x(500, 1.0f);
    auto round_zero = [&]() -> Status {
      for (const char* name : {"a", "b"}) {
        SYNCLINE_ASSIGN_OR_RETURN(TensorId id, w.Declare(name, DType::kFloat32, 500));
        ids.push_back(id);
      }
      for (TensorId id : ids) {
        SYNCLINE_ASSIGN_OR_RETURN(OpHandle h, w.PushPull(id, x.data(), false));
        SYNCLINE_RETURN_IF_ERROR(h.Wait(Deadline::AfterMs(15000)));
      }
      return Status::Ok();
    };
    Status st = round_zero();
    if (rank == 1) {
      if (st.ok()) st = w.Shutdown();
      shut_down.count_down();  // whatever happened: worker 0 must not wait forever
      return st;
    }
    SYNCLINE_RETURN_IF_ERROR(st);
    shut_down.wait();
    for (auto id = ids.rbegin(); id != ids.rend(); ++id) {  // "b" first: worker 1 pushes it for the host
      Result<OpHandle> h = w.PushPull(*id, x.data(), false);
      round_one.push_back(h.ok() ? h->Wait(Deadline::AfterMs(15000)) : h.status());
    }
    return Status::Ok();
  });
  EXPECT_TRUE(statuses[0].ok()) << statuses[0].ToString();
  EXPECT_TRUE(statuses[1].ok()) << statuses[1].ToString();
  ASSERT_EQ(round_one.size(), 2u);
  for (const Status& st : round_one) {
    EXPECT_EQ(st.code(), StatusCode::kAborted) << st.ToString();
    EXPECT_NE(st.message().find("worker 1 finished without pushing round 1"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("[tensor '"), std::string::npos) << st.message();
  }
  job.JoinAll();
}

// Worker 1 posts round 0 of both tensors and shuts down before worker 0 has
// posted any: its Shutdown gives up on the push_pull it waits to push for the
// host, and its process ends. Worker 0 must not be told that worker 1
// finished without pushing round 0 (it posted it; the job would end blaming
// the wrong mistake), and must not wait for the heartbeat timeout either:
// the job ends naming worker 1 as one that left push_pulls unfinished.
TEST(LocalReduce, AShutdownThatGaveUpOnAPushPullEndsTheJobNamingItNotAsFinished) {
  InProcessJob::Options o = JobOf({2});
  o.heartbeat_timeout_ms = 60000;  // only worker 1's own abort can end the job in time
  o.request_timeout_ms = 1000;     // worker 1's Shutdown gives up after 1 s
  InProcessJob job(o);
  ASSERT_TRUE(job.Start().ok());
  std::latch shut_down(1), posted(1);
  Status worker_zeros_round;
  auto statuses = OnAllWorkers(job, [&](int rank) -> Status {
    Worker& w = job.worker(rank);
    std::vector<TensorId> ids;  // consecutive ids: each worker pushes one of the two for the host
    for (const char* name : {"a", "b"}) {
      SYNCLINE_ASSIGN_OR_RETURN(TensorId id, w.Declare(name, DType::kFloat32, 500));
      ids.push_back(id);
    }
    std::vector<float> x(500, 1.0f);
    if (rank == 1) {
      Status st = Status::Ok();
      for (TensorId id : ids)
        if (Result<OpHandle> h = w.PushPull(id, x.data(), false); !h.ok()) st = h.status();
      const Status shutdown = w.Shutdown();
      shut_down.count_down();  // whatever happened: worker 0 must not wait forever
      posted.wait();
      job.DestroyWorker(1);  // the training process ends
      if (!st.ok()) return st;
      return shutdown.code() == StatusCode::kDeadlineExceeded ? Status::Ok()
                                                              : Internal("Shutdown did not give up: " + shutdown.ToString());
    }
    shut_down.wait();
    // Posted while worker 1 still runs: what it told its host decides.
    std::vector<Result<OpHandle>> handles;
    for (TensorId id : ids) handles.push_back(w.PushPull(id, x.data(), false));
    posted.count_down();
    const auto start = std::chrono::steady_clock::now();
    for (Result<OpHandle>& h : handles) {
      Status st = h.ok() ? h->Wait(Deadline::AfterMs(20000)) : h.status();
      if (!st.ok() && worker_zeros_round.ok()) worker_zeros_round = st;
    }
    return std::chrono::steady_clock::now() - start < std::chrono::seconds(10) ? Status::Ok()
                                                                                : Internal("the job ended late");
  });
  EXPECT_TRUE(statuses[1].ok()) << statuses[1].ToString();
  EXPECT_TRUE(statuses[0].ok()) << statuses[0].ToString();
  EXPECT_EQ(worker_zeros_round.code(), StatusCode::kAborted) << worker_zeros_round.ToString();
  EXPECT_NE(worker_zeros_round.message().find("worker 1 stopped with push_pulls unfinished"), std::string::npos)
      << worker_zeros_round.message();
  EXPECT_EQ(worker_zeros_round.message().find("finished without pushing"), std::string::npos)
      << worker_zeros_round.message();
  job.JoinAll();
}

// Admits chunks as SendAtOnce does, each with its round moved far ahead: the
// servers refuse every push this worker makes for its host.
class RoundsFarAhead final : public ChunkScheduler {
 public:
  void Start(Admit admit) override { admit_ = std::move(admit); }
  void Post(std::vector<ChunkTask> chunks) override {
    for (ChunkTask& c : chunks) {
      c.round += 1000000;
      admit_(std::move(c));
    }
  }
  void Release(uint64_t) override {}
  void Stop(const Status&) override {}

 private:
  Admit admit_;
};

TEST(LocalReduce, AServersRefusalOfAPushersChunkReachesEveryWorkerOfItsHostNamed) {
  // Worker 0 pushes half of the chunks for both workers of its host and the
  // servers refuse each: worker 1, which gave it its copies and waits for
  // the sums, must learn the server's reason from worker 0, not from a
  // deadline; also for chunks whose copies reach worker 0 after its
  // push_pull failed (some runs: it depends on arrival order).
  InProcessJob::Options o = JobOf({2});
  o.request_timeout_ms = 60000;
  o.stall_timeout_ms = 120000;
  o.chunk_scheduler = [](int rank) -> std::unique_ptr<ChunkScheduler> {
    if (rank == 0) return std::make_unique<RoundsFarAhead>();
    return std::make_unique<SendAtOnce>();
  };
  InProcessJob job(o);
  ASSERT_TRUE(job.Start().ok());
  auto statuses = OnAllWorkers(job, [&](int rank) -> Status {
    Worker& w = job.worker(rank);
    SYNCLINE_ASSIGN_OR_RETURN(TensorId id, w.Declare("refused", DType::kFloat32, 640));  // 10 chunks
    std::vector<float> x(640, 1.0f);
    SYNCLINE_ASSIGN_OR_RETURN(OpHandle h, w.PushPull(id, x.data(), false));
    return h.Wait(Deadline::AfterMs(30000));
  });
  for (int rank = 0; rank < 2; ++rank) {
    SCOPED_TRACE(rank);
    EXPECT_FALSE(statuses[rank].ok());
    EXPECT_NE(statuses[rank].message().find("rounds beyond the last one every worker finished"), std::string::npos)
        << statuses[rank].ToString();
    EXPECT_EQ(statuses[rank].message().find("deadline"), std::string::npos) << statuses[rank].ToString();
  }
  // Each worker leaves as finished, its push_pull failed: the job ends (it hung before, one run
  // in three, worker 0 never telling the scheduler while its failed operation was still
  // referenced). Finish returns a worker's failure, if Shutdown still saw the operation.
  const Status finished = job.Finish();
  EXPECT_TRUE(finished.ok() || finished.message().find("rounds beyond") != std::string::npos) << finished.ToString();
}

TEST(LocalReduce, TracesShowEveryChunkGatheredAndPushedByOneWorkerAndPassedBackToTheOther) {
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("syncline-local-trace-" + std::to_string(getpid()))).string();
  std::filesystem::remove_all(dir);
  InProcessJob::Options o = JobOf({2});
  o.trace_dir = dir;  // steps 0 and 1
  InProcessJob job(o);
  ASSERT_TRUE(job.Start().ok());
  constexpr size_t kChunks = 5;
  auto statuses = OnAllWorkers(job, [&](int rank) -> Status {
    Worker& w = job.worker(rank);
    SYNCLINE_ASSIGN_OR_RETURN(TensorId id, w.Declare("x", DType::kFloat32, kChunks * 64));
    std::vector<float> x(kChunks * 64, 1.0f);
    for (int step = 0; step < 3; ++step) {
      w.timeline()->BeginStep();
      SYNCLINE_ASSIGN_OR_RETURN(OpHandle h, w.PushPull(id, x.data(), false));
      SYNCLINE_RETURN_IF_ERROR(h.Wait(w.DefaultDeadline()));
    }
    return Status::Ok();
  });
  for (const Status& st : statuses) ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_TRUE(job.Finish().ok());  // Shutdown writes the traces
  std::map<std::string, int> pushers;  // chunk row -> workers that pushed it
  for (int rank = 0; rank < 2; ++rank) {
    SCOPED_TRACE("worker " + std::to_string(rank));
    const std::optional<nlohmann::json> trace = testing::ReadWorkerTrace(dir, rank);
    ASSERT_TRUE(trace) << "no trace file";
    std::map<std::string, std::vector<std::string>> names;
    for (const auto& [row, spans] : testing::SpansByRow(*trace))
      for (const auto& e : spans)
        if (e["cat"] == "chunk") names[row].push_back(e["name"]);
    ASSERT_EQ(names.size(), kChunks) << "every chunk has a row";
    const std::vector<std::string> pushed = {"gather", "queued", "push", "sum", "gather", "queued", "push", "sum"};
    for (const auto& [row, spans] : names) {
      if (spans == pushed) {
        ++pushers[row];
      } else {
        EXPECT_EQ(spans, (std::vector<std::string>{"local", "local"})) << row;
      }
    }
  }
  ASSERT_EQ(pushers.size(), kChunks);
  for (const auto& [row, n] : pushers) EXPECT_EQ(n, 1) << row << ": one pusher per chunk";
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace syncline
