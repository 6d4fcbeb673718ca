"""DistributedGradientTape: a tf.GradientTape whose gradients are averaged across workers.

Gradients go out together, each with the priority of its variable's first use
in the forward pass (the order the tape watched the variables: first used =
most urgent), and are waited for together.
"""
import tensorflow as tf

from syncline.tensorflow.ops import Compression, _variable_name, push_pull_list


class DistributedGradientTape:
    def __init__(self, gradtape, compression=Compression.none):
        self._tape = gradtape
        self._compression = compression

    def __getattr__(self, name):  # everything else, as the wrapped tape
        return getattr(self._tape, name)

    def __enter__(self):
        self._tape.__enter__()
        return self

    def __exit__(self, *exc):
        return self._tape.__exit__(*exc)

    def gradient(self, target, sources, output_gradients=None, **kwargs):
        grads = self._tape.gradient(target, sources, output_gradients=output_gradients, **kwargs)
        flat_sources = tf.nest.flatten(sources)
        flat_grads = tf.nest.flatten(grads)
        watched = {id(v): i for i, v in enumerate(self._tape.watched_variables())}
        present = [i for i, g in enumerate(flat_grads) if g is not None]
        sent, contexts, names, priorities = [], [], [], []
        for i in present:
            g = flat_grads[i]
            if isinstance(g, tf.IndexedSlices):
                g = tf.convert_to_tensor(g)
            s, ctx = self._compression.compress(g)
            sent.append(s)
            contexts.append(ctx)
            names.append(f"tape.grad.{_variable_name(flat_sources[i], i)}")
            priorities.append(-watched.get(id(flat_sources[i]), len(watched) + i))
        if sent:
            summed = push_pull_list(sent, names, average=True, priorities=priorities)
            for i, s, ctx in zip(present, summed, contexts):
                flat_grads[i] = self._compression.decompress(s, ctx)
        return tf.nest.pack_sequence_as(grads, flat_grads)
