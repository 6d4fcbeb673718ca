// Settings: every knob of a Syncline process, with its default and trade-off,
// and the one place that reads them from the environment. SYNCLINE_* names are
// canonical; the BytePS/ps-lite names (DMLC_*, BYTEPS_*, PS_*) are accepted as
// aliases so a BytePS job moves over by changing its import and launcher.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace syncline {

enum class Role { kScheduler, kServer, kWorker };
const char* RoleName(Role role);  // "scheduler", "server", "worker"
Result<Role> ParseRole(const std::string& name);

// A snapshot of environment variables: name -> value.
using Environment = std::map<std::string, std::string>;
// The calling process's environment (the only place Syncline reads it).
Environment ProcessEnvironment();

struct Settings {
  // SYNCLINE_ROLE | DMLC_ROLE. Required for the node binaries.
  Role role = Role::kWorker;
  // SYNCLINE_NUM_WORKERS | DMLC_NUM_WORKER. Workers in the job (>= 1).
  int num_workers = 1;
  // SYNCLINE_NUM_SERVERS | DMLC_NUM_SERVER. Servers in the job (>= 1).
  int num_servers = 1;
  // SYNCLINE_SCHEDULER_HOST | DMLC_PS_ROOT_URI. Where the scheduler listens.
  std::string scheduler_host = "127.0.0.1";
  // SYNCLINE_SCHEDULER_PORT | DMLC_PS_ROOT_PORT. 1..65535; the scheduler binds it.
  int scheduler_port = 9000;
  // SYNCLINE_HOST | DMLC_NODE_HOST. The address this node listens on and
  // advertises to its peers. Default: loopback (single-host jobs).
  std::string host = "127.0.0.1";
  // SYNCLINE_PORT. Port for this node's data endpoint; 0 = any free port.
  int port = 0;
  // SYNCLINE_WORKER_RANK | DMLC_WORKER_ID. This worker's rank; -1 = assigned
  // by the scheduler in order of arrival.
  int worker_rank = -1;
  // SYNCLINE_SERVER_RANK. This server's rank; -1 = assigned by the scheduler
  // in order of arrival. pslaunch and the Helm chart set it, so that a
  // server's label, pod name and rank in the job's messages agree.
  int server_rank = -1;
  // SYNCLINE_LOCAL_RANK / SYNCLINE_LOCAL_SIZE | BYTEPS_LOCAL_RANK /
  // BYTEPS_LOCAL_SIZE. This worker's index among the workers of its host, and
  // their number, as the launcher sees them (pslaunch sets both). The shims'
  // local_rank() (which picks the GPU) reports them where given; the host
  // groups come from registration (control/local_group.h), and a worker warns
  // where these, given, disagree. local_given: either was set.
  int local_rank = 0;
  int local_size = 1;
  bool local_given = false;
  // SYNCLINE_HOST_LABEL. Workers of one machine whose labels differ count as
  // on different hosts in the job's host groups; shared memory between them is
  // unaffected. For emulating several hosts on one machine; empty: the
  // machine is one host. At most kMaxHostLabelBytes.
  std::string host_label;
  static constexpr size_t kMaxHostLabelBytes = 256;
  // SYNCLINE_TRANSPORT. The data plane between workers and servers: "tcp"
  // (ZeroMQ over TCP, default), "ipc" (ZeroMQ over Unix sockets; single host
  // only) or "ucx" (UCX: RDMA verbs where there is an RDMA device, else UCX's
  // tcp and shared memory, steered by UCX_TLS; builds with UCX only).
  // DMLC_ENABLE_RDMA=1|ibverbs or DMLC_ENABLE_UCX=1 select "ucx" unless
  // SYNCLINE_TRANSPORT is set. The scheduler is always reached over ZeroMQ TCP.
  std::string transport = "tcp";
  // SYNCLINE_TCP_SEND_BUFFER_BYTES. The kernel's send buffer (SO_SNDBUF) of
  // each tcp:// connection a node opens to another machine, which bounds the
  // bytes that connection keeps unacknowledged: a host sending to several
  // peers at once then keeps within what a shallow switch queue holds
  // (docs/decisions.md: "Bytes in flight per connection"). 0: the kernel's
  // autotuning (a connection grows to megabytes). Connections within the
  // machine (to any of its addresses, ipc, shared memory) always keep the
  // kernel's.
  uint64_t tcp_send_buffer_bytes = 32ull << 10;
  // SYNCLINE_SHM. Payloads between a worker and a server on the same machine
  // (same kernel and network namespace) go through shared memory instead of
  // the socket; headers still use the transport.
  bool shm = true;
  // SYNCLINE_SHM_BYTES. Size of each shared-memory outbox (one per colocated
  // peer a node sends to); memory is committed as it is first used. A
  // payload that does not fit goes through the socket.
  uint64_t shm_bytes = 256ull << 20;
  // SYNCLINE_JOB_TOKEN. Shared secret a node must hold to join the job: it
  // proves it without sending it, and every message is then bound to its
  // sender (docs/security.md). pslaunch generates one per local job. A
  // scheduler refuses to run without one unless allow_no_token says so.
  std::string job_token;
  // SYNCLINE_ALLOW_NO_TOKEN. Lets a scheduler run with no job token, so that
  // any process that reaches its port may join and no message is
  // authenticated (a trusted, closed network).
  bool allow_no_token = false;
  // SYNCLINE_ENCRYPT. Encrypts all traffic with ZeroMQ's CURVE (tcp and ipc;
  // needs the job token, from which the scheduler's key derives). Payloads
  // through shared memory stay on the machine, unencrypted; the UCX
  // transport is not encrypted and refuses this. Default off: it costs
  // goodput (docs/benchmarks.md), and sealed networks may not need it.
  bool encrypt = false;
  // SYNCLINE_TF_OP. syncline.tensorflow's push_pull goes through the
  // SynclinePushPull op its install step compiled (default), or, off, through
  // dlpack and tf.numpy_function. Read by the Python package; known here so
  // that every process of a job accepts it.
  bool tf_op = true;
  // SYNCLINE_NATIVE_DIR. Where the Python package finds libsyncline.so and
  // the node binaries (lib/, bin/); default: the package's own _native/.
  // Read by the Python package; known here so that every process of a job
  // accepts it.
  std::string native_dir;
  // SYNCLINE_PARTITION_BYTES | BYTEPS_PARTITION_BYTES. Tensors are cut into
  // chunks of at most this many bytes on the wire, each pushed/pulled
  // independently and placed on a server (a compressed tensor's chunks hold
  // the values whose compressed form fills it, up to 16 partitions of values:
  // compression::ChunkBytesForWireBytes). Smaller: more overlap and better balance, more
  // per-message overhead. Default 256 KiB (BytePS: 4 MB): chosen on the
  // emulated 1 Gbit/s cluster, where it is the tuner's best point for every
  // model measured, and costs 0-10% on loopback (docs/decisions.md).
  uint64_t partition_bytes = 256ull << 10;
  // SYNCLINE_COMPRESSION. How a job's tensors travel to the servers and
  // back unless their declaration says otherwise (the shims' compression
  // argument): "none" (default), "fp16", "bf16", "int8", "onebit", "topk:R"
  // or "randomk:R" with R below 0.5 (compression/compressor.h), with error
  // feedback on workers and servers. It applies to fp32 tensors of at least
  // SYNCLINE_MIN_COMPRESS_BYTES, in bsp and osp modes; workers that compress
  // one tensor differently end the job, naming it.
  std::string compression = "none";
  // SYNCLINE_MIN_COMPRESS_BYTES | BYTEPS_MIN_COMPRESS_BYTES. Smaller tensors
  // travel uncompressed, whatever their declaration asks: what a small
  // tensor costs is its latency, not its bytes. Default 64 KiB.
  uint64_t min_compress_bytes = 64ull << 10;
  // SYNCLINE_SYNC_MODE. How workers synchronize, one mode for the whole job
  // (every node must have the same; the scheduler ends a job whose nodes
  // differ, naming the setting): "bsp" (every step's gradients are summed
  // before the step's update), "osp" (framework shims: every step updates
  // with the local gradient; every SYNCLINE_OSP_PERIOD steps the model's
  // change is summed while the next period computes, then merged: at most
  // one period stale; raw push_pulls are refused), "ssp" (bounded
  // staleness: a push adds to the server's running value of the key and a
  // pull of round r returns it once every worker has pushed round
  // r - SYNCLINE_SSP_STALENESS; the shims push model changes and pull the
  // model) or "async" (as SYNCLINE_ASYNC). Default bsp.
  std::string sync_mode = "bsp";
  // SYNCLINE_OSP_PERIOD. In osp mode, local steps between the starts of two
  // synchronizations. Larger: less traffic, staler models. 0 (default): the
  // shims choose it from measurement, the fewest steps in which a
  // synchronization comes back (so that no step waits for the network), the
  // same on every worker.
  int osp_period = 0;
  // SYNCLINE_SSP_STALENESS. In ssp mode, k: how many rounds a worker may run
  // ahead of the slowest (a pull of round r waits for every worker's push of
  // round r - k). 0 reads every round complete; larger rides out longer
  // stragglers with staler models. Default 2.
  int ssp_staleness = 2;
  // SYNCLINE_ASYNC | BYTEPS_ENABLE_ASYNC. Servers apply each push at once and
  // pulls return the latest value, instead of per-round synchronous sums.
  // Set, it is SYNCLINE_SYNC_MODE=async; SYNCLINE_SYNC_MODE=async sets it.
  bool async = false;
  // SYNCLINE_DETERMINISTIC. Servers sum in worker-rank order once all pushes of
  // a round are in, so results are bit-identical run to run (costs memory:
  // one buffer per worker per chunk in flight, and summation starts later).
  bool deterministic = false;
  // SYNCLINE_LOCAL_REDUCE. The workers of one host (worker/local_reduce.h)
  // sum their chunks among themselves first and push one copy per host: each
  // key is pushed and pulled by one of them, which passes the sum on. 0: flat,
  // every worker pushes and pulls every chunk (for comparison). bsp and osp
  // only (LocalReduceApplies).
  bool local_reduce = true;
  // SYNCLINE_HEARTBEAT_INTERVAL_MS | PS_HEARTBEAT_INTERVAL (seconds). How often
  // nodes report to the scheduler.
  int heartbeat_interval_ms = 1000;
  // SYNCLINE_HEARTBEAT_TIMEOUT_MS | PS_HEARTBEAT_TIMEOUT (seconds). A node
  // silent for this long is declared dead and the job is aborted, naming it.
  // Lower detects failures sooner; too low aborts jobs on a busy machine.
  int heartbeat_timeout_ms = 10000;
  // SYNCLINE_STARTUP_TIMEOUT_MS. How long the scheduler waits for every node
  // to register, and a node waits for the address book.
  int startup_timeout_ms = 120000;
  // SYNCLINE_REQUEST_TIMEOUT_MS. Deadline of any single blocking call
  // (push_pull wait, barrier, declare). Default 10 min: generous on purpose;
  // dead peers are detected sooner by heartbeats.
  int request_timeout_ms = 600000;
  // SYNCLINE_STALL_TIMEOUT_MS. A worker none of whose push_pulls in flight
  // ended for this long tells the scheduler; once every worker is stalled so
  // (each waits for a push another will never make: workers that did not make
  // the same push_pull calls), the job ends naming the tensors whose call
  // counts differ. 0: never. Like Horovod's stall check (60 s).
  int stall_timeout_ms = 60000;
  // SYNCLINE_SERVER_THREADS | BYTEPS_SERVER_ENGINE_THREAD. Summation engine
  // threads per server; each key is always handled by the same thread.
  int server_threads = 2;
  // SYNCLINE_SERVER_SCHEDULE | BYTEPS_SERVER_ENABLE_SCHEDULE. Servers send
  // each worker its sums most urgent first (the priority its push carried),
  // keeping at most server_reply_window_bytes of them unacknowledged per
  // worker; the rest wait in the server, where a later urgent sum overtakes
  // them, instead of in its socket (server/reply_scheduler.h). Off: every sum
  // leaves as its round completes. Default on (BytePS: off).
  bool server_schedule = true;
  // SYNCLINE_SERVER_REPLY_WINDOW_BYTES. The window above, per worker and
  // server: reply bytes sent and not yet acknowledged by the worker. One reply
  // always goes when none is in flight. Smaller: an urgent sum waits less
  // behind others; larger: fuller links over long round trips.
  uint64_t server_reply_window_bytes = 1ull << 20;
  // SYNCLINE_SUM_THREADS | BYTEPS_OMP_THREAD_PER_GPU. Threads a single large
  // summation may be split over (oneTBB); 0 = number of cores.
  int sum_threads = 0;
  // SYNCLINE_SCHEDULING. The order in which a worker's chunks go out:
  // "priority" (most urgent first: the proxy ranks tensors by the order the
  // forward pass uses them; ties, and "fifo", go in the order posted).
  std::string scheduling = "priority";
  // SYNCLINE_SCHEDULING_CREDIT. Bytes of pushes a worker keeps in flight
  // (sent, not yet acknowledged by their server); one chunk always goes when
  // nothing is in flight. Smaller: an urgent chunk waits less behind others;
  // larger: fuller links. 0 = unlimited (every chunk goes at once). Unset:
  // BYTEPS_SCHEDULING_CREDIT if given, else 8 partitions (see
  // SchedulingCreditBytes). Credit comes back on the push's own
  // acknowledgement, never on the summed reply, which waits for every worker
  // (docs/decisions.md records the deadlock that would cause).
  std::optional<uint64_t> scheduling_credit;
  // BYTEPS_SCHEDULING_CREDIT, in BytePS's unit: partitions; 0 turns
  // scheduling off (unlimited credit), as in BytePS.
  std::optional<uint64_t> byteps_scheduling_credit;
  // SYNCLINE_AUTOTUNE. Where the framework glue reports training steps, the
  // proxy's online tuner searches the partition size and the credit from
  // measured step times (at most 28 steps), then keeps the best; every
  // worker switches at the same step. Off: the settings above hold. Ignored
  // with SYNCLINE_SCHEDULING=fifo, an unlimited credit, or in async and ssp
  // modes (servers keep running values there, which a repartition would lose).
  bool autotune = true;
  // SYNCLINE_CROSS_ITERATION. Framework shims' cross-iteration overlap
  // (ByteScheduler): each parameter's update runs as soon as its own sum is
  // back, and the next forward pass starts a layer once that layer's
  // parameters are updated, instead of after a barrier on the whole model.
  // The runtime itself does not use it (syncline.torch's DistributedOptimizer does).
  bool cross_iteration = false;
  // SYNCLINE_TRACE | BYTEPS_TRACE_ON. Each worker writes a Chrome-trace JSON
  // (open it in Perfetto) of every chunk's stages and of the compute spans
  // the framework glue reports, to SYNCLINE_TRACE_DIR/worker-<rank>.json at
  // shutdown. Off: no event is recorded.
  bool trace = false;
  // SYNCLINE_TRACE_DIR | BYTEPS_TRACE_DIR. Where traces go.
  std::string trace_dir = ".";
  // SYNCLINE_TRACE_START_STEP / _END_STEP | BYTEPS_TRACE_START_STEP / _END_STEP.
  // Training steps (counted by the framework glue from 0) to record; bounds
  // the trace's memory on long runs. Default: steps 10 to 20, as BytePS.
  int64_t trace_start_step = 10;
  int64_t trace_end_step = 20;
  // SYNCLINE_METRICS_PORT. The port this process serves Prometheus metrics
  // on (GET /metrics); 0 = no metrics server (default). Every process of a
  // job needs its own port on one host: pslaunch --metrics-port hands them out.
  int metrics_port = 0;
  // SYNCLINE_METRICS_HOST. The IPv4 address the metrics server binds; the
  // default, every interface, lets a Prometheus on another machine scrape.
  std::string metrics_host = "0.0.0.0";
  // SYNCLINE_LOG_LEVEL | BYTEPS_LOG_LEVEL. trace, debug, info, warn, error, off.
  std::string log_level = "info";

  // Reads settings from `env`. Unknown SYNCLINE_* names and malformed or
  // out-of-range values are errors naming the variable; unknown BytePS/DMLC
  // names are reported in `warnings`.
  static Result<Settings> FromEnvironment(const Environment& env,
                                          std::vector<std::string>* warnings = nullptr);
  // Checks cross-field constraints (ranges, worker_rank < num_workers, ...).
  Status Validate() const;
  // The scheduler's address as a transport URI ("tcp://host:port").
  std::string SchedulerAddress() const;
  // The credit in bytes (0 = unlimited), from SYNCLINE_SCHEDULING_CREDIT,
  // else BYTEPS_SCHEDULING_CREDIT partitions, else kDefaultCreditPartitions.
  uint64_t SchedulingCreditBytes() const;
  // A server's reply window per worker in bytes; 0 = no window, replies
  // leave as rounds complete (server_schedule off).
  uint64_t ServerReplyWindowBytes() const { return server_schedule ? server_reply_window_bytes : 0; }
  // Whether the workers of a host sum locally (worker/local_reduce.h): with
  // local_reduce, in the modes that sum whole rounds (bsp, osp). In ssp and
  // async a worker's pushes must not wait for its host's others (that would
  // tie them in step); each pushes its own there.
  bool LocalReduceApplies() const { return local_reduce && !async && sync_mode != "ssp" && sync_mode != "async"; }
  // The largest chunk a node of this job sends or takes: partition_bytes, or
  // the online tuner's largest partition if that is larger. Servers and
  // workers refuse larger frames at the socket (transport/factory.h), and the
  // scheduler refuses declarations with larger chunks.
  uint64_t LargestChunkBytes() const;
};

// The credit, in partitions, when neither SYNCLINE_ nor BYTEPS_SCHEDULING_CREDIT is set.
constexpr uint64_t kDefaultCreditPartitions = 8;

// The largest partition the online tuner tries (proxy/tuner.h).
constexpr uint64_t kLargestTunedPartitionBytes = uint64_t{4} << 20;

// The largest SYNCLINE_SSP_STALENESS: well within the rounds a server keeps
// open per key (server/key_store.h).
constexpr int kMaxSspStaleness = 64;

}  // namespace syncline
