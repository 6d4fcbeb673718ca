"""Collectives of syncline.tensorflow, one path per mode. Eagerly: the tensors' memory through dlpack
into libsyncline's C calls, with no TensorFlow op at all. Inside tf.function: an op per tensor, the
compiled SynclinePushPull op (kernels/push_pull_op.cc) where the install step built it against this
TensorFlow; tf.numpy_function is the fallback where it cannot run (not built, SYNCLINE_TF_OP=0, or a
shape unknown when traced)."""
import logging
import os
import threading

import numpy as np
import tensorflow as tf
from tensorflow.python.ops import control_flow_util  # XLA detection: no public API says it

try:  # whether a gradient tape watches a tensor: no public API says it. The eager path calls the
    # function under tensorflow.python.eager.record's one-line wrapper: right after a sum each
    # Python call costs microseconds here, not the ~0.1 us of a tight loop (docs/benchmarks.md).
    from tensorflow.python import pywrap_tfe

    should_record_backprop = pywrap_tfe.TFE_Py_TapeSetShouldRecordBackprop
except (ImportError, AttributeError):  # another TensorFlow: always the differentiable path
    def should_record_backprop(tensors):
        return True

try:  # marks a function for AutoGraph to call as it is. The public do_not_convert does the same
    # through a wrapper that costs ~15 us an eager push_pull here (~100 us in all at 4 KiB).
    from tensorflow.python.autograph.impl.api import autograph_artifact as _autograph_artifact
except ImportError:  # another TensorFlow
    _autograph_artifact = tf.autograph.experimental.do_not_convert


def graph_builder(function):
    """Keeps AutoGraph out of one of the shim's entry points, which run inside users' tf.functions.
    AutoGraph rewrites Python control flow on tensors into graph ops; the shim has none (it only
    builds ops), and rewriting it and everything it calls (down to os.path.exists) costs tracing
    time and warns where it cannot."""
    return _autograph_artifact(function)

from syncline import _capi, _session
from syncline._session import local_rank, local_size, rank, size  # noqa: F401  (the shim's API)
from syncline.compression import NativeForms, NoneCompressor, native_form
from syncline.errors import SynclineError
from syncline.tensorflow.steps import GraphSteps, step_ends

_FLOATS = (tf.float32, tf.float64, tf.float16, tf.bfloat16)
SUPPORTED_DTYPES = _FLOATS  # what push_pull carries
_DTYPE_CODES = {tf.float32: _capi.FLOAT32, tf.float64: _capi.FLOAT64, tf.float16: _capi.FLOAT16,
                tf.bfloat16: _capi.BFLOAT16}
_OP_LIBRARY = "libsyncline_tf_ops.so"
_log = logging.getLogger("syncline.tensorflow")
_op_lock = threading.Lock()
_op_state = []  # [] before the first look; then [module or None]


def native_op():
    """The module of the compiled SynclinePushPull op, or None: not built (no compiler, or the
    package was installed without TensorFlow), built against another TensorFlow, or turned off
    with SYNCLINE_TF_OP=0. Says once why it is not used."""
    if _op_state:  # every push_pull asks: no lock once decided
        return _op_state[0]
    with _op_lock:
        if not _op_state:
            _op_state.append(_load_native_op())
        return _op_state[0]


def _load_native_op():
    if os.environ.get("SYNCLINE_TF_OP", "1").strip().lower() in ("0", "false", "no", "off"):
        return None  # the spellings of off common/settings.cc accepts
    path = os.path.join(_capi.native_dir(), "lib", _OP_LIBRARY)
    if not os.path.exists(path):
        _log.warning("syncline.tensorflow: %s was not built at install time; push_pull goes through "
                     "tf.numpy_function (slower for small tensors)", path)
        return None
    try:
        return tf.load_op_library(path)
    except (tf.errors.NotFoundError, OSError) as e:  # built against another TensorFlow
        _log.warning("syncline.tensorflow: cannot load %s (%s): reinstall syncline against this TensorFlow; "
                     "push_pull goes through tf.numpy_function meanwhile", path, e)
        return None


def init():
    _session.init()


def shutdown():
    _session.shutdown()


def is_initialized():
    return _session.is_initialized()


class FP16Compressor:
    """Sends floating-point tensors as float16 and restores their dtype on return (Horovod's cast,
    in TensorFlow, without error feedback)."""

    native = None

    @staticmethod
    def compress(tensor):
        if tensor.dtype.is_floating and tensor.dtype != tf.float16:
            return tf.cast(tensor, tf.float16), tensor.dtype
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor if ctx is None else tf.cast(tensor, ctx)


class Compression(NativeForms):
    """The compressors push_pull, DistributedOptimizer and DistributedGradientTape accept: `none`
    and `fp16` (Horovod's), and the forms libsyncline applies to float32 gradients with error feedback
    on workers and servers (gradients of DistributedOptimizer and DistributedGradientTape)."""

    none = NoneCompressor
    fp16 = FP16Compressor


def _check_dtype(tensor):
    if tensor.dtype not in _FLOATS:
        raise _capi.unsupported_dtype(tensor.dtype.name, [d.name for d in _FLOATS])


def refuse_xla():
    """Raises inside an XLA-compiled function, which cannot call out of its graph, saying how to avoid it."""
    if not tf.executing_eagerly() and control_flow_util.GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph()):
        error = SynclineError(
            "Syncline's push_pull cannot run inside an XLA-compiled function: compile the Keras model with "
            "jit_compile=False (model.compile(..., jit_compile=False)) or drop jit_compile=True from tf.function")
        error.ag_pass_through = True  # reaches the caller as itself, not as autograph's StagingError
        raise error


def _host_view(tensor):
    """The tensor's memory as a read-only C-contiguous numpy array, without a copy where dlpack
    allows it (CPU tensors of the dtypes numpy has); a copy otherwise (bfloat16, device tensors)."""
    try:
        return np.from_dlpack(tensor)
    except (BufferError, TypeError, RuntimeError, ValueError):
        return np.asarray(tensor.numpy(), order="C")  # a 0-d tensor's numpy() is a scalar


def _to_tensor(array):
    """A tensor over `array`'s memory (aligned: taken over without a copy), or a copy of it."""
    try:
        return tf.experimental.dlpack.from_dlpack(array.__dlpack__())
    except (BufferError, TypeError, RuntimeError, ValueError, tf.errors.InvalidArgumentError):
        return tf.convert_to_tensor(array)


def _urgency_order(priorities):
    """Positions in the order to post them: least urgent first. With priorities from the forward order
    (first used = most urgent), that is the order backward computes the gradients."""
    return sorted(range(len(priorities)), key=priorities.__getitem__)


def _push_pull_eager(session, tensors, names, average, priorities, form=None):
    """Eagerly, the one path: each tensor's memory through dlpack into libsyncline (a host copy where
    numpy cannot take it: bfloat16, device tensors), all posted before any is waited for, each sum in
    a pooled array that the returned tensor takes over. The compiled op would cost more here
    (TensorFlow runs every eager op as a one-op function, ~20 us a call, with fresh output memory)."""
    if len(tensors) == 1:  # the common call: no ordering to do
        return [_to_tensor(session.push_pull_arrays(names, [_host_view(tensors[0])], average, priorities, form)[0])]
    order = _urgency_order(priorities)
    summed = session.push_pull_arrays([names[i] for i in order], [_host_view(tensors[i]) for i in order],
                                      average, [priorities[i] for i in order], form)
    outs = [None] * len(tensors)
    for i, array in zip(order, summed):
        outs[i] = _to_tensor(array)
    return outs


def _push_pull_graph(session, tensors, names, average, priorities, form=None):
    """Inside tf.function, the one path: each tensor posted by an op of its own, so it goes out as
    soon as it is computed, declared at tracing time, after the graph's last step end. The compiled
    op where it can run (built, and every shape known when traced: its tensor is declared then);
    tf.numpy_function posts and one wait otherwise."""
    steps = GraphSteps.of(tf.compat.v1.get_default_graph())
    with tf.control_dependencies([] if steps.last_end is None else [steps.last_end]):
        outs = _post_in_graph(session, tensors, names, average, priorities, form)
    steps.sums.extend(outs)
    return outs


def _post_in_graph(session, tensors, names, average, priorities, form):
    op = native_op() if all(t.shape.is_fully_defined() for t in tensors) else None
    if op is None:
        return _push_pull_numpy_function(session, tensors, names, average, priorities, form)
    outs = [None] * len(tensors)
    api = session.worker.kernel_api()
    for i in _urgency_order(priorities):
        tensor_id = session.tensor_id(names[i], _DTYPE_CODES[tensors[i].dtype], tuple(tensors[i].shape.as_list()),
                                      form)
        outs[i] = op.syncline_push_pull(tensors[i], api=api, tensor_id=tensor_id, average=average,
                                        priority=priorities[i])
        _run_independently(outs[i])
    return outs


def _run_independently(out):
    """Lets the op of `out` start as soon as its input exists. TensorFlow's automatic control
    dependencies chain every stateful op without a resource input in program order, so each
    push_pull would wait for the one before it to come back: one tensor in flight, 7 x slower than
    MultiWorkerMirroredStrategy on the emulated cluster (issue 30). An independent op still runs
    every call; its sum is read through its output, as before."""
    manager = getattr(out.graph, "experimental_acd_manager", None)
    if manager is not None:
        manager.run_independently(out.op)


def _push_pull_numpy_function(session, tensors, names, average, priorities, form=None):
    """The graph path's fallback: a tf.numpy_function per tensor posts it, and one more waits for
    them all (each such op holds one of TensorFlow's threads while it runs)."""
    order = _urgency_order(priorities)
    handles = []
    for i in order:
        def post(array, name=names[i], priority=priorities[i]):
            array = np.asarray(array, order="C")  # keeps 0-d arrays 0-d, unlike ascontiguousarray
            output = session.outputs.take(array.shape, array.dtype)
            return np.int64(session.post_array(name, array, average, priority, output, form))

        handles.append(tf.numpy_function(post, [tensors[i]], tf.int64, stateful=True, name="SynclinePost"))

    def wait(*posted):
        return session.wait_arrays(posted)

    summed = tf.numpy_function(wait, handles, [tensors[i].dtype for i in order], stateful=True,
                               name="SynclineWait")
    if not isinstance(summed, (list, tuple)):
        summed = [summed]
    outs = [None] * len(tensors)
    for i, out in zip(order, summed):
        out.set_shape(tensors[i].shape)
        outs[i] = out
    return outs


def push_pull_list(tensors, names, average=True, priorities=None, form=None):
    """Sums (averages) each tensor across workers; the inputs are only read. One path per mode:
    eagerly, through dlpack and libsyncline's C call; inside tf.function, an op per tensor. Posts go
    least urgent first (priorities: larger is more urgent). `names` are fixed when this is called
    (at tracing time inside tf.function). `form`: the compression libsyncline applies to them
    (syncline.compression.native_form; None: the job's SYNCLINE_COMPRESSION)."""
    session = _session.current()
    refuse_xla()
    tensors = [t if isinstance(t, tf.Tensor) else tf.convert_to_tensor(t) for t in tensors]
    for t in tensors:
        _check_dtype(t)
    priorities = [0] * len(tensors) if priorities is None else list(priorities)
    if tf.executing_eagerly():
        return _push_pull_eager(session, tensors, names, average, priorities, form)
    return _push_pull_graph(session, tensors, names, average, priorities, form)


@graph_builder
def push_pull(tensor, average=True, name=None, compression=Compression.none):
    """Sums (averages) `tensor` across workers and returns the result. Differentiable: the gradient
    of the result is push_pulled too."""
    session = _session.current()
    if session.sums_models:
        session.refuse_raw_sums("push_pull")
    if not isinstance(tensor, tf.Tensor):
        tensor = tf.convert_to_tensor(tensor)
    _check_dtype(tensor)
    if tf.executing_eagerly() and not should_record_backprop([tensor]):
        # No tape watches it: the plain call (custom_gradient costs ~0.3 ms a call eagerly), and
        # straight to libsyncline (push_pull_list's bookkeeping is for lists).
        uncompressed = compression is NoneCompressor  # the common call: two Python calls fewer
        sent, ctx = (tensor, None) if uncompressed else compression.compress(tensor)
        form = native_form(compression)
        if name is None:  # a call in program order (a graph's ops, below, may run in any order)
            name = session.unnamed("push_pull", sent.dtype.name, sent.shape.as_list(), form)
        out = _push_pull_eager(session, [sent], [name], average, [0], form)[0]
        return out if uncompressed else compression.decompress(out, ctx)

    if name is None:
        name = session.unnamed("push_pull")

    form = native_form(compression)

    @tf.custom_gradient
    def summed(x):
        sent, ctx = compression.compress(x)
        out = compression.decompress(push_pull_list([sent], [name], average, form=form)[0], ctx)

        def grad(dy):
            sent_dy, ctx_dy = compression.compress(dy)
            return compression.decompress(push_pull_list([sent_dy], [name + ".grad"], average, form=form)[0], ctx_dy)

        return out, grad

    return summed(tensor)


def average_gradients(grads, names, priorities, compression=Compression.none):
    """Averages each gradient across workers, compressed on the way, as push_pull_list posts them;
    `names` and `priorities` go with `grads` by position. A None stays None; an IndexedSlices (an
    embedding's gradient) is sent whole."""
    session = _session.current()
    if session.sums_models:
        session.refuse_raw_sums("averaging gradients")
    present = [i for i, g in enumerate(grads) if g is not None]
    sent, contexts = [], []
    for i in present:
        g = tf.convert_to_tensor(grads[i]) if isinstance(grads[i], tf.IndexedSlices) else grads[i]
        s, ctx = compression.compress(g)
        sent.append(s)
        contexts.append(ctx)
    out = list(grads)
    if sent:
        summed = push_pull_list(sent, [names[i] for i in present], average=True,
                                priorities=[priorities[i] for i in present], form=native_form(compression))
        summed = step_ends(summed)
        for i, s, ctx in zip(present, summed, contexts):
            out[i] = compression.decompress(s, ctx)
    return out


@graph_builder
def broadcast(tensor, root_rank, name=None):
    """root_rank's `tensor` on every worker (any dtype; floats as sums with zeros, others as bytes)."""
    session = _session.current()
    tensor = tf.convert_to_tensor(tensor)
    if name is None:
        name = (session.unnamed("broadcast", tensor.dtype.name, tensor.shape.as_list(), "none")
                if tf.executing_eagerly() else session.unnamed("broadcast"))
    floats = tensor.dtype in _FLOATS

    def run(array):
        buffer = np.array(array, copy=True, order="C")
        if floats:
            tensor_id = session.tensor_id(name, _session.array_dtype(buffer), buffer.shape, "none")  # exact
            session.broadcast_array(tensor_id, buffer, root_rank)
            return buffer
        data = session.broadcast_bytes(buffer.tobytes() if session.worker.rank == root_rank else b"", root_rank)
        return np.frombuffer(data, dtype=buffer.dtype).reshape(buffer.shape).copy()

    out = tf.numpy_function(run, [tensor], tensor.dtype, stateful=True, name="SynclineBroadcast")
    out.set_shape(tensor.shape)
    return out


def variable_name(variable, index):
    """A variable's stable name for its tensors: its Keras path, else its name and position."""
    return getattr(variable, "path", None) or f"{variable.name}.{index}"


@graph_builder
def broadcast_variables(variables, root_rank):
    """Assigns root_rank's value to each variable on every worker (eager or inside tf.function)."""
    size_ = size()
    if not isinstance(root_rank, int) or not 0 <= root_rank < size_:
        raise ValueError(f"root_rank {root_rank!r} is not a worker rank (0..{size_ - 1})")
    assigns = []
    for i, v in enumerate(variables):
        value = broadcast(tf.convert_to_tensor(v), root_rank, name=f"broadcast.{variable_name(v, i)}")
        assigns.append(v.assign(value))
    return tf.group(*assigns) if assigns and not tf.executing_eagerly() else None
