"""syncline.tensorflow: train TensorFlow 2 models through Syncline's parameter servers.

The API of byteps.tensorflow, and horovod.tensorflow's allreduce (with its
ops and scale factors) beside push_pull: a script moves over by its import and
is launched with pslaunch.
The same calls work eagerly and inside tf.function: push_pull goes through the
SynclinePushPull op, which the package's install step compiles against the
TensorFlow it finds (no Python on the way, no thread waiting), or, where it was
not built, through dlpack and tf.numpy_function. (Not under XLA: a jit-compiled
function cannot call out.)

This module holds the collectives; DistributedGradientTape is in .tape, the Keras 3
DistributedOptimizer in .optimizer, and the Keras callbacks in syncline.tensorflow.keras.
"""
from syncline.errors import NotInitializedError, SynclineError
from syncline.tensorflow.ops import (
    Compression,
    broadcast,
    broadcast_variables,
    init,
    is_initialized,
    local_rank,
    local_size,
    push_pull,
    rank,
    shutdown,
    size,
)
from syncline.tensorflow.horovod_names import Adasum, Average, Sum, allreduce
from syncline.tensorflow.optimizer import DistributedOptimizer
from syncline.tensorflow.tape import DistributedGradientTape

__all__ = [
    "Adasum", "Average", "Compression", "DistributedGradientTape", "DistributedOptimizer", "NotInitializedError", "Sum",
    "SynclineError", "allreduce", "broadcast", "broadcast_variables", "init", "is_initialized", "local_rank",
    "local_size", "push_pull", "rank", "shutdown", "size",
]
