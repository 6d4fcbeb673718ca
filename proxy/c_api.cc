#include "proxy/c_api.h"

#include <string>
#include <vector>

#include "common/node_main.h"
#include "proxy/scheduled_worker.h"
#include "proxy/step_tuner.h"

struct syncline_worker {
  std::unique_ptr<syncline::Worker> worker;
  std::unique_ptr<syncline::StepTuner> tuner;  // when the settings let it run
};
struct syncline_op {
  syncline::OpHandle handle;
  int64_t default_timeout_ms;  // the request timeout, from the worker's settings
};

namespace {
thread_local std::string last_error;

// The input's own memory (or no output) as output is an in-place sum.
syncline::PushPullOptions OptionsOf(const void* input, void* output, int average, int64_t priority) {
  return syncline::PushPullOptions{average != 0, priority, nullptr, output == input ? nullptr : output};
}

int Report(const syncline::Status& st) {
  last_error = st.ok() ? "" : st.ToString();
  return static_cast<int>(st.code());
}
}  // namespace

extern "C" {

const char* syncline_last_error(void) { return last_error.c_str(); }

int syncline_init(syncline_worker** out) {
  if (out == nullptr) return Report(syncline::InvalidArgument("syncline_init: out is null"));
  std::vector<std::string> warnings;
  auto settings = syncline::Settings::FromEnvironment(syncline::ProcessEnvironment(), &warnings);
  if (!settings.ok()) return Report(settings.status());
  syncline::InitNodeLogging(syncline::Role::kWorker, *settings, warnings);
  auto worker = syncline::CreateScheduledWorker(*settings);
  if (!worker.ok()) return Report(worker.status());
  *out = new syncline_worker{std::move(worker).value(), nullptr};
  if (syncline::StepTuner::Enabled(*settings))
    (*out)->tuner = std::make_unique<syncline::StepTuner>((*out)->worker.get());
  return Report(syncline::Status::Ok());
}

int syncline_rank(const syncline_worker* w) { return w ? w->worker->rank() : -1; }
int syncline_size(const syncline_worker* w) { return w ? w->worker->num_workers() : -1; }
int syncline_local_rank(const syncline_worker* w) { return w ? w->worker->local_rank() : -1; }
int syncline_local_size(const syncline_worker* w) { return w ? w->worker->local_size() : -1; }
int syncline_cross_iteration(const syncline_worker* w) { return w && w->worker->settings().cross_iteration ? 1 : 0; }
const char* syncline_sync_mode(const syncline_worker* w) {
  return w ? w->worker->settings().sync_mode.c_str() : nullptr;
}
int syncline_osp_period(const syncline_worker* w) { return w ? w->worker->settings().osp_period : -1; }

int syncline_declare(syncline_worker* w, const char* name, int dtype, uint64_t num_elements, uint32_t* id_out) {
  return syncline_declare_compressed(w, name, dtype, num_elements, nullptr, id_out);
}

int syncline_declare_compressed(syncline_worker* w, const char* name, int dtype, uint64_t num_elements,
                                const char* compression, uint32_t* id_out) {
  if (!w || !name || !id_out) return Report(syncline::InvalidArgument("syncline_declare: null argument"));
  auto type = syncline::DTypeFromWire(dtype);
  if (!type.ok()) return Report(type.status());
  syncline::DeclareOptions options;
  if (compression != nullptr) options.compression = std::string(compression);
  auto id = w->worker->Declare(name, *type, num_elements, options);
  if (!id.ok()) return Report(id.status());
  *id_out = *id;
  return Report(syncline::Status::Ok());
}

int syncline_would_compress(const syncline_worker* w, int dtype, uint64_t num_elements, const char* compression,
                            int* out) {
  if (!w || !out) return Report(syncline::InvalidArgument("syncline_would_compress: null argument"));
  auto type = syncline::DTypeFromWire(dtype);
  if (!type.ok()) return Report(type.status());
  syncline::DeclareOptions options;
  if (compression != nullptr) options.compression = std::string(compression);
  auto compressed = w->worker->WouldCompress(*type, num_elements, options);
  if (!compressed.ok()) return Report(compressed.status());
  *out = *compressed ? 1 : 0;
  return Report(syncline::Status::Ok());
}

int syncline_push_pull_to(syncline_worker* w, uint32_t id, const void* input, void* output, int average,
                          int64_t priority, syncline_done_fn done, void* user, syncline_op** op_out) {
  return syncline_push_pull_on_stream(w, id, input, output, average, priority, nullptr, done, user, op_out);
}

int syncline_push_pull_on_stream(syncline_worker* w, uint32_t id, const void* input, void* output, int average,
                                 int64_t priority, void* stream, syncline_done_fn done, void* user,
                                 syncline_op** op_out) {
  if (!w || (!op_out && !done))
    return Report(syncline::InvalidArgument("syncline_push_pull: null worker, or neither op_out nor done"));
  syncline::PushPullOptions options = OptionsOf(input, output, average, priority);
  options.stream = stream;
  if (done) {
    options.on_done = [done, user](const syncline::Status& st) {
      const std::string message = st.ok() ? "" : st.ToString();
      done(user, static_cast<int>(st.code()), message.c_str());
    };
  }
  // The worker only reads pushed memory when an output is given.
  auto handle = w->worker->PushPull(id, const_cast<void*>(input), std::move(options));
  if (!handle.ok()) return Report(handle.status());
  if (op_out) *op_out = new syncline_op{*handle, w->worker->settings().request_timeout_ms};
  return Report(syncline::Status::Ok());
}

int syncline_push_pull_async(syncline_worker* w, uint32_t id, void* data, int average, int64_t priority,
                             syncline_done_fn done, void* user, syncline_op** op_out) {
  return syncline_push_pull_to(w, id, data, nullptr, average, priority, done, user, op_out);
}

int syncline_push_pull(syncline_worker* w, uint32_t id, const void* input, void* output, int average,
                       int64_t priority) {
  if (!w) return Report(syncline::InvalidArgument("syncline_push_pull: null worker"));
  auto handle = w->worker->PushPull(id, const_cast<void*>(input), OptionsOf(input, output, average, priority));
  if (!handle.ok()) return Report(handle.status());
  return Report(handle->Wait(w->worker->DefaultDeadline()));
}

int syncline_poll(const syncline_op* op) { return op && op->handle.Done() ? 1 : 0; }

int syncline_wait(syncline_op* op, int64_t timeout_ms) {
  if (!op) return Report(syncline::InvalidArgument("syncline_wait: null op"));
  auto deadline = syncline::Deadline::AfterMs(timeout_ms < 0 ? op->default_timeout_ms : timeout_ms);
  return Report(op->handle.Wait(deadline));
}

void syncline_op_free(syncline_op* op) { delete op; }

int syncline_begin_step(syncline_worker* w) {
  if (!w) return Report(syncline::InvalidArgument("syncline_begin_step: null worker"));
  if (auto* trace = w->worker->timeline()) trace->BeginStep();
  return Report(w->tuner ? w->tuner->BeginStep() : syncline::Status::Ok());
}

int64_t syncline_now_us(void) { return syncline::Timeline::NowUs(); }

int syncline_trace_span(syncline_worker* w, const char* name, int64_t start_us, int64_t end_us) {
  if (!w || !name) return Report(syncline::InvalidArgument("syncline_trace_span: null argument"));
  if (auto* trace = w->worker->timeline()) trace->Span(name, "compute", "compute", start_us, end_us);
  return Report(syncline::Status::Ok());
}

int syncline_broadcast(syncline_worker* w, uint32_t id, void* data, int root) {
  if (!w) return Report(syncline::InvalidArgument("syncline_broadcast: null worker"));
  return Report(w->worker->Broadcast(id, data, root));
}

int syncline_barrier(syncline_worker* w) {
  if (!w) return Report(syncline::InvalidArgument("syncline_barrier: null worker"));
  return Report(w->worker->Barrier());
}

int syncline_shutdown(syncline_worker* w) {
  if (!w) return Report(syncline::InvalidArgument("syncline_shutdown: null worker"));
  syncline::Status st = w->worker->Shutdown();
  delete w;
  return Report(st);
}

}  // extern "C"
