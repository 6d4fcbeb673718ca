"""syncline.torch: train PyTorch models through Syncline's parameter servers.

The API of byteps.torch (and horovod.torch where the two share names): a
BytePS or Horovod script moves over by changing its import to
`import syncline.torch as bps` and is launched with pslaunch:

    pslaunch --workers 2 --servers 1 -- python train.py
"""
from syncline.errors import NotInitializedError, SynclineError
from syncline.torch.broadcast import broadcast_object, broadcast_optimizer_state, broadcast_parameters
from syncline.torch.compression import Compression
from syncline.torch.horovod_names import (
    Adasum,
    Average,
    Sum,
    allgather,
    allgather_object,
    allreduce,
    allreduce_,
    allreduce_async,
    allreduce_async_,
    broadcast,
    broadcast_,
)
from syncline.torch.optimizer import DistributedOptimizer
from syncline.torch.ops import (
    SUPPORTED_DTYPES,
    declare,
    init,
    is_initialized,
    local_rank,
    local_size,
    poll,
    push_pull,
    push_pull_async,
    push_pull_async_inplace,
    push_pull_inplace,
    rank,
    shutdown,
    size,
    synchronize,
)
from syncline.torch.parallel import DistributedDataParallel

__all__ = [
    "Adasum", "Average", "Compression", "DistributedDataParallel", "DistributedOptimizer", "NotInitializedError",
    "SUPPORTED_DTYPES", "Sum", "SynclineError", "allgather", "allgather_object", "allreduce", "allreduce_",
    "allreduce_async", "allreduce_async_", "broadcast", "broadcast_", "broadcast_object", "broadcast_optimizer_state",
    "broadcast_parameters", "declare", "init", "is_initialized", "local_rank", "local_size", "poll", "push_pull",
    "push_pull_async", "push_pull_async_inplace", "push_pull_inplace", "rank", "shutdown", "size", "synchronize",
]
