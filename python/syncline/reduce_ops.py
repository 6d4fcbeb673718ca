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
    """averages(op, average) for an allreduce call, refused where the job sums model changes (osp, ssp)."""
    session = _session.current()
    if session.sums_models:
        session.refuse_raw_sums("allreduce")
    return averages(op, average)


def only_average(op, what):
    """For `what` (an optimizer or tape that averages gradients): accepts op=Average (Horovod's
    default), refuses the others with the reason."""
    if not averages(op):
        raise ValueError(f"{what} averages gradients: op=Sum is not supported there (use op=Average)")
