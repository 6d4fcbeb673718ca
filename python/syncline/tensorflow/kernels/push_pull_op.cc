// SynclinePushPull: a TensorFlow op that sums a tensor across the job's
// workers through libsyncline, with no Python on the way (syncline.tensorflow
// uses it when the package's install step could build it against the
// TensorFlow it found; ops.py falls back to tf.numpy_function otherwise).
//
// It is an asynchronous kernel: it starts the push_pull and returns; the
// worker's done callback completes it, so no TensorFlow thread waits. The sum
// goes into the input's own buffer when TensorFlow lets the op take it over
// (no other reader: usual for a gradient inside a tf.function), else into a
// new output tensor; the input is then only read.
//
// This library does not link libsyncline: the functions it calls, and the
// worker, come as an attribute (the address of a KernelApi table the Python
// package fills from the libsyncline it loaded: syncline._capi.KernelApi), so
// the two never share symbols (their protobuf copies in particular) and one
// libsyncline serves every framework. The table outlives the worker: shutdown
// clears its worker, and an op run after it fails saying so.
#include <cstdint>
#include <string>

#include "proxy/c_api.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace syncline_tf {

using tensorflow::AsyncOpKernel;
using tensorflow::OpKernelConstruction;
using tensorflow::OpKernelContext;
using tensorflow::Status;

// Laid out as syncline._capi.KernelApi (ctypes) fills it.
struct KernelApi {
  int (*push_pull_to)(syncline_worker* w, uint32_t id, const void* input, void* output, int average,
                      int64_t priority, syncline_done_fn done, void* user, syncline_op** op_out);
  const char* (*last_error)(void);
  syncline_worker* worker;  // null once the worker shut down
};

REGISTER_OP("SynclinePushPull")
    .Input("tensor: T")
    .Output("sum: T")
    .Attr("T: {float, double, half, bfloat16}")
    .Attr("api: int")        // address of a KernelApi
    .Attr("tensor_id: int")  // the declared tensor, of the input's dtype and size
    .Attr("average: bool = false")
    .Attr("priority: int = 0")
    .SetIsStateful()
    .SetShapeFn(tensorflow::shape_inference::UnchangedShape);

class PushPullOp : public AsyncOpKernel {
 public:
  explicit PushPullOp(OpKernelConstruction* c) : AsyncOpKernel(c) {
    int64_t api = 0, tensor_id = 0;
    OP_REQUIRES_OK(c, c->GetAttr("api", &api));
    OP_REQUIRES_OK(c, c->GetAttr("tensor_id", &tensor_id));
    OP_REQUIRES_OK(c, c->GetAttr("average", &average_));
    OP_REQUIRES_OK(c, c->GetAttr("priority", &priority_));
    OP_REQUIRES(c, api != 0 && tensor_id >= 0 && tensor_id <= UINT32_MAX,
                tensorflow::errors::InvalidArgument("SynclinePushPull: no Syncline worker (call init first)"));
    api_ = reinterpret_cast<const KernelApi*>(api);
    tensor_id_ = static_cast<uint32_t>(tensor_id);
  }

  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    syncline_worker* worker = __atomic_load_n(&api_->worker, __ATOMIC_ACQUIRE);
    OP_REQUIRES_ASYNC(ctx, worker != nullptr,
                      tensorflow::errors::FailedPrecondition(
                          "Syncline was shut down: no push_pull may follow shutdown() (nor run a function traced "
                          "before it)"),
                      done);
    const tensorflow::Tensor& input = ctx->input(0);
    tensorflow::Tensor* output = nullptr;
    OP_REQUIRES_OK_ASYNC(ctx, ctx->forward_input_or_allocate_output({0}, 0, input.shape(), &output), done);
    const void* in = input.tensor_data().data();
    void* out = const_cast<char*>(output->tensor_data().data());
    auto* pending = new Pending{ctx, std::move(done)};
    // The same buffer for both: an in-place sum (libsyncline then waits for
    // the transport to let go of the pushed bytes before writing the result).
    const int code = api_->push_pull_to(worker, tensor_id_, in, out, average_ ? 1 : 0, priority_, &Finish,
                                        pending, nullptr);
    if (code != 0) {
      const char* message = api_->last_error();
      Finish(pending, code, message);
    }
  }

 private:
  struct Pending {
    OpKernelContext* ctx;
    DoneCallback done;
  };
  // libsyncline's done callback (on one of its threads), or the failed start.
  static void Finish(void* user, int status, const char* message) {
    Pending* p = static_cast<Pending*>(user);
    if (status != 0)
      p->ctx->SetStatus(tensorflow::errors::Aborted("Syncline push_pull failed: ", message ? message : "unknown error"));
    DoneCallback done = std::move(p->done);
    delete p;
    done();
  }

  const KernelApi* api_ = nullptr;
  uint32_t tensor_id_ = 0;
  bool average_ = false;
  int64_t priority_ = 0;
};

REGISTER_KERNEL_BUILDER(Name("SynclinePushPull").Device(tensorflow::DEVICE_CPU), PushPullOp);

}  // namespace syncline_tf
