/* The C API of libsyncline, for framework shims (PyTorch, TensorFlow) and
 * other languages. Every call returns 0 on success or a nonzero status code
 * (see syncline_status_code), with the message in syncline_last_error().
 * Settings come from the environment (SYNCLINE_* or the BytePS/DMLC names). */
#ifndef SYNCLINE_WORKER_C_API_H_
#define SYNCLINE_WORKER_C_API_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct syncline_worker syncline_worker;
typedef struct syncline_op syncline_op;

enum syncline_dtype { SYNCLINE_FLOAT32 = 1, SYNCLINE_FLOAT64 = 2, SYNCLINE_FLOAT16 = 3, SYNCLINE_BFLOAT16 = 4 };

/* The message of the last failed call on this thread ("" if none). */
const char* syncline_last_error(void);

int syncline_init(syncline_worker** out);
int syncline_rank(const syncline_worker* w);
int syncline_size(const syncline_worker* w);
int syncline_declare(syncline_worker* w, const char* name, int dtype, uint64_t num_elements, uint32_t* id_out);
/* Starts an in-place sum of `data` across workers; wait with syncline_wait. */
int syncline_push_pull_async(syncline_worker* w, uint32_t id, void* data, int average, syncline_op** op_out);
/* Waits up to timeout_ms (< 0: the configured request timeout), then frees the op. */
int syncline_wait(syncline_op* op, int64_t timeout_ms);
int syncline_broadcast(syncline_worker* w, uint32_t id, void* data, int root);
int syncline_barrier(syncline_worker* w);
/* Shuts the worker down and frees it. */
int syncline_shutdown(syncline_worker* w);

#ifdef __cplusplus
}
#endif

#endif /* SYNCLINE_WORKER_C_API_H_ */
