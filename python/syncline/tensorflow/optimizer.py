"""DistributedOptimizer for Keras 3 optimizers: gradients averaged across workers before each update.

The wrapper is the user's optimizer class with one method added in front: every
call to apply() (and so apply_gradients(), and model.fit's train step) first
averages the gradients through Syncline, each with the priority of its
variable's place in the model (first used in the forward pass = most urgent),
then lets the optimizer update as it would alone. Everything else (learning-rate
schedules, clipping, weight decay, EMA, gradient accumulation, saving) is the
wrapped optimizer's own.
"""

from syncline import _session
from syncline.tensorflow.ops import Compression, average_gradients, graph_builder, variable_name


class _SynclineApply:
    """Mixed in before the user's optimizer class."""

    _syncline_compression = Compression.none

    @graph_builder
    def apply(self, grads, trainable_variables=None):
        grads = list(grads)
        variables = list(trainable_variables) if trainable_variables is not None else None
        return super().apply(self._syncline_average(grads, variables), trainable_variables=variables)

    def _syncline_average(self, grads, variables):
        _session.current()  # a clear error before init(), not a failure deep in a trace
        if variables is None:  # gradients given in the order the optimizer was built with
            variables = list(self._trainable_variables)
        names = [f"{self.name}.grad.{variable_name(v, i)}" for i, v in enumerate(variables)]
        # A model lists its variables in the order its layers were built, which for
        # Sequential and functional models is the order the forward pass uses them.
        priorities = [-i for i in range(len(grads))]
        return average_gradients(grads, names, priorities, self._syncline_compression)


_DISTRIBUTED_CLASSES = {}  # the user's optimizer class -> its distributed subclass


def DistributedOptimizer(optimizer, name=None, compression=Compression.none, sparse_as_dense=True, **unsupported):
    """Makes the Keras 3 `optimizer` average its gradients across all workers before each update and
    returns it. The object itself is turned into a subclass of its class, so its configuration
    (custom schedules, callables, subclass arguments), and its state if it was already built,
    stay exactly as they were."""
    import keras

    if unsupported:
        raise TypeError(
            "DistributedOptimizer got unsupported arguments " + ", ".join(sorted(unsupported)) +
            ("; for several backward passes per update use the Keras optimizer's own "
             "gradient_accumulation_steps" if "backward_passes_per_step" in unsupported else ""))
    if not isinstance(optimizer, keras.optimizers.Optimizer):
        raise TypeError(f"DistributedOptimizer wraps a Keras 3 optimizer (keras.optimizers.Optimizer), "
                        f"not {type(optimizer).__name__}")
    if isinstance(optimizer, _SynclineApply):
        raise ValueError("this optimizer is already a Syncline DistributedOptimizer")
    if not sparse_as_dense:
        raise ValueError("Syncline sums dense tensors only: sparse_as_dense=False is not supported")
    base = type(optimizer)
    cls = _DISTRIBUTED_CLASSES.get(base)
    if cls is None:
        # Named and placed like the wrapped class, so that a saved model loads without Syncline.
        cls = _DISTRIBUTED_CLASSES[base] = type(base.__name__, (_SynclineApply, base), {"__module__": base.__module__})
    optimizer.__class__ = cls
    optimizer._syncline_compression = compression
    if name is not None:
        optimizer.name = name
    return optimizer
