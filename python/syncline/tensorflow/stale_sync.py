"""SSP for syncline.tensorflow: the schedule of syncline._stale_sync over Keras variables.

In ssp mode the DistributedOptimizer applies each step's local gradients, then
sends the variables' change to the servers and takes the model back, at most
SYNCLINE_SSP_STALENESS steps behind the slowest worker; see
syncline._stale_sync for the rules. Inside a tf.function it runs as OSP's
schedule does (syncline.tensorflow.model_sync): two tf.py_function calls per
step, ordered with the variables' reads and writes.
"""
from syncline import _stale_sync
from syncline.tensorflow.model_sync import InGraph, KerasVariables, check_variables


class StaleSync(InGraph, _stale_sync.StaleSync):
    """The ssp synchronizations of one optimizer's variables; its tensors are named `prefix` + each
    variable's name, declared at the first update, in the variables' order."""

    def __init__(self, variables, names, form, prefix):
        check_variables(variables, "ssp")
        names = [prefix + n for n in names]
        super().__init__(KerasVariables(list(variables), names, form, vote_name=None, start_prefix="ssp.start."))
