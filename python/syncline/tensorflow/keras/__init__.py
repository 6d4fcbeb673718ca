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
from syncline.tensorflow import *  # noqa: F401,F403  (init, push_pull, broadcast_variables, ...)
from syncline.tensorflow import __all__ as _TENSORFLOW_API
from syncline.tensorflow.horovod_names import keras_allreduce as allreduce  # noqa: F811 (Keras's argument order)
from syncline.tensorflow.keras.callbacks import (
    BroadcastGlobalVariablesCallback,
    LearningRateWarmupCallback,
    MetricAverageCallback,
    broadcast_global_variables,
)

__all__ = [*_TENSORFLOW_API, "BroadcastGlobalVariablesCallback", "LearningRateWarmupCallback",
           "MetricAverageCallback", "broadcast_global_variables"]
