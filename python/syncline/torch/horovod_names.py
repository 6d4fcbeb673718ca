"""The collectives of horovod.torch under Horovod's names, so that a Horovod script moves over by its import.

byteps.torch calls a sum across workers push_pull; Horovod calls it allreduce, with a reduction op
(Average, Sum) and scale factors, and adds allgather. These are those calls over Syncline's
push_pull and broadcast, with Horovod's arguments. What differs: broadcast and allgather are not
differentiable, and Adasum (Horovod's adaptive summation) has no counterpart on a parameter server
and is refused with that reason, as allreduce is in osp, ssp and async modes.
"""
import torch

from syncline import _session
from syncline.reduce_ops import (Adasum, Average, Sum, allreduce_averages, check_exact_integers,  # noqa: F401
                                 scaled, unsupported_allreduce_dtype)
from syncline.torch import ops
from syncline.torch.broadcast import broadcast_object, broadcast_tensor_, check_root
from syncline.torch.compression import Compression


INTEGER_DTYPES = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)


class ExactIntegers:
    """A compressor (compress/decompress) that carries an integer tensor's sum exactly through a
    float64 push_pull: each value as a float64 (int64: its high 32 bits, signed, and its low 32 bits,
    as two), so each sum stays below 2^53 with up to 2^20 workers. The sum comes back in the
    tensor's dtype, wrapping on overflow as integer arithmetic does; averaged, divided by `divisor`
    (the number of workers) and rounded toward zero, as horovod.torch averages integers."""

    native = "none"  # exact: never the job's SYNCLINE_COMPRESSION

    def __init__(self, divisor=1):
        self.divisor = divisor

    @staticmethod
    def compress(tensor):
        if tensor.dtype == torch.int64:
            return torch.stack(((tensor >> 32).to(torch.float64), (tensor & 0xFFFFFFFF).to(torch.float64))), tensor.dtype
        return tensor.to(torch.float64), tensor.dtype

    def decompress(self, summed, dtype):
        if dtype == torch.int64:
            total = (summed[0].to(torch.int64) << 32) + summed[1].to(torch.int64)
        else:
            total = summed.to(torch.int64)
        if self.divisor != 1:
            total = torch.div(total, self.divisor, rounding_mode="trunc")
        return total.to(dtype)

    @staticmethod
    def wire_dtype(dtype):
        return torch.float64


def _sum_form(tensor, average, compression, prescale_factor, postscale_factor):
    """push_pull's average flag and compressor for allreduce of `tensor`."""
    if not isinstance(tensor, torch.Tensor) or tensor.dtype.is_floating_point:
        return average, scaled(compression, prescale_factor, postscale_factor)
    if tensor.dtype not in INTEGER_DTYPES:
        raise unsupported_allreduce_dtype(str(tensor.dtype), [str(d) for d in ops.SUPPORTED_DTYPES],
                                          [str(d) for d in INTEGER_DTYPES])
    check_exact_integers(tensor.dtype, prescale_factor, postscale_factor, compression is not Compression.none)
    return False, ExactIntegers(_session.current().worker.size if average else 1)


def allreduce(tensor, average=None, name=None, compression=Compression.none, op=None, prescale_factor=1.0,
              postscale_factor=1.0):
    """The average (op=Average, the default) or sum (op=Sum) of `tensor` over the workers, as a new
    tensor; differentiable (the gradient is allreduced alike). `prescale_factor` multiplies the
    tensor before the sum, `postscale_factor` the result after it. Integer tensors are summed
    exactly (ExactIntegers), and their average is rounded toward zero, as horovod.torch's."""
    average, form = _sum_form(tensor, allreduce_averages(op, average), compression, prescale_factor, postscale_factor)
    return ops.push_pull(tensor, average, name, compression=form)


def allreduce_async(tensor, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0):
    """Starts allreduce; returns a handle for synchronize() (or poll())."""
    average, form = _sum_form(tensor, allreduce_averages(op, average), Compression.none, prescale_factor,
                              postscale_factor)
    return ops.push_pull_async(tensor, average, name, compression=form)


def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0):
    """Starts allreduce into `tensor` itself; returns a handle for synchronize(), which returns `tensor`."""
    average, form = _sum_form(tensor, allreduce_averages(op, average), Compression.none, prescale_factor,
                              postscale_factor)
    return ops.push_pull_async_inplace(tensor, average, name, compression=form)


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0):
    """allreduce into `tensor` itself; returns it."""
    return ops.synchronize(allreduce_async_(tensor, average, name, op, prescale_factor, postscale_factor))


def broadcast_(tensor, root_rank, name=None):
    """Overwrites `tensor` with root_rank's, exactly (any dtype); returns it."""
    check_root(root_rank)
    if name is None:
        name = _session.current().unnamed("tensor", str(tensor.dtype).split(".")[-1], tensor.shape, "none")
    broadcast_tensor_(tensor, root_rank, "broadcast." + name)
    return tensor


def broadcast(tensor, root_rank, name=None):
    """root_rank's `tensor`, as a new tensor on every worker (exactly; any dtype; not differentiable)."""
    return broadcast_(tensor.detach().clone(), root_rank, name)


def allgather_object(obj, name=None):
    """Every worker's `obj` (picklable), as a list in rank order."""
    return [broadcast_object(obj, root) for root in range(_session.current().worker.size)]


def allgather(tensor, name=None):
    """The workers' tensors concatenated along the first dimension, in rank order, on every worker.

    The first dimension may differ from worker to worker; the others and the dtype must agree. Exact
    for every dtype. Each worker's tensor is one broadcast (for metrics, predictions and other small
    tensors: gradients go through allreduce)."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"allgather takes a torch.Tensor, not {type(tensor).__name__}")
    if tensor.dim() == 0:
        raise ValueError("allgather needs a tensor of at least one dimension: it concatenates along the first")
    parts = allgather_object(tensor.detach().cpu().contiguous(), name)
    for part in parts:
        if part.dtype != tensor.dtype or part.shape[1:] != tensor.shape[1:]:
            shapes = ", ".join(f"rank {r}: {p.dtype} {list(p.shape)}" for r, p in enumerate(parts))
            raise ValueError(f"allgather{f' {name!r}' if name else ''}: the workers' tensors must agree in dtype "
                             f"and in every dimension but the first ({shapes})")
    return torch.cat(parts).to(tensor.device)
