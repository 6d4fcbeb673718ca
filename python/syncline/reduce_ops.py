"""Horovod's reduction ops (op=Average, Sum, Adasum) for both shims' allreduce and optimizers: which
of them Syncline runs, and how (the servers average or sum)."""
import enum

from syncline import _session


class ReduceOp(enum.Enum):
    """How allreduce and DistributedOptimizer(op=...) combine the workers' tensors."""
    AVERAGE = "Average"
    SUM = "Sum"
    ADASUM = "Adasum"


Average, Sum, Adasum = ReduceOp.AVERAGE, ReduceOp.SUM, ReduceOp.ADASUM


def averages(op, average=None):
    """Whether `op` (Horovod's op= argument; `average`, its older spelling) averages (True) or sums
    (False); ValueError for what Syncline cannot do."""
    if average is not None and average not in (True, False):
        raise TypeError(f"average= takes True or False, not {average!r} (a name goes in name=)")
    if op is not None and average is not None:
        raise ValueError("pass op= or average=, not both (op supersedes average, as in Horovod)")
    if average is not None:
        return bool(average)
    if op is None or op is ReduceOp.AVERAGE:
        return True
    if op is ReduceOp.SUM:
        return False
    if op is ReduceOp.ADASUM:
        raise ValueError("op=Adasum is not supported: Syncline's servers add the workers' tensors, and Adasum's "
                         "pairwise adaptive combination is not a sum; use op=Average (or op=Sum)")
    raise ValueError(f"op={op!r} is not a reduction Syncline runs: use the shim's Average or Sum")


def allreduce_averages(op, average):
    """averages(op, average) for an allreduce call, refused where a sum would not be this call's:
    where the job sums model changes (osp, ssp), and in async mode."""
    _session.current().refuse_raw_sums("allreduce", in_async=True)
    return averages(op, average)


class Scaled:
    """A compressor (the shims' compress/decompress pair) that multiplies each tensor by `pre` before
    it is sent and the result by `post` once it is back: Horovod's prescale and postscale factors,
    and its gradient_predivide_factor f as pre = 1/f, post = f. Split so, an average of float16
    values sums smaller ones, which is what the factors are for. Works on torch and TensorFlow
    tensors alike; the wire dtype and libsyncline's form are the inner compressor's."""

    def __init__(self, inner, pre=1.0, post=1.0):
        self.inner, self.pre, self.post = inner, float(pre), float(post)
        self.native = getattr(inner, "native", None)

    def compress(self, tensor):
        sent, ctx = self.inner.compress(tensor * self.pre if self.pre != 1.0 else tensor)
        return sent, (ctx,)  # never None: the sum lands in a buffer of its own, scaled on return

    def decompress(self, tensor, ctx):
        result = self.inner.decompress(tensor, ctx[0])
        return result * self.post if self.post != 1.0 else result

    def wire_dtype(self, dtype):
        return self.inner.wire_dtype(dtype)


def scaled(compression, prescale_factor, postscale_factor):
    """`compression`, with Horovod's scale factors where they are not 1."""
    if prescale_factor == 1.0 and postscale_factor == 1.0:
        return compression
    return Scaled(compression, prescale_factor, postscale_factor)


def unsupported_allreduce_dtype(dtype_name, floats, integers):
    """The error for allreduce of a tensor that is neither floating point nor one of `integers`."""
    return TypeError(f"allreduce cannot sum a tensor of dtype {dtype_name}: it takes the floating-point dtypes "
                     f"{', '.join(floats)} and the integer dtypes {', '.join(integers)}")


def check_exact_integers(dtype_name, prescale_factor, postscale_factor, compressed):
    """Refuses, naming them, what an exact integer allreduce cannot apply (both shims sum integer
    tensors exactly, through float64 push_pulls of their values' 32-bit halves)."""
    if prescale_factor != 1.0 or postscale_factor != 1.0 or compressed:
        raise ValueError(f"allreduce of a {dtype_name} tensor sums it exactly: prescale_factor, postscale_factor "
                         "and compression apply to floating-point tensors")


def only_average(op, what):
    """For `what` (an optimizer or tape that averages gradients): accepts op=Average (Horovod's
    default), refuses the others with the reason."""
    if not averages(op):
        raise ValueError(f"{what} averages gradients: op=Sum is not supported there (use op=Average)")
