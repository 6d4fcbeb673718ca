"""DistributedGradientTape: a tf.GradientTape whose gradients are averaged across workers.

Gradients go out together, each with the priority of its variable's first use
in the forward pass (the order the tape watched the variables: first used =
most urgent), and are waited for together.
"""
import tensorflow as tf

from syncline.reduce_ops import Average, only_average
from syncline.tensorflow.ops import Compression, average_gradients, graph_builder, variable_name


class DistributedGradientTape:
    def __init__(self, gradtape, compression=Compression.none, op=Average):
        only_average(op, "DistributedGradientTape")
        self._tape = gradtape
        self._compression = compression

    def __getattr__(self, name):  # everything else, as the wrapped tape
        return getattr(self._tape, name)

    def __enter__(self):
        self._tape.__enter__()
        return self

    def __exit__(self, *exc):
        return self._tape.__exit__(*exc)

    @graph_builder
    def gradient(self, target, sources, output_gradients=None, **kwargs):
        grads = self._tape.gradient(target, sources, output_gradients=output_gradients, **kwargs)
        flat_sources = tf.nest.flatten(sources)
        watched = {id(v): i for i, v in enumerate(self._tape.watched_variables())}
        names = [f"tape.grad.{variable_name(v, i)}" for i, v in enumerate(flat_sources)]
        priorities = [-watched.get(id(v), len(watched) + i) for i, v in enumerate(flat_sources)]
        averaged = average_gradients(tf.nest.flatten(grads), names, priorities, self._compression)
        return tf.nest.pack_sequence_as(grads, averaged)
