#include "common/settings.h"

#include <algorithm>

#include <charconv>
#include <functional>
#include <set>

extern char** environ;

namespace syncline {

const char* RoleName(Role role) {
  switch (role) {
    case Role::kScheduler: return "scheduler";
    case Role::kServer: return "server";
    case Role::kWorker: return "worker";
  }
  return "unknown";
}

Result<Role> ParseRole(const std::string& name) {
  if (name == "scheduler") return Role::kScheduler;
  if (name == "server") return Role::kServer;
  if (name == "worker") return Role::kWorker;
  return InvalidArgument("unknown role '" + name + "' (expected scheduler, server or worker)");
}

Environment ProcessEnvironment() {
  Environment env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string entry(*e);
    auto eq = entry.find('=');
    if (eq == std::string::npos) continue;
    env.emplace(entry.substr(0, eq), entry.substr(eq + 1));
  }
  return env;
}

namespace {

Result<long long> ParseInteger(const std::string& text, long long min, long long max) {
  long long value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty())
    return InvalidArgument("'" + text + "' is not an integer");
  if (value < min || value > max)
    return InvalidArgument(std::to_string(value) + " is out of range [" + std::to_string(min) + ", " +
                           std::to_string(max) + "]");
  return value;
}

Result<bool> ParseBool(const std::string& text) {
  static const std::set<std::string> yes{"1", "true", "yes", "on"}, no{"0", "false", "no", "off", ""};
  if (yes.count(text)) return true;
  if (no.count(text)) return false;
  return InvalidArgument("'" + text + "' is not a boolean (use 1/0, true/false, yes/no, on/off)");
}

// One setting: its canonical name, alias names (with a multiplier for
// integer aliases in other units), and how to store a parsed value.
struct Entry {
  std::string name;
  std::vector<std::pair<std::string, long long>> aliases;  // name, integer scale
  std::function<Status(Settings&, const std::string& text, long long scale)> set;
};

template <typename Field>
std::function<Status(Settings&, const std::string&, long long)> Integer(Field Settings::*field,
                                                                         long long min, long long max) {
  return [=](Settings& s, const std::string& text, long long scale) -> Status {
    // An alias in coarser units (seconds for milliseconds) may not go below the
    // canonical minimum: round that bound up, not down.
    const long long alias_min = min > 0 ? (min + scale - 1) / scale : min / scale;
    SYNCLINE_ASSIGN_OR_RETURN(long long v, ParseInteger(text, alias_min, max / scale));
    s.*field = static_cast<Field>(v * scale);
    return Status::Ok();
  };
}

// A local rank or size: also notes that the launcher gave this worker's place on its host.
std::function<Status(Settings&, const std::string&, long long)> LocalPlace(
    std::function<Status(Settings&, const std::string&, long long)> set) {
  return [=](Settings& s, const std::string& text, long long scale) -> Status {
    SYNCLINE_RETURN_IF_ERROR(set(s, text, scale));
    s.local_given = true;
    return Status::Ok();
  };
}

std::function<Status(Settings&, const std::string&, long long)> Boolean(bool Settings::*field) {
  return [=](Settings& s, const std::string& text, long long) -> Status {
    SYNCLINE_ASSIGN_OR_RETURN(bool v, ParseBool(text));
    s.*field = v;
    return Status::Ok();
  };
}

std::function<Status(Settings&, const std::string&, long long)> Text(
    std::string Settings::*field, std::set<std::string> allowed = {}) {
  return [=](Settings& s, const std::string& text, long long) -> Status {
    if (!allowed.empty() && !allowed.count(text)) {
      std::string list;
      for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
      return InvalidArgument("'" + text + "' is not one of " + list);
    }
    s.*field = text;
    return Status::Ok();
  };
}

const std::vector<Entry>& Entries() {
  static const std::vector<Entry> entries = {
      {"SYNCLINE_ROLE", {{"DMLC_ROLE", 1}},
       [](Settings& s, const std::string& text, long long) -> Status {
         SYNCLINE_ASSIGN_OR_RETURN(s.role, ParseRole(text));
         return Status::Ok();
       }},
      {"SYNCLINE_NUM_WORKERS", {{"DMLC_NUM_WORKER", 1}}, Integer(&Settings::num_workers, 1, 65535)},
      {"SYNCLINE_NUM_SERVERS", {{"DMLC_NUM_SERVER", 1}}, Integer(&Settings::num_servers, 1, 65535)},
      {"SYNCLINE_SCHEDULER_HOST", {{"DMLC_PS_ROOT_URI", 1}}, Text(&Settings::scheduler_host)},
      {"SYNCLINE_SCHEDULER_PORT", {{"DMLC_PS_ROOT_PORT", 1}}, Integer(&Settings::scheduler_port, 1, 65535)},
      {"SYNCLINE_HOST", {{"DMLC_NODE_HOST", 1}}, Text(&Settings::host)},
      {"SYNCLINE_PORT", {}, Integer(&Settings::port, 0, 65535)},
      {"SYNCLINE_WORKER_RANK", {{"DMLC_WORKER_ID", 1}}, Integer(&Settings::worker_rank, -1, 65534)},
      {"SYNCLINE_SERVER_RANK", {}, Integer(&Settings::server_rank, -1, 65534)},
      {"SYNCLINE_LOCAL_RANK", {{"BYTEPS_LOCAL_RANK", 1}}, LocalPlace(Integer(&Settings::local_rank, 0, 65534))},
      {"SYNCLINE_LOCAL_SIZE", {{"BYTEPS_LOCAL_SIZE", 1}}, LocalPlace(Integer(&Settings::local_size, 1, 65535))},
      {"SYNCLINE_HOST_LABEL", {}, Text(&Settings::host_label)},
      {"SYNCLINE_TRANSPORT", {}, Text(&Settings::transport, {"tcp", "ipc", "ucx"})},
      {"SYNCLINE_TCP_SEND_BUFFER_BYTES", {}, Integer(&Settings::tcp_send_buffer_bytes, 0, 1ll << 30)},
      {"SYNCLINE_JOB_TOKEN", {}, Text(&Settings::job_token)},
      {"SYNCLINE_ALLOW_NO_TOKEN", {}, Boolean(&Settings::allow_no_token)},
      {"SYNCLINE_ENCRYPT", {}, Boolean(&Settings::encrypt)},
      {"SYNCLINE_TF_OP", {}, Boolean(&Settings::tf_op)},
      {"SYNCLINE_NATIVE_DIR", {}, Text(&Settings::native_dir)},
      {"SYNCLINE_SHM", {}, Boolean(&Settings::shm)},
      {"SYNCLINE_SHM_BYTES", {}, Integer(&Settings::shm_bytes, 1 << 20, 1ll << 40)},
      {"SYNCLINE_PARTITION_BYTES", {{"BYTEPS_PARTITION_BYTES", 1}},
       Integer(&Settings::partition_bytes, 64, 1ll << 34)},
      {"SYNCLINE_COMPRESSION", {}, Text(&Settings::compression)},
      {"SYNCLINE_MIN_COMPRESS_BYTES", {{"BYTEPS_MIN_COMPRESS_BYTES", 1}},
       Integer(&Settings::min_compress_bytes, 0, 1ll << 40)},
      {"SYNCLINE_SYNC_MODE", {}, Text(&Settings::sync_mode, {"bsp", "osp", "ssp", "async"})},
      {"SYNCLINE_OSP_PERIOD", {}, Integer(&Settings::osp_period, 0, 1 << 20)},
      {"SYNCLINE_SSP_STALENESS", {}, Integer(&Settings::ssp_staleness, 0, kMaxSspStaleness)},
      {"SYNCLINE_ASYNC", {{"BYTEPS_ENABLE_ASYNC", 1}}, Boolean(&Settings::async)},
      {"SYNCLINE_DETERMINISTIC", {}, Boolean(&Settings::deterministic)},
      {"SYNCLINE_LOCAL_REDUCE", {}, Boolean(&Settings::local_reduce)},
      {"SYNCLINE_HEARTBEAT_INTERVAL_MS", {{"PS_HEARTBEAT_INTERVAL", 1000}},
       Integer(&Settings::heartbeat_interval_ms, 10, 3600000)},
      {"SYNCLINE_HEARTBEAT_TIMEOUT_MS", {{"PS_HEARTBEAT_TIMEOUT", 1000}},
       Integer(&Settings::heartbeat_timeout_ms, 50, 86400000)},
      {"SYNCLINE_STARTUP_TIMEOUT_MS", {}, Integer(&Settings::startup_timeout_ms, 100, 86400000)},
      {"SYNCLINE_REQUEST_TIMEOUT_MS", {}, Integer(&Settings::request_timeout_ms, 100, 86400000)},
      {"SYNCLINE_STALL_TIMEOUT_MS", {}, Integer(&Settings::stall_timeout_ms, 0, 86400000)},
      {"SYNCLINE_SERVER_THREADS", {{"BYTEPS_SERVER_ENGINE_THREAD", 1}},
       Integer(&Settings::server_threads, 1, 256)},
      {"SYNCLINE_SERVER_SCHEDULE", {{"BYTEPS_SERVER_ENABLE_SCHEDULE", 1}}, Boolean(&Settings::server_schedule)},
      {"SYNCLINE_SERVER_REPLY_WINDOW_BYTES", {}, Integer(&Settings::server_reply_window_bytes, 1, 1ll << 40)},
      {"SYNCLINE_SUM_THREADS", {{"BYTEPS_OMP_THREAD_PER_GPU", 1}}, Integer(&Settings::sum_threads, 0, 1024)},
      {"SYNCLINE_SCHEDULING", {}, Text(&Settings::scheduling, {"priority", "fifo"})},
      {"SYNCLINE_SCHEDULING_CREDIT", {}, Integer(&Settings::scheduling_credit, 0, 1ll << 40)},
      {"BYTEPS_SCHEDULING_CREDIT", {}, Integer(&Settings::byteps_scheduling_credit, 0, 1 << 20)},
      {"SYNCLINE_AUTOTUNE", {}, Boolean(&Settings::autotune)},
      {"SYNCLINE_CROSS_ITERATION", {}, Boolean(&Settings::cross_iteration)},
      {"SYNCLINE_TRACE", {{"BYTEPS_TRACE_ON", 1}}, Boolean(&Settings::trace)},
      {"SYNCLINE_TRACE_DIR", {{"BYTEPS_TRACE_DIR", 1}}, Text(&Settings::trace_dir)},
      {"SYNCLINE_TRACE_START_STEP", {{"BYTEPS_TRACE_START_STEP", 1}},
       Integer(&Settings::trace_start_step, 0, 1ll << 40)},
      {"SYNCLINE_TRACE_END_STEP", {{"BYTEPS_TRACE_END_STEP", 1}}, Integer(&Settings::trace_end_step, 0, 1ll << 40)},
      {"SYNCLINE_METRICS_PORT", {}, Integer(&Settings::metrics_port, 0, 65535)},
      {"SYNCLINE_METRICS_HOST", {}, Text(&Settings::metrics_host)},
      {"SYNCLINE_LOG_LEVEL", {{"BYTEPS_LOG_LEVEL", 1}},
       [](Settings& s, const std::string& text, long long) -> Status {
         std::string lower;
         for (char c : text) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
         static const std::set<std::string> levels{"trace", "debug", "info", "warn", "warning", "error", "off"};
         if (!levels.count(lower)) return InvalidArgument("'" + text + "' is not a log level");
         s.log_level = lower == "warning" ? "warn" : lower;
         return Status::Ok();
       }},
  };
  return entries;
}

bool StartsWith(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace

Result<Settings> Settings::FromEnvironment(const Environment& env, std::vector<std::string>* warnings) {
  Settings s;
  std::set<std::string> known;
  for (const Entry& e : Entries()) {
    known.insert(e.name);
    for (const auto& [alias, scale] : e.aliases) known.insert(alias);
    // The canonical name wins over its aliases.
    const std::string* text = nullptr;
    std::string used;
    long long scale = 1;
    if (auto it = env.find(e.name); it != env.end()) {
      text = &it->second, used = e.name;
    } else {
      for (const auto& [alias, alias_scale] : e.aliases) {
        if (auto a = env.find(alias); a != env.end()) {
          text = &a->second, used = alias, scale = alias_scale;
          break;
        }
      }
    }
    if (text == nullptr) continue;
    Status st = e.set(s, *text, scale);
    if (!st.ok()) return InvalidArgument("setting " + used + ": " + st.message());
  }
  // ps-lite's switches for its RDMA and UCX vans pick the UCX transport.
  for (const char* name : {"DMLC_ENABLE_RDMA", "DMLC_ENABLE_UCX"}) {
    known.insert(name);
    auto it = env.find(name);
    if (it == env.end()) continue;
    const bool ibverbs = std::string(name) == "DMLC_ENABLE_RDMA" && it->second == "ibverbs";  // BytePS's spelling
    Result<bool> on = ibverbs ? Result<bool>(true) : ParseBool(it->second);
    if (!on.ok()) return InvalidArgument("setting " + std::string(name) + ": " + on.status().message());
    if (*on && !env.count("SYNCLINE_TRANSPORT")) s.transport = "ucx";
  }
  for (const auto& [name, value] : env) {
    if (known.count(name)) continue;
    if (StartsWith(name, "SYNCLINE_"))
      return InvalidArgument("unknown setting " + name + " (see the settings table in README.md for the list)");
    if (warnings && (StartsWith(name, "BYTEPS_") || StartsWith(name, "DMLC_")))
      warnings->push_back(name + " is a BytePS/ps-lite setting Syncline does not use; ignored");
  }
  if (s.async && s.sync_mode != "bsp" && s.sync_mode != "async")
    return InvalidArgument("SYNCLINE_ASYNC (BYTEPS_ENABLE_ASYNC) asks for async mode, but SYNCLINE_SYNC_MODE is " +
                           s.sync_mode + ": set one of them");
  if (s.async) s.sync_mode = "async";
  s.async = s.sync_mode == "async";
  SYNCLINE_RETURN_IF_ERROR(s.Validate());
  return s;
}

Status Settings::Validate() const {
  if (worker_rank >= num_workers)
    return InvalidArgument("worker rank " + std::to_string(worker_rank) + " is not below the number of workers (" +
                           std::to_string(num_workers) + ")");
  if (server_rank >= num_servers)
    return InvalidArgument("server rank " + std::to_string(server_rank) + " is not below the number of servers (" +
                           std::to_string(num_servers) + ")");
  if (host_label.size() > kMaxHostLabelBytes)
    return InvalidArgument("SYNCLINE_HOST_LABEL is " + std::to_string(host_label.size()) + " bytes long; at most " +
                           std::to_string(kMaxHostLabelBytes));
  if (local_rank >= local_size)
    return InvalidArgument("local rank " + std::to_string(local_rank) + " is not below the local size (" +
                           std::to_string(local_size) + ")");
  if (heartbeat_timeout_ms <= heartbeat_interval_ms)
    return InvalidArgument("heartbeat timeout (" + std::to_string(heartbeat_timeout_ms) +
                           " ms) must exceed the heartbeat interval (" + std::to_string(heartbeat_interval_ms) +
                           " ms)");
  if (trace_end_step < trace_start_step)
    return InvalidArgument("trace end step (" + std::to_string(trace_end_step) + ") is before its start step (" +
                           std::to_string(trace_start_step) + ")");
  if (scheduler_host.empty()) return InvalidArgument("scheduler host is empty");
  if (host.empty()) return InvalidArgument("host is empty");
  if (encrypt && job_token.empty())
    return InvalidArgument("SYNCLINE_ENCRYPT=1 needs a job token (SYNCLINE_JOB_TOKEN): the scheduler's key derives from it");
  if (encrypt && transport == "ucx")
    return InvalidArgument("SYNCLINE_ENCRYPT=1 works on the tcp and ipc transports; UCX traffic is not encrypted "
                           "(use SYNCLINE_TRANSPORT=tcp, or turn encryption off on a sealed RDMA network)");
  if (deterministic && sync_mode == "ssp")
    return InvalidArgument("SYNCLINE_DETERMINISTIC sums each round in worker-rank order, but in ssp mode servers keep "
                           "a running total of pushes in the order they arrive: choose one");
  if (compression != "none" && (sync_mode == "ssp" || sync_mode == "async" || async))
    return InvalidArgument("SYNCLINE_COMPRESSION=" + compression + " needs whole rounds (bsp or osp): in " +
                           (sync_mode == "ssp" ? "ssp" : "async") +
                           " mode servers keep a running total, which a compressed pull would lose precision of on "
                           "every read");
  return Status::Ok();
}

uint64_t Settings::SchedulingCreditBytes() const {
  if (scheduling_credit) return *scheduling_credit;
  if (byteps_scheduling_credit) return *byteps_scheduling_credit * partition_bytes;
  return kDefaultCreditPartitions * partition_bytes;
}

uint64_t Settings::LargestChunkBytes() const { return std::max(partition_bytes, kLargestTunedPartitionBytes); }

std::string Settings::SchedulerAddress() const {
  return "tcp://" + scheduler_host + ":" + std::to_string(scheduler_port);
}

}  // namespace syncline
