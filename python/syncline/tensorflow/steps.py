"""Where syncline.tensorflow ends a training step: after each averaging of gradients, the shim
reports the step to libsyncline (the online tuner, SYNCLINE_AUTOTUNE, and the trace's step range),
as syncline.torch does at the end of step(), and orders the report among the push_pulls of a graph."""
import numpy as np
import tensorflow as tf

from syncline import _session


class GraphSteps:
    """What a graph being traced holds of its training steps: the last step end (step_ends) and
    the sums of Syncline's ops made since. Each step end waits for those sums, and every later op
    waits for it: a repartition by the tuner then falls between the same two push_pulls of every
    tensor on every worker, however the ops of two averagings in one function could otherwise
    interleave (two tapes, or the compiled ops, which run independently of other stateful ops)."""

    def __init__(self):
        self.last_end = None
        self.sums = []

    @staticmethod
    def of(graph):
        steps = getattr(graph, "_syncline_steps", None)
        if steps is None:
            steps = graph._syncline_steps = GraphSteps()
        return steps


def _end_step():
    _session.current().worker.begin_step()
    return np.int64(0)  # what the graph's op returns


def step_ends(summed):
    """The step's gradients are back: the online tuner (SYNCLINE_AUTOTUNE) and the trace count a
    training step here, as syncline.torch does at the end of step(). It is a collective that may
    repartition every tensor, so it must fall between the same two push_pulls on every worker: inside
    tf.function it waits for every sum made since the graph's last step end, every later push_pull
    of the graph waits for it (GraphSteps), and so does the update (a tf.identity of each sum: no
    copy), so the next step's push_pulls, even in the same function call, come after it."""
    if tf.executing_eagerly():
        _end_step()
        return summed
    steps = GraphSteps.of(tf.compat.v1.get_default_graph())
    with tf.control_dependencies(steps.sums):  # this step's sums, and any other push_pull's since the last end
        ended = tf.numpy_function(_end_step, [], tf.int64, stateful=True, name="SynclineStepEnd")
    steps.last_end, steps.sums = ended, []
    with tf.control_dependencies([ended]):
        return [tf.identity(s) for s in summed]
