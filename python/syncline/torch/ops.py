"""push_pull of torch tensors: the collective calls of syncline.torch.

Tensors reach libsyncline by their memory address (`data_ptr()`), never
through a torch extension, so this works with every torch version. A tensor
on a GPU is handed over as device memory with torch's current stream, whose
queued work libsyncline's copies to the host wait for (the Python thread does
not); libsyncline copies it chunk by chunk through pinned host memory and its
sums back before the push_pull ends.
"""
import torch

from syncline import _capi, _session
from syncline._session import local_rank, local_size, rank, size  # noqa: F401  (the shim's API)
from syncline.compression import native_form
from syncline.torch.compression import Compression

_DTYPES = {
    torch.float32: _capi.FLOAT32,
    torch.float64: _capi.FLOAT64,
    torch.float16: _capi.FLOAT16,
    torch.bfloat16: _capi.BFLOAT16,
}
SUPPORTED_DTYPES = tuple(_DTYPES)


def wire_dtype(dtype):
    """Syncline's code for a torch dtype, or a TypeError listing those it carries."""
    code = _DTYPES.get(dtype)
    if code is None:
        raise _capi.unsupported_dtype(str(dtype), [str(d) for d in SUPPORTED_DTYPES])
    return code


def init():
    """Joins the job this process was launched into by pslaunch (or a BytePS-style launcher)."""
    _session.init()


def shutdown():
    """Waits for every push_pull in flight (and overlapped updates), then leaves the job."""
    _session.shutdown()


def is_initialized():
    return _session.is_initialized()


def declare(name, tensor=None, compression=Compression.none):
    """Declares a tensor name ahead of its first push_pull.

    With `tensor`, the declaration happens now (a collective: every worker
    must declare the same names in the same order). Without it, as BytePS
    allows, nothing needs doing: Syncline declares a name when it is first
    push_pulled, and every worker push_pulls its names in the same order.
    `compression`: the form its push_pulls travel in (as theirs)."""
    if not isinstance(name, str) or not name:
        raise ValueError("declare() needs a non-empty tensor name")
    session = _session.current()
    if tensor is not None:
        session.tensor_id(name, wire_dtype(tensor.dtype), tensor.shape, native_form(compression))


class _Pending:
    __slots__ = ("op", "buffer", "output", "ctx", "compression")

    def __init__(self, op, buffer, output, ctx, compression):
        self.op, self.buffer, self.output, self.ctx, self.compression = op, buffer, output, ctx, compression


def _post(tensor, output, average, name, priority, compression, model_change=False):
    session = _session.current()
    if session.sums_models and not model_change:
        session.refuse_raw_sums("push_pull")
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"push_pull takes a torch.Tensor, not {type(tensor).__name__}")
    # The caller's dtype as the compressor sends it (an integer allreduce's as float64), before compress() runs.
    wire_dtype(getattr(compression, "wire_dtype", lambda dtype: dtype)(tensor.dtype))
    sent, ctx = compression.compress(tensor.detach())
    code = wire_dtype(sent.dtype)
    if name is None:
        name = session.unnamed("push_pull", _capi.DTYPE_NAMES[code], sent.shape, native_form(compression))
    # The memory libsyncline sums in place: the output itself when it can be.
    if ctx is None and tensor is output and output.is_contiguous():
        buffer = output
    else:
        buffer = sent.contiguous()
        if buffer.data_ptr() == tensor.data_ptr():  # still the caller's memory: sum into a copy
            buffer = buffer.clone()
    stream = torch.cuda.current_stream(buffer.device).cuda_stream if buffer.is_cuda else None
    tensor_id = session.tensor_id(name, code, buffer.shape, native_form(compression))
    op = session.worker.push_pull_async(tensor_id, buffer.data_ptr(), average, priority, stream=stream)
    return session.handles.add(_Pending(op, buffer, output, ctx, compression))


def push_pull_async(tensor, average=True, name=None, version=0, priority=0, compression=Compression.none):
    """Starts summing (averaging) `tensor` across workers into a new tensor; returns a handle.

    `priority`: larger goes first. `version` is accepted as in BytePS (rounds
    are counted per name). Pass the handle to synchronize() for the result."""
    output = torch.empty_like(tensor) if isinstance(tensor, torch.Tensor) else None
    return _post(tensor, output, average, name, priority, compression)


def push_pull_async_inplace(tensor, average=True, name=None, version=0, priority=0, compression=Compression.none):
    """Like push_pull_async, writing the result into `tensor` itself."""
    return _post(tensor, tensor, average, name, priority, compression)


def post_model_change(tensor, name, priority, compression):
    """Starts averaging a model change across workers in place (the one push_pull of osp and ssp
    modes: syncline.torch.model_sync, stale_sync); returns a handle for synchronize(), which returns
    `tensor` holding the average. `tensor` is a temporary made for this call: summing in it saves
    the model's worth of copying in and out that a separate output would take."""
    return _post(tensor, tensor, True, name, priority, compression, model_change=True)


def poll(handle):
    """True once the push_pull of `handle` has ended (synchronize will not block)."""
    return _session.current().handles.get(handle).op.poll()


def synchronize(handle):
    """Waits for the push_pull of `handle` (bounded by the job's request timeout) and returns its result."""
    pending, = _session.current().handles.pop([handle], kind=_Pending)
    try:
        pending.op.wait()
    except BaseException:
        _session.keep_alive(pending)  # the transport may still write into its buffer
        raise
    result = pending.compression.decompress(pending.buffer, pending.ctx)
    if result is not pending.output:
        with torch.no_grad():
            pending.output.copy_(result)
    return pending.output


def push_pull_inplace(tensor, average=True, name=None, version=0, priority=0, compression=Compression.none):
    """Sums (averages) `tensor` across workers in place and returns it."""
    return synchronize(push_pull_async_inplace(tensor, average, name, version, priority, compression))


class _PushPull(torch.autograd.Function):
    """push_pull as an autograd op: the gradient of the result is push_pulled too."""

    @staticmethod
    def forward(ctx, tensor, average, name, version, priority, compression):
        ctx.average, ctx.name, ctx.priority, ctx.compression = average, name, priority, compression
        return synchronize(push_pull_async(tensor, average, name, version, priority, compression))

    @staticmethod
    def backward(ctx, grad_output):
        name = None if ctx.name is None else ctx.name + ".grad"
        grad = synchronize(push_pull_async(grad_output, ctx.average, name, 0, ctx.priority, ctx.compression))
        return grad, None, None, None, None, None


def push_pull(tensor, average=True, name=None, version=0, priority=0, compression=Compression.none):
    """Sums (averages) `tensor` across workers into a new tensor. Differentiable."""
    return _PushPull.apply(tensor, average, name, version, priority, compression)
