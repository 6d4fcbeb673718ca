"""SSP: every step's model change goes to the servers; the model comes back at most k rounds stale.

In ssp mode (SYNCLINE_SYNC_MODE=ssp) a server keeps a running value per key and
answers a pull of round r once every worker has pushed round r - k
(SYNCLINE_SSP_STALENESS). The wrappers of both shims use it as a stale
synchronous parallel parameter server (Ho et al., NIPS 2013):

    start   <- worker 0's parameters (broadcast at the first update)
    each step, after the local update:
        push the change (params - params before the update), averaged over workers
        params <- start + V (V: the servers' running value when the pull is answered)

V holds every change the servers have taken, and at least rounds 0..r-k of
every worker. A worker runs at most k steps ahead of the slowest, so a
straggler's delay of up to k steps is absorbed by the others; a worker slower
on every step still sets everyone's pace. With k = 0 every step reads every
worker's change of that step. Optimizer state stays local. The push_pull
waits at the end of each step (a step's model is what its pull returned).

This module holds the schedule, framework-free; each shim gives it its
parameters through the adapter syncline._model_sync describes (the same
classes), of which it uses:

    copy()                      a copy of every parameter's value, in order
    current()                   every parameter's value, in order, copied or not (only read at once)
    zeros()                     an array of zeros like each parameter, in order
    broadcast_(values)          worker 0's `values` into `values`, in place, on every worker; returns them
    load(values)                the parameters := values (an iterable, taken one at a time)
    post(i, now, before)        starts averaging parameter i's change, now - before; returns a handle
    wait(handle)                the servers' running value (bounded by the job's request timeout)
"""
from syncline import _session


class StaleSync:
    """The ssp synchronizations of one wrapper's parameters (`model`: the shim's adapter above).

    Call before_update() before every local update and after_update() after it;
    average_models() to make every worker hold the same model, every change in
    it. Not thread-safe: the training thread calls it."""

    def __init__(self, model):
        self._model = model
        self._start = None  # worker 0's parameters, once the first update begins
        self._before = None  # the parameters before the update in progress
        self.rounds = 0  # push_pulls of the model so far

    def before_update(self):
        """Takes the start from worker 0 before the first update (a collective: every worker's first
        update calls it), and notes the parameters the update starts from."""
        if self._start is None:
            self._start = self._model.broadcast_(self._model.copy())
            self._model.load(self._start)
        self._before = self._model.copy()

    def after_update(self):
        """Sends the update's change and takes the model the servers answer with (nothing to send
        unless before_update() came after the last exchange)."""
        if self._before is None:
            return
        handles = self._post(self._model.current(), self._before)
        self._before = None  # not held while the pulls are waited for
        self._take(handles)

    def average_models(self):
        """Waits until every worker's changes are in, then takes the model: every worker then holds the
        same parameters, every change included. A collective: every worker calls it after the same
        number of updates."""
        if self._start is None:
            self.before_update()
        self.after_update()  # an update not sent yet (the DDP wrapper sends at the next forward)
        _session.current().worker.barrier()  # every worker's pushes so far are taken by now
        zeros = self._model.zeros()
        self._take(self._post(zeros, zeros))  # a change of zero: the pull answers the whole running value

    def _post(self, now, before):
        return [self._model.post(i, value, base) for i, (value, base) in enumerate(zip(now, before))]

    def _take(self, handles):
        """params <- start + the running value, parameter by parameter as each pull is back."""
        self._model.load(start + self._model.wait(handle) for start, handle in zip(self._start, handles))
        self.rounds += 1
