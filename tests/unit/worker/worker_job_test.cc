// A whole job in one process: scheduler, servers and workers as threads,
// over the loopback network and over ZeroMQ (tcp, ipc). Asserts exact sums.
#include <gtest/gtest.h>

#include <cstring>
#include <future>
#include <random>

#include "summation/half.h"
#include "syncline/config.h"
#include "tests/unit/testing/in_process_job.h"

namespace syncline {
namespace {

using testing::ExpectAllOk;
using testing::InProcessJob;
using testing::OnAllWorkers;

// Small integers: exact in every dtype, and so are their sums over a few workers.
double Value(int rank, uint64_t round, size_t i) { return static_cast<double>((rank * 7 + round * 3 + i) % 13) - 4; }

void Store(DType t, std::vector<uint8_t>& out, size_t i, double v) {
  switch (t) {
    case DType::kFloat32: reinterpret_cast<float*>(out.data())[i] = static_cast<float>(v); break;
    case DType::kFloat64: reinterpret_cast<double*>(out.data())[i] = v; break;
    case DType::kFloat16: reinterpret_cast<uint16_t*>(out.data())[i] = FloatToHalf(static_cast<float>(v)); break;
    case DType::kBFloat16: reinterpret_cast<uint16_t*>(out.data())[i] = FloatToBf16(static_cast<float>(v)); break;
  }
}

std::vector<uint8_t> Fill(DType t, size_t n, int rank, uint64_t round) {
  std::vector<uint8_t> out(n * DTypeSize(t));
  for (size_t i = 0; i < n; ++i) Store(t, out, i, Value(rank, round, i));
  return out;
}

std::vector<uint8_t> ExpectedSum(DType t, size_t n, int workers, uint64_t round) {
  std::vector<uint8_t> out(n * DTypeSize(t));
  for (size_t i = 0; i < n; ++i) {
    double v = 0;
    for (int r = 0; r < workers; ++r) v += Value(r, round, i);
    Store(t, out, i, v);
  }
  return out;
}

// Waits for a push_pull. When it did not end in time, the transport may
// still write the tensors until the worker is destroyed: they go to the job,
// which frees them after its workers, so a slow run fails its expectation
// instead of having a late reply write freed memory.
template <typename... Tensors>
Status WaitKeepingTensors(InProcessJob& job, const OpHandle& h, Tensors&... tensors) {
  Status st = h.Wait(Deadline::AfterMs(20000));
  if (!st.ok()) (job.KeepUntilDestroyed(std::move(tensors)), ...);
  return st;
}

// The parameter names a transport, with "+shm" for payloads through shared memory.
class WorkerJobTest : public ::testing::TestWithParam<std::string> {
 protected:
  InProcessJob::Options OptionsFromParam() const {
    InProcessJob::Options o;
    std::string p = GetParam();
    if (auto plus = p.find("+shm"); plus != std::string::npos) {
      o.shm = true;
      p = p.substr(0, plus);
    }
    o.transport = p;
    return o;
  }
};

// Every worker push_pulls tensors of each dtype and several sizes for a few
// rounds and checks the exact sums; with "+shm", payloads must have gone
// through shared memory both ways.
void ExpectExactSums(const InProcessJob::Options& o, const std::string& param) {
  InProcessJob job(o);
  ASSERT_TRUE(job.Start().ok());
  struct Spec { std::string name; DType dtype; size_t n; };
  const std::vector<Spec> specs = {{"one", DType::kFloat32, 1},        {"f32", DType::kFloat32, 5000},
                                   {"f64", DType::kFloat64, 777},      {"f16", DType::kFloat16, 4099},
                                   {"bf16", DType::kBFloat16, 3000},   {"empty", DType::kFloat32, 0}};
  constexpr int kRounds = 6;
  ExpectAllOk(OnAllWorkers(job, [&](int rank) -> Status {
    Worker& w = job.worker(rank);
    std::vector<TensorId> ids;
    for (const auto& s : specs) {
      SYNCLINE_ASSIGN_OR_RETURN(TensorId id, w.Declare(s.name, s.dtype, s.n));
      ids.push_back(id);
    }
    for (uint64_t round = 0; round < kRounds; ++round) {
      std::vector<std::vector<uint8_t>> data;
      std::vector<OpHandle> handles;
      for (size_t t = 0; t < specs.size(); ++t) data.push_back(Fill(specs[t].dtype, specs[t].n, rank, round));
      for (size_t t = 0; t < specs.size(); ++t) {
        SYNCLINE_ASSIGN_OR_RETURN(OpHandle h, w.PushPull(ids[t], data[t].data(), false));
        handles.push_back(h);
      }
      for (size_t t = 0; t < specs.size(); ++t) {
        SYNCLINE_RETURN_IF_ERROR(WaitKeepingTensors(job, handles[t], data));
        if (data[t] != ExpectedSum(specs[t].dtype, specs[t].n, job.num_workers(), round))
          return Internal("wrong sum for " + specs[t].name + " in round " + std::to_string(round));
      }
    }
    return Status::Ok();
  }));
  for (int r = 0; r < job.num_workers(); ++r) {
    const auto shm = job.worker(r).shm_stats();
    if (param.find("+shm") != std::string::npos) {
      EXPECT_GT(shm.messages_sent, 0u) << "pushes should go through shared memory";
      EXPECT_GT(shm.messages_received, 0u) << "pulls should come through shared memory";
    } else {
      EXPECT_EQ(shm.messages_sent + shm.messages_received, 0u);
    }
  }
  EXPECT_TRUE(job.Finish().ok());
}

TEST_P(WorkerJobTest, PushPullSumsExactlyForEveryDtypeAndSize) { ExpectExactSums(OptionsFromParam(), GetParam()); }

// A server reply window of one byte: each sum to a worker waits until the
// worker has acknowledged the one before (REPLY_ACK), over sockets and
// through shared memory; every sum still arrives, exactly.
TEST(WorkerJob, SumsStayExactWhenEachSumWaitsForTheAckOfTheLast) {
  for (const std::string param : {"tcp", "tcp+shm"}) {
    SCOPED_TRACE(param);
    InProcessJob::Options o;
    o.transport = "tcp";
    o.shm = param == "tcp+shm";
    o.server_reply_window_bytes = 1;
    ExpectExactSums(o, param);
  }
}

// With one worker the server answers with the pushed bytes themselves (no
// copy; KeyStoreTest checks that): a view of shared memory, or on the
// loopback transport the worker's own tensor, which the worker must then
// neither wait on nor copy over itself (if it waited, every push_pull here
// would end in DeadlineExceeded). The sums must come out exact either way.
TEST_P(WorkerJobTest, OneWorkerGetsItsOwnPushBack) {
  for (bool deterministic : {false, true}) {
    SCOPED_TRACE(deterministic ? "deterministic" : "arrival order");
    InProcessJob::Options o = OptionsFromParam();
    o.workers = 1;
    o.deterministic = deterministic;
    ExpectExactSums(o, GetParam());
  }
}

TEST_P(WorkerJobTest, AverageAndBroadcast) {
  InProcessJob::Options o = OptionsFromParam();
  o.workers = 2;  // dividing by 2 is exact
  InProcessJob job(o);
  ASSERT_TRUE(job.Start().ok());
  ExpectAllOk(OnAllWorkers(job, [&](int rank) -> Status {
    Worker& w = job.worker(rank);
    SYNCLINE_ASSIGN_OR_RETURN(TensorId id, w.Declare("g", DType::kFloat32, 3000));
    std::vector<float> g(3000, static_cast<float>(rank == 0 ? 1 : 3));
    SYNCLINE_ASSIGN_OR_RETURN(OpHandle h, w.PushPull(id, g.data(), /*average=*/true));
    SYNCLINE_RETURN_IF_ERROR(h.Wait(Deadline::AfterMs(20000)));
    for (float v : g)
      if (v != 2.0f) return Internal("average is " + std::to_string(v));
    std::vector<float> params(3000, static_cast<float>(rank + 10));
    SYNCLINE_RETURN_IF_ERROR(w.Broadcast(id, params.data(), /*root=*/1));
    for (float v : params)
      if (v != 11.0f) return Internal("broadcast gave " + std::to_string(v));
    return w.Barrier();
  }));
  EXPECT_TRUE(job.Finish().ok());
}

// With an output given, the sums go there and the pushed memory is only read,
// with one worker (the server answers with the pushed bytes themselves) too.
TEST_P(WorkerJobTest, SeparateOutputGetsTheSumAndTheInputIsLeftAlone) {
  for (int workers : {1, 3}) {
    SCOPED_TRACE(std::to_string(workers) + " worker(s)");
    InProcessJob::Options o = OptionsFromParam();
    o.workers = workers;
    InProcessJob job(o);
    ASSERT_TRUE(job.Start().ok());
    ExpectAllOk(OnAllWorkers(job, [&](int rank) -> Status {
      Worker& w = job.worker(rank);
      constexpr size_t kN = 70000;  // several chunks
      SYNCLINE_ASSIGN_OR_RETURN(TensorId id, w.Declare("t", DType::kFloat64, kN));
      for (uint64_t round = 0; round < 3; ++round) {
        std::vector<uint8_t> input = Fill(DType::kFloat64, kN, rank, round);
        const std::vector<uint8_t> pushed = input;
        std::vector<uint8_t> output(input.size(), 0xAB);
        PushPullOptions options;
        options.output = output.data();
        SYNCLINE_ASSIGN_OR_RETURN(OpHandle h, w.PushPull(id, input.data(), std::move(options)));
        SYNCLINE_RETURN_IF_ERROR(WaitKeepingTensors(job, h, input, output));
        if (input != pushed) return Internal("the input was written to");
        if (output != ExpectedSum(DType::kFloat64, kN, workers, round)) return Internal("wrong sum in the output");
      }
      return w.Barrier();
    }));
    EXPECT_TRUE(job.Finish().ok());
  }
}

INSTANTIATE_TEST_SUITE_P(SharedMemory, WorkerJobTest, ::testing::Values("loopback+shm", "tcp+shm"),
                         [](const auto& info) { return info.param.substr(0, info.param.find('+')) + "_shm"; });
INSTANTIATE_TEST_SUITE_P(Transports, WorkerJobTest, ::testing::Values("loopback", "tcp", "ipc"));
#if SYNCLINE_HAVE_UCX
// UCX over the transports UCX_TLS names (UCX's default here; ctest also runs
// these with UCX_TLS=tcp and UCX_TLS=sm).
INSTANTIATE_TEST_SUITE_P(Ucx, WorkerJobTest, ::testing::Values("ucx", "ucx+shm"), [](const auto& info) {
  return info.param.find('+') == std::string::npos ? info.param : info.param.substr(0, info.param.find('+')) + "_shm";
});
#endif

TEST(WorkerJob, DeterministicModeIsBitIdenticalAcrossRuns) {
  auto run = [] {
    InProcessJob::Options o;
    o.deterministic = true;
    o.workers = 4;
    InProcessJob job(o);
    EXPECT_TRUE(job.Start().ok());
    std::vector<std::vector<float>> results(4);
    ExpectAllOk(OnAllWorkers(job, [&](int rank) -> Status {
      Worker& w = job.worker(rank);
      SYNCLINE_ASSIGN_OR_RETURN(TensorId id, w.Declare("noise", DType::kFloat32, 10000));
      std::mt19937 gen(1234 + rank);
      std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
      std::vector<float> x(10000);
      for (float& v : x) v = dist(gen) * 1e-3f + dist(gen);  // sums that depend on the order of addition
      SYNCLINE_ASSIGN_OR_RETURN(OpHandle h, w.PushPull(id, x.data(), false));
      SYNCLINE_RETURN_IF_ERROR(h.Wait(Deadline::AfterMs(20000)));
      results[rank] = x;
      return Status::Ok();
    }));
    EXPECT_TRUE(job.Finish().ok());
    for (int r = 1; r < 4; ++r) EXPECT_EQ(0, std::memcmp(results[0].data(), results[r].data(), 40000));
    return results[0];
  };
  std::vector<float> first = run(), second = run();
  ASSERT_EQ(first.size(), second.size());
  EXPECT_EQ(0, std::memcmp(first.data(), second.data(), first.size() * sizeof(float)));
}

TEST(WorkerJob, AsyncModeAppliesEveryPush) {
  InProcessJob::Options o;
  o.async = true;
  InProcessJob job(o);
  ASSERT_TRUE(job.Start().ok());
  constexpr int kPushes = 5;
  ExpectAllOk(OnAllWorkers(job, [&](int rank) -> Status {
    Worker& w = job.worker(rank);
    SYNCLINE_ASSIGN_OR_RETURN(TensorId id, w.Declare("delta", DType::kFloat64, 2000));
    for (int i = 0; i < kPushes; ++i) {
      std::vector<double> d(2000, rank + 1.0);
      SYNCLINE_ASSIGN_OR_RETURN(OpHandle h, w.PushPull(id, d.data(), false));
      SYNCLINE_RETURN_IF_ERROR(h.Wait(Deadline::AfterMs(20000)));
    }
    SYNCLINE_RETURN_IF_ERROR(w.Barrier());
    std::vector<double> zero(2000, 0.0);
    SYNCLINE_ASSIGN_OR_RETURN(OpHandle h, w.PushPull(id, zero.data(), false));
    SYNCLINE_RETURN_IF_ERROR(h.Wait(Deadline::AfterMs(20000)));
    const double expected = kPushes * (1 + 2 + 3);
    for (double v : zero)
      if (v != expected) return Internal("async value " + std::to_string(v) + ", expected " + std::to_string(expected));
    return Status::Ok();
  }));
  EXPECT_TRUE(job.Finish().ok());
}

// Async and ssp servers keep a running value per key; a broadcast's rounds
// are summed whole instead, so every broadcast (not only a tensor's first)
// hands out the root's tensor, while push_pulls of another tensor go on.
TEST(WorkerJob, BroadcastsInAsyncAndSspModesHandOutTheRootsTensorEveryTime) {
  for (const std::string mode : {"async", "ssp"}) {
    SCOPED_TRACE(mode);
    InProcessJob::Options o;
    o.async = mode == "async";
    o.sync_mode = mode == "ssp" ? "ssp" : "bsp";
    o.workers = 2;
    o.servers = 1;
    InProcessJob job(o);
    ASSERT_TRUE(job.Start().ok());
    ExpectAllOk(OnAllWorkers(job, [&](int rank) -> Status {
      Worker& w = job.worker(rank);
      SYNCLINE_ASSIGN_OR_RETURN(TensorId params, w.Declare("params", DType::kFloat32, 3000));
      SYNCLINE_ASSIGN_OR_RETURN(TensorId changes, w.Declare("changes", DType::kFloat32, 10));
      for (int time = 0; time < 3; ++time) {
        std::vector<float> value(3000, rank * 10.0f + time);
        SYNCLINE_RETURN_IF_ERROR(w.Broadcast(params, value.data(), /*root=*/time % 2));
        const float expected = (time % 2) * 10.0f + time;
        for (float v : value)
          if (v != expected)
            return Internal("broadcast " + std::to_string(time) + " gave " + std::to_string(v) + ", expected " +
                            std::to_string(expected));
        std::vector<float> change(10, 1.0f);
        SYNCLINE_ASSIGN_OR_RETURN(OpHandle h, w.PushPull(changes, change.data(), false));
        SYNCLINE_RETURN_IF_ERROR(h.Wait(Deadline::AfterMs(20000)));
      }
      return Status::Ok();
    }));
    EXPECT_TRUE(job.Finish().ok());
  }
}

// Through the whole stack (wire, rounds, flags): every worker adds 1 to its
// own element each round, with no wait but the servers', and every value it
// reads at round r holds at least r - k + 1 rounds of every other worker.
TEST(WorkerJob, SspReadsAreNeverMoreThanKRoundsBehindAnyWorker) {
  constexpr int kStaleness = 1;
  constexpr int kRounds = 40;
  InProcessJob::Options o;
  o.sync_mode = "ssp";
  o.ssp_staleness = kStaleness;
  o.workers = 3;
  o.servers = 2;
  InProcessJob job(o);
  ASSERT_TRUE(job.Start().ok());
  ExpectAllOk(OnAllWorkers(job, [&](int rank) -> Status {
    Worker& w = job.worker(rank);
    SYNCLINE_ASSIGN_OR_RETURN(TensorId id, w.Declare("counts", DType::kFloat64, 3));
    for (int round = 0; round < kRounds; ++round) {
      std::vector<double> counts(3, 0.0);
      counts[rank] = 1;
      SYNCLINE_ASSIGN_OR_RETURN(OpHandle h, w.PushPull(id, counts.data(), false));
      SYNCLINE_RETURN_IF_ERROR(h.Wait(Deadline::AfterMs(20000)));
      for (int other = 0; other < 3; ++other)
        if (counts[other] < round - kStaleness + 1 || counts[other] > kRounds)
          return Internal("rank " + std::to_string(rank) + " read round " + std::to_string(round) + " with " +
                          std::to_string(counts[other]) + " rounds of rank " + std::to_string(other));
      if (counts[rank] < round + 1) return Internal("a worker's read lacks its own push");
    }
    return Status::Ok();
  }));
  EXPECT_TRUE(job.Finish().ok());
}

TEST(WorkerJob, MismatchedDeclarationIsAnErrorNamingTheTensor) {
  InProcessJob::Options o;
  o.workers = 2;
  InProcessJob job(o);
  ASSERT_TRUE(job.Start().ok());
  auto statuses = OnAllWorkers(job, [&](int rank) -> Status {
    return job.worker(rank).Declare("conv1.weight", rank == 0 ? DType::kFloat32 : DType::kFloat16, 100).status();
  });
  for (const Status& st : statuses) {
    EXPECT_EQ(st.code(), StatusCode::kAborted) << st.ToString();
    EXPECT_NE(st.message().find("conv1.weight"), std::string::npos) << st.message();
  }
  job.JoinAll();
  EXPECT_NE(job.scheduler_status().message().find("mismatched declaration of tensor 'conv1.weight'"),
            std::string::npos)
      << job.scheduler_status().ToString();
}

TEST(WorkerJob, DeadServerFailsPendingOpsWithItsName) {
  InProcessJob::Options o;
  o.workers = 2;
  o.servers = 2;
  o.heartbeat_timeout_ms = 500;
  InProcessJob job(o);
  ASSERT_TRUE(job.Start().ok());
  job.network().Isolate("loop://server-1");
  auto statuses = OnAllWorkers(job, [&](int rank) -> Status {
    Worker& w = job.worker(rank);
    SYNCLINE_ASSIGN_OR_RETURN(TensorId id, w.Declare("t", DType::kFloat32, 4096));  // 4 chunks: both servers
    std::vector<float> x(4096, 1.0f);
    SYNCLINE_ASSIGN_OR_RETURN(OpHandle h, w.PushPull(id, x.data(), false));
    return h.Wait(Deadline::AfterMs(20000));
  });
  for (const Status& st : statuses) {
    EXPECT_EQ(st.code(), StatusCode::kAborted) << st.ToString();
    EXPECT_NE(st.message().find("loop://server-1"), std::string::npos) << st.message();
  }
  job.JoinAll();
  EXPECT_EQ(job.scheduler_status().code(), StatusCode::kAborted);
}

// Over tcp the ABORT leaves through ZeroMQ's I/O thread, after the destructor
// returns to closing the endpoint: it must still get out.
class WorkerLeavingTest : public ::testing::TestWithParam<std::string> {};

TEST_P(WorkerLeavingTest, WithoutShutdownEndsTheJobAtOnceNamingIt) {
  InProcessJob::Options o;
  o.transport = GetParam();
  o.workers = 2;
  o.servers = 1;
  o.heartbeat_timeout_ms = 60000;  // so only the leaving worker's own ABORT can end the job in time
  InProcessJob job(o);
  ASSERT_TRUE(job.Start().ok());
  // Declaring is collective: both workers declare before worker 1 goes away.
  for (const Status& st : OnAllWorkers(job, [&](int rank) { return job.worker(rank).Declare("t", DType::kFloat32, 1000).status(); }))
    ASSERT_TRUE(st.ok()) << st.ToString();
  Worker& survivor = job.worker(0);
  auto id = survivor.Declare("t", DType::kFloat32, 1000);  // already declared: the same id at once
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  job.DestroyWorker(1);
  std::vector<float> x(1000, 1.0f);
  const auto start = std::chrono::steady_clock::now();
  auto h = survivor.PushPull(*id, x.data(), false);
  Status st = h.ok() ? h->Wait(Deadline::AfterMs(20000)) : h.status();
  EXPECT_EQ(st.code(), StatusCode::kAborted) << st.ToString();
  EXPECT_NE(st.message().find("worker 1 stopped without Shutdown"), std::string::npos) << st.message();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  job.JoinAll();
  EXPECT_NE(job.scheduler_status().message().find("worker 1 stopped without Shutdown"), std::string::npos)
      << job.scheduler_status().ToString();
}

INSTANTIATE_TEST_SUITE_P(Transports, WorkerLeavingTest, ::testing::Values("loopback", "tcp"));


// The tuner's partition switch: every worker re-cuts its tensors between the
// same two push_pulls (to smaller chunks, larger ones, and back to a size
// used before, whose keys continue their rounds), while another tensor's
// push_pull is in flight; every round's sums stay exact.
TEST(WorkerRepartition, ASwitchMidJobKeepsSumsExact) {
  InProcessJob::Options o;
  o.workers = 3;
  o.partition_bytes = 4096;
  InProcessJob job(o);
  ASSERT_TRUE(job.Start().ok());
  const std::map<uint64_t, uint64_t> switch_at = {{2, 1024}, {4, 16384}, {6, 4096}, {7, 1024}};
  constexpr int kRounds = 9;
  ExpectAllOk(OnAllWorkers(job, [&](int rank) -> Status {
    Worker& w = job.worker(rank);
    SYNCLINE_ASSIGN_OR_RETURN(TensorId a, w.Declare("a", DType::kFloat32, 5000));
    SYNCLINE_ASSIGN_OR_RETURN(TensorId b, w.Declare("b", DType::kFloat16, 4099));
    if (w.Repartition(a, 16).ok()) return Internal("a 16-byte partition was accepted");
    for (uint64_t round = 0; round < kRounds; ++round) {
      auto da = Fill(DType::kFloat32, 5000, rank, round), db = Fill(DType::kFloat16, 4099, rank, round);
      SYNCLINE_ASSIGN_OR_RETURN(OpHandle ha, w.PushPull(a, da.data(), false));
      if (auto it = switch_at.find(round); it != switch_at.end()) {
        for (TensorId id : w.TensorIds()) SYNCLINE_RETURN_IF_ERROR(w.Repartition(id, it->second));
      }
      SYNCLINE_ASSIGN_OR_RETURN(OpHandle hb, w.PushPull(b, db.data(), false));
      SYNCLINE_RETURN_IF_ERROR(WaitKeepingTensors(job, ha, da, db));
      SYNCLINE_RETURN_IF_ERROR(WaitKeepingTensors(job, hb, da, db));
      if (da != ExpectedSum(DType::kFloat32, 5000, 3, round) || db != ExpectedSum(DType::kFloat16, 4099, 3, round))
        return Internal("wrong sum in round " + std::to_string(round));
    }
    return Status::Ok();
  }));
  EXPECT_TRUE(job.Finish().ok());
}


// A partition too small for a tensor used to produce a declaration reply
// larger than a header may be, which every worker dropped: the job waited out
// the request timeout. Now the declaration fails at once and says what to set.
TEST(WorkerDeclare, TooManyChunksFailsAtOnceNamingTheSettingToRaise) {
  InProcessJob::Options o;
  o.workers = 2;
  o.partition_bytes = 64;
  o.request_timeout_ms = 60000;
  InProcessJob job(o);
  ASSERT_TRUE(job.Start().ok());
  const auto start = std::chrono::steady_clock::now();
  auto statuses = OnAllWorkers(job, [&](int rank) -> Status {
    return job.worker(rank).Declare("layer", DType::kFloat32, 1000000).status();
  });
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  for (const Status& st : statuses) {
    EXPECT_FALSE(st.ok());
    EXPECT_NE(st.message().find("'layer'"), std::string::npos) << st.ToString();
    EXPECT_NE(st.message().find("SYNCLINE_PARTITION_BYTES"), std::string::npos) << st.ToString();
  }
  job.JoinAll();
}

}  // namespace
}  // namespace syncline
