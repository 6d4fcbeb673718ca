"""syncline.tensorflow.keras: Keras 3 training (model.fit) through Syncline.

The API of horovod.tensorflow.keras and byteps.tensorflow.keras: wrap the
optimizer, add the callbacks, launch with pslaunch.

    import syncline.tensorflow.keras as bps
    bps.init()
    model.compile(optimizer=bps.DistributedOptimizer(keras.optimizers.SGD(0.01 * bps.size())), ...)
    model.fit(x, y, callbacks=[bps.BroadcastGlobalVariablesCallback(0), bps.MetricAverageCallback()])

Models must be compiled without XLA (jit_compile=False; Keras already chooses
that on machines without a GPU): the collectives run outside the graph.
"""
from syncline.errors import NotInitializedError, SynclineError
from syncline.tensorflow.keras.callbacks import (
    BroadcastGlobalVariablesCallback,
    LearningRateWarmupCallback,
    MetricAverageCallback,
    broadcast_global_variables,
)
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
from syncline.tensorflow.optimizer import DistributedOptimizer

__all__ = [
    "BroadcastGlobalVariablesCallback", "Compression", "DistributedOptimizer", "LearningRateWarmupCallback",
    "MetricAverageCallback", "NotInitializedError", "SynclineError", "broadcast", "broadcast_global_variables",
    "broadcast_variables", "init", "is_initialized", "local_rank", "local_size", "push_pull", "rank", "shutdown",
    "size",
]
