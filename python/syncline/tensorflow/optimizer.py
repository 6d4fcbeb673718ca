"""DistributedOptimizer for Keras 3 optimizers: gradients averaged across workers before each update.

The wrapper is the user's optimizer class with one method added in front: every
call to apply() (and so apply_gradients(), and model.fit's train step) first
averages the gradients through Syncline, each with the priority of its
variable's place in the model (first used in the forward pass = most urgent),
then lets the optimizer update as it would alone. Everything else (learning-rate
schedules, clipping, weight decay, EMA, gradient accumulation, saving) is the
wrapped optimizer's own.

In osp mode (SYNCLINE_SYNC_MODE=osp) no gradient is averaged: apply() updates
with the local gradients, and every SYNCLINE_OSP_PERIOD steps the model change
is averaged while training goes on (syncline.tensorflow.model_sync). In ssp
mode apply() updates with the local gradients, sends the change to the servers
and takes the model back, at most SYNCLINE_SSP_STALENESS steps stale
(syncline.tensorflow.stale_sync). average_models() makes every worker hold the
global model (before a checkpoint or an evaluation).
"""

import tensorflow as tf

from syncline import _session
from syncline.compression import native_form
from syncline.errors import SynclineError
from syncline.reduce_ops import Average, only_average
from syncline.tensorflow.model_sync import ModelSync
from syncline.tensorflow.stale_sync import StaleSync
from syncline.tensorflow.ops import Compression, average_gradients, graph_builder, refuse_xla, variable_name


class _SynclineApply:
    """Mixed in before the user's optimizer class."""

    _syncline_compression = Compression.none
    _syncline_model_sync = None  # osp and ssp modes: the synchronizations of this optimizer's variables

    @graph_builder
    def apply(self, grads, trainable_variables=None):
        grads = list(grads)
        variables = list(trainable_variables) if trainable_variables is not None else None
        session = _session.current()  # a clear error before init(), not a failure deep in a trace
        if session.sums_models:
            return self._syncline_apply_locally(grads, variables)
        return super().apply(self._syncline_average(grads, variables), trainable_variables=variables)

    def average_models(self):
        """In osp mode, merges the synchronization in flight and averages once more; in ssp mode, waits
        for every worker's changes and takes the model: every worker then holds the global model
        (before a checkpoint or an evaluation). A collective: every worker calls it after the same
        number of steps, eagerly (after model.fit, or from a callback). Otherwise the models are
        equal already and it does nothing."""
        if not _session.current().sums_models:
            return
        if self._syncline_model_sync is None and not self.built:
            raise SynclineError("average_models() before the optimizer's first update: there is no model to average")
        self._syncline_sync_of(list(self._trainable_variables)).average_models()

    def _syncline_sync_of(self, variables):
        """osp, ssp: the synchronizations of this optimizer's variables (made at the first update; a
        later update of other variables is refused, as they would not be synchronized)."""
        sync = self._syncline_model_sync
        mode = _session.current().sync_mode
        if sync is None:
            names = [variable_name(v, i) for i, v in enumerate(variables)]
            form = native_form(self._syncline_compression)
            sync = self._syncline_model_sync = \
                ModelSync(variables, names, _session.current().worker.osp_period, form, prefix=f"{self.name}.osp.") \
                if mode == "osp" else StaleSync(variables, names, form, prefix=f"{self.name}.ssp.")
        elif not sync.holds(variables):
            raise SynclineError(
                f"optimizer {self.name} updates other variables than at its first update, which {mode} mode "
                f"(SYNCLINE_SYNC_MODE={mode}) synchronizes: give each model (or each set of trainable variables) "
                "its own DistributedOptimizer")
        return sync

    def _syncline_apply_locally(self, grads, variables):
        """osp, ssp: the local update, then the synchronization schedule (model_sync, stale_sync)."""
        sync = self._syncline_sync_of(variables if variables is not None else list(self._trainable_variables))
        if tf.executing_eagerly():
            sync.before_update()
            result = super().apply(grads, trainable_variables=variables)
            sync.after_update()
            return result
        refuse_xla()
        # Each op names the variables' resources, so TensorFlow orders it with every read and write
        # of them: the update (weight decay included) after the first, the next forward after the second.
        sync.before_update_in_graph()
        result = super().apply(grads, trainable_variables=variables)
        sync.after_update_in_graph()
        return result

    def _syncline_average(self, grads, variables):
        if variables is None:  # gradients given in the order the optimizer was built with
            variables = list(self._trainable_variables)
        names = [f"{self.name}.grad.{variable_name(v, i)}" for i, v in enumerate(variables)]
        # A model lists its variables in the order its layers were built, which for
        # Sequential and functional models is the order the forward pass uses them.
        priorities = [-i for i in range(len(grads))]
        return average_gradients(grads, names, priorities, self._syncline_compression)


_DISTRIBUTED_CLASSES = {}  # the user's optimizer class -> its distributed subclass


def DistributedOptimizer(optimizer, name=None, compression=Compression.none, sparse_as_dense=True, op=Average,
                         **unsupported):
    """Makes the Keras 3 `optimizer` average its gradients across all workers before each update and
    returns it. The object itself is turned into a subclass of its class, so its configuration
    (custom schedules, callables, subclass arguments), and its state if it was already built,
    stay exactly as they were."""
    import keras

    only_average(op, "DistributedOptimizer")
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
