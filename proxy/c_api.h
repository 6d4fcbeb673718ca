/* The C API of libsyncline (build/lib/libsyncline.so), for framework shims
 * (PyTorch, TensorFlow) and other languages: it reaches tensors through their
 * memory only, so one build serves every framework version. Every call
 * returns 0 on success or a nonzero status code, with the message in
 * syncline_last_error(). Settings come from the environment (SYNCLINE_* or
 * the BytePS/DMLC names); chunks go through the scheduling proxy's credit
 * scheduler as those settings say. */
#ifndef SYNCLINE_PROXY_C_API_H_
#define SYNCLINE_PROXY_C_API_H_

#include <stdint.h>

#define SYNCLINE_EXPORT __attribute__((visibility("default")))

#ifdef __cplusplus
extern "C" {
#endif

typedef struct syncline_worker syncline_worker;
typedef struct syncline_op syncline_op;

enum syncline_dtype { SYNCLINE_FLOAT32 = 1, SYNCLINE_FLOAT64 = 2, SYNCLINE_FLOAT16 = 3, SYNCLINE_BFLOAT16 = 4 };

/* Called once when a push_pull ends, with 0 or its status code (the message
 * is in `message`, valid during the call). It runs on a Syncline thread:
 * quick, non-blocking work only (set a flag, post to a queue). */
typedef void (*syncline_done_fn)(void* user, int status, const char* message);

/* The message of the last failed call on this thread ("" if none). */
SYNCLINE_EXPORT const char* syncline_last_error(void);

SYNCLINE_EXPORT int syncline_init(syncline_worker** out);
SYNCLINE_EXPORT int syncline_rank(const syncline_worker* w);
SYNCLINE_EXPORT int syncline_size(const syncline_worker* w);
/* This worker's index among the workers of its host, and their number: the
 * launcher's SYNCLINE_LOCAL_RANK/_SIZE (BYTEPS_LOCAL_*) where given, else from
 * registration (host identity and SYNCLINE_HOST_LABEL; control/local_group.h). */
SYNCLINE_EXPORT int syncline_local_rank(const syncline_worker* w);
SYNCLINE_EXPORT int syncline_local_size(const syncline_worker* w);
/* 1 if the framework glue should overlap iterations (SYNCLINE_CROSS_ITERATION), else 0. */
SYNCLINE_EXPORT int syncline_cross_iteration(const syncline_worker* w);
/* The job's synchronization mode (SYNCLINE_SYNC_MODE): "bsp", "osp", "ssp"
 * or "async"; null without a worker. Framework glue runs osp itself; in ssp
 * and async a push_pull returns the servers' running total (ssp: at most
 * SYNCLINE_SSP_STALENESS rounds behind the slowest worker). */
SYNCLINE_EXPORT const char* syncline_sync_mode(const syncline_worker* w);
/* In osp mode, the local steps between two synchronizations (SYNCLINE_OSP_PERIOD);
 * 0: the glue chooses it from measurement. */
SYNCLINE_EXPORT int syncline_osp_period(const syncline_worker* w);
/* Declares a tensor (a collective: every worker declares it alike); its
 * chunks travel as the job's SYNCLINE_COMPRESSION says (fp32 tensors). */
SYNCLINE_EXPORT int syncline_declare(syncline_worker* w, const char* name, int dtype, uint64_t num_elements,
                                     uint32_t* id_out);
/* As syncline_declare, with the tensor's own compression: "none", "fp16",
 * "bf16", "int8", "onebit", "topk:R", "randomk:R" (R below 0.5), or null for
 * the job's. Tensors below SYNCLINE_MIN_COMPRESS_BYTES travel uncompressed;
 * a compression the dtype or the sync mode cannot take fails with the reason.
 * A compressed tensor cannot be broadcast (syncline_broadcast refuses it). */
SYNCLINE_EXPORT int syncline_declare_compressed(syncline_worker* w, const char* name, int dtype,
                                                uint64_t num_elements, const char* compression, uint32_t* id_out);
/* Sets *out to 1 if a tensor declared so (compression as in
 * syncline_declare_compressed, null for the job's) would travel compressed,
 * else 0; a compression it could not take fails with the reason. */
SYNCLINE_EXPORT int syncline_would_compress(const syncline_worker* w, int dtype, uint64_t num_elements,
                                            const char* compression, int* out);
/* Starts an in-place sum of `data` across workers. `priority`: larger goes
 * first. `done` (may be null) is called once when it ends. `op_out` (may be
 * null when `done` is given) receives a handle for syncline_poll and
 * syncline_wait, to free with syncline_op_free. `data` must stay valid and
 * untouched until the operation ended. */
SYNCLINE_EXPORT int syncline_push_pull_async(syncline_worker* w, uint32_t id, void* data, int average,
                                             int64_t priority, syncline_done_fn done, void* user,
                                             syncline_op** op_out);
/* As syncline_push_pull_async, but the sum goes into `output` (host memory of
 * the tensor's size) and `input` is only read: for callers whose tensors are
 * immutable, saving a copy per call. Both must stay valid until it ended.
 * `output` == `input` is an in-place sum, as syncline_push_pull_async. */
SYNCLINE_EXPORT int syncline_push_pull_to(syncline_worker* w, uint32_t id, const void* input, void* output,
                                          int average, int64_t priority, syncline_done_fn done, void* user,
                                          syncline_op** op_out);
/* As syncline_push_pull_to, for device memory made by work queued on the
 * framework's `stream` (a cudaStream_t on the tensor's device; null: the
 * device's default stream): each chunk is copied to the host once that work
 * has run, so the caller need not synchronise the stream first. The sums are
 * on the device when the operation ends. Host memory ignores `stream`. */
SYNCLINE_EXPORT int syncline_push_pull_on_stream(syncline_worker* w, uint32_t id, const void* input, void* output,
                                                 int average, int64_t priority, void* stream, syncline_done_fn done,
                                                 void* user, syncline_op** op_out);
/* syncline_push_pull_to and syncline_wait in one call, for a caller that
 * waits at once (an eager framework call): starts the sum of `input` into
 * `output` (null or the same pointer: in place, `input` is then written)
 * and returns when it has ended, or fails after the configured request
 * timeout. After a failure the operation may still be under way: both
 * buffers must then stay valid for good. */
SYNCLINE_EXPORT int syncline_push_pull(syncline_worker* w, uint32_t id, const void* input, void* output, int average,
                                       int64_t priority);
/* 1 if the operation has ended (syncline_wait would return at once), else 0. */
SYNCLINE_EXPORT int syncline_poll(const syncline_op* op);
/* Waits up to timeout_ms (< 0: the configured request timeout); the op stays
 * valid either way (a timeout can be waited on again). */
SYNCLINE_EXPORT int syncline_wait(syncline_op* op, int64_t timeout_ms);
/* Frees the handle (the operation itself goes on if it has not ended). */
SYNCLINE_EXPORT void syncline_op_free(syncline_op* op);
/* A training step begins (framework glue: at the start of each step, on
 * every worker). Drives the online tuner (SYNCLINE_AUTOTUNE: while it
 * searches, this is a collective that may switch partition and credit) and
 * the trace's step range. */
SYNCLINE_EXPORT int syncline_begin_step(syncline_worker* w);
/* The trace's clock, in microseconds, and a compute span on the worker's
 * trace (a no-op when tracing is off). */
SYNCLINE_EXPORT int64_t syncline_now_us(void);
SYNCLINE_EXPORT int syncline_trace_span(syncline_worker* w, const char* name, int64_t start_us, int64_t end_us);
SYNCLINE_EXPORT int syncline_broadcast(syncline_worker* w, uint32_t id, void* data, int root);
SYNCLINE_EXPORT int syncline_barrier(syncline_worker* w);
/* Shuts the worker down and frees it. */
SYNCLINE_EXPORT int syncline_shutdown(syncline_worker* w);

#ifdef __cplusplus
}
#endif

#endif /* SYNCLINE_PROXY_C_API_H_ */
