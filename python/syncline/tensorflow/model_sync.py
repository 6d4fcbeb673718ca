"""OSP for syncline.tensorflow: the schedule of syncline._model_sync over Keras variables.

In osp mode the DistributedOptimizer applies each step's local gradients and
then, every `period` steps, averages the model change since the last global
model without waiting; see syncline._model_sync for the rules and what they
guarantee. The schedule runs in Python between updates: eagerly as it is,
and inside a tf.function (Keras's train step) through two tf.py_function
calls per step that take the variables' resource handles, so that TensorFlow
orders them with every read and write of the variables: the first before the
update, the second after it and before the next forward. The parameters
travel as host arrays (the session's post_array), as TensorFlow's fallback
path does.
"""
import numpy as np
import tensorflow as tf

from syncline import _model_sync, _session


class KerasVariables:
    """syncline._model_sync's view of Keras variables (the adapter its docstring describes)."""

    def __init__(self, variables, names, form, vote_name, start_prefix="osp.start."):
        self.variables = self._variables = variables
        self.names = names
        self._form = form
        self._vote_name = vote_name
        self._start_prefix = start_prefix  # what the broadcast of worker 0's values is named by

    def resources(self):
        """The variables' resource handles: an op that takes them is ordered with their reads and writes."""
        return [v.handle if hasattr(v, "handle") else v.value.handle for v in self._variables]

    def copy(self):
        return [np.array(v.numpy(), copy=True, order="C") for v in self._variables]

    def current(self):
        return [v.numpy() for v in self._variables]

    def zeros(self):
        return [np.zeros(v.shape, tf.as_dtype(v.dtype).as_numpy_dtype) for v in self._variables]

    def broadcast_(self, values):
        session = _session.current()
        for name, value in zip(self.names, values):
            tensor_id = session.tensor_id(self._start_prefix + name, _session.array_dtype(value), value.shape, "none")
            session.broadcast_array(tensor_id, value, 0)
        return values

    def load(self, values):
        for v, value in zip(self._variables, values):
            v.assign(value)

    def post(self, i, snapshot, global_):
        change = np.subtract(snapshot, global_, out=np.empty_like(snapshot))  # an array, for scalars too
        return _session.current().post_array(self.names[i], change, True, -i, form=self._form)

    def done(self, handle):
        return _session.current().handles.get(handle).op.poll()

    def wait(self, handle):
        return _session.current().wait_arrays([handle])[0]

    def merge_(self, i, global_, snapshot, average):
        global_ += average
        v = self._variables[i]
        # (params - snapshot) + global, exactly the global model where nothing moved since, computed into
        # the snapshot, which the schedule drops after the merge: no model-sized temporaries.
        np.subtract(v.numpy(), snapshot, out=snapshot)
        snapshot += global_
        v.assign(snapshot)

    def post_vote(self, steps):
        return _session.current().post_array(self._vote_name, np.array([steps], dtype=np.float64), True, 1,
                                             form="none")

    def wait_vote(self, handle):
        return float(self.wait(handle)[0])


def check_variables(variables, mode):
    """Raises TypeError unless every variable is float32 or float64, what `mode` (osp, ssp) averages."""
    for v in variables:
        dtype = tf.as_dtype(v.dtype)  # Keras 3 variables name theirs as a string
        if dtype not in (tf.float32, tf.float64):
            raise TypeError(f"{mode} mode averages float32 and float64 variables; {v.name} is {dtype.name}")


class InGraph:
    """The schedule's two calls around an update, as ops of the tf.function being traced (run at every
    step), mixed into a synchronization of KerasVariables (`self._model`)."""

    def holds(self, variables):
        """Whether `variables` are the ones this synchronizes, in its order."""
        mine = self._model.variables
        return len(variables) == len(mine) and all(a is b for a, b in zip(variables, mine))

    def before_update_in_graph(self):
        """before_update() as an op. It takes the variables' resources, so TensorFlow orders it before
        the update's reads and writes of them."""
        return tf.py_function(self._before_update_step, self._model.resources(), tf.bool,
                              name="SynclineBeforeUpdate")

    def after_update_in_graph(self):
        """after_update() as an op, ordered after the update's writes and before any later read of the
        variables (the next forward of a multi-step function)."""
        return tf.py_function(self._after_update_step, self._model.resources(), tf.bool,
                              name="SynclineAfterUpdate")

    def _before_update_step(self, *resources):
        self.before_update()
        return True

    def _after_update_step(self, *resources):
        self.after_update()
        return True


class ModelSync(InGraph, _model_sync.ModelSync):
    """The OSP synchronizations of one optimizer's variables; its tensors are named `prefix` + each
    variable's name. They are declared at the first synchronization, in the variables' order."""

    def __init__(self, variables, names, period, form, prefix):
        _model_sync.check_period(period)
        check_variables(variables, "osp")
        names = [prefix + n for n in names]
        vote_name = f"{names[0]}.period.vote" if names else prefix + "period.vote"
        super().__init__(KerasVariables(list(variables), names, form, vote_name), period)
