"""Keras 3 callbacks of syncline.tensorflow.keras, as Horovod's and BytePS's Keras callbacks.

BroadcastGlobalVariablesCallback starts every worker from root's weights and
optimizer state; MetricAverageCallback makes the metrics each epoch reports the
average over workers; LearningRateWarmupCallback ramps the learning rate from
lr/size up to lr over the first epochs (Goyal et al., "Accurate, large
minibatch SGD"), for scripts that scale lr with the number of workers.
"""
import warnings

import keras
import numpy as np

from syncline import _session
from syncline.tensorflow.ops import broadcast_variables


def broadcast_global_variables(root_rank, model=None):
    """Assigns root_rank's value to every variable of `model` and of its optimizer on every worker.

    TensorFlow 2 keeps no global collection of variables, so the model must be named (in a TF1-style
    graph, the global collection is used)."""
    import tensorflow as tf

    if model is not None:
        variables = list(model.variables)
        if getattr(model, "optimizer", None) is not None and model.optimizer.built:
            variables += list(model.optimizer.variables)
    elif not tf.executing_eagerly():
        variables = tf.compat.v1.global_variables()
    else:
        raise ValueError("TensorFlow 2 has no global variables: pass the model, "
                         "broadcast_global_variables(root_rank, model), or use broadcast_variables(variables, "
                         "root_rank)")
    return broadcast_variables(variables, root_rank)


class BroadcastGlobalVariablesCallback(keras.callbacks.Callback):
    """Broadcasts root_rank's model and optimizer variables to every worker when training begins,
    so that differently initialized workers (or a checkpoint loaded on root only) start equal."""

    def __init__(self, root_rank=0, device=""):
        super().__init__()
        self.root_rank = root_rank
        self._done = False

    def on_train_begin(self, logs=None):
        if self._done:
            return
        # model.fit builds the optimizer before this, so its slots are broadcast too.
        broadcast_global_variables(self.root_rank, self.model)
        self._done = True


class MetricAverageCallback(keras.callbacks.Callback):
    """Replaces each metric in an epoch's logs with its average over the workers (put it before
    callbacks that read the logs, such as checkpoints and early stopping)."""

    def on_epoch_end(self, epoch, logs=None):
        if not logs:
            return
        session = _session.current()
        names = sorted(k for k, v in logs.items() if np.ndim(v) == 0)
        values = np.array([float(logs[k]) for k in names], dtype=np.float64)
        # Every worker reports the same metrics, in the same sorted order; the tensor's name
        # carries them, so a worker reporting other metrics is refused, not mixed in.
        name = "keras.metrics." + ",".join(names)
        for key, value in zip(names, session.average_values(name, values)):
            logs[key] = float(value)


class LearningRateWarmupCallback(keras.callbacks.Callback):
    """Ramps the learning rate linearly, batch by batch, from initial_lr / size() at the start to
    initial_lr after warmup_epochs epochs; afterwards the rate is left to the optimizer and other
    callbacks."""

    def __init__(self, initial_lr, warmup_epochs=5, momentum_correction=True, steps_per_epoch=None, verbose=0):
        super().__init__()
        self.initial_lr = float(initial_lr)
        self.warmup_epochs = warmup_epochs
        self.steps_per_epoch = steps_per_epoch
        self.verbose = verbose
        self.momentum_correction = momentum_correction
        self._epoch = 0

    def on_train_begin(self, logs=None):
        if not isinstance(self.model.optimizer.learning_rate, keras.Variable):
            raise ValueError("LearningRateWarmupCallback sets the learning rate each batch: the optimizer's "
                             "learning_rate must be a number, not a schedule")
        if self.steps_per_epoch is None:
            self.steps_per_epoch = self.params.get("steps")
        if not self.steps_per_epoch:
            raise ValueError("LearningRateWarmupCallback needs steps_per_epoch (model.fit did not say it)")
        if self.momentum_correction and getattr(self.model.optimizer, "momentum", 0):
            # A Keras 3 optimizer's momentum is a constant of the compiled train step,
            # so it cannot be rescaled batch by batch as Horovod's TF1 callback did.
            warnings.warn("LearningRateWarmupCallback: momentum correction is not applied (a Keras 3 "
                          "optimizer's momentum is fixed when the train step is compiled)", stacklevel=2)

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch

    def on_train_batch_begin(self, batch, logs=None):
        progress = self._epoch + batch / self.steps_per_epoch
        if progress > self.warmup_epochs:
            return
        size = _session.size()
        lr = self.initial_lr / size * (progress * (size - 1) / self.warmup_epochs + 1)
        self.model.optimizer.learning_rate.assign(lr)

    def on_epoch_end(self, epoch, logs=None):
        if self.verbose and epoch + 1 == self.warmup_epochs and _session.rank() == 0:
            print(f"\nEpoch {epoch + 1}: finished learning-rate warmup at {self.initial_lr:g}.")
        if logs is not None:
            logs["lr"] = float(self.model.optimizer.learning_rate.numpy())
