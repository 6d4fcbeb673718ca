"""SSP: every step's model change goes to the servers; the model comes back at most k rounds stale.

In ssp mode (SYNCLINE_SYNC_MODE=ssp) a server keeps a running value per key and
answers a pull of round r once every worker has pushed round r - k
(SYNCLINE_SSP_STALENESS). The wrappers use it as a stale synchronous parallel
parameter server (Ho et al., NIPS 2013):

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
"""
import torch

from syncline import _session
from syncline.torch import ops
from syncline.torch.broadcast import broadcast_tensor_
from syncline.torch.model_sync import declare_parameters


class StaleSync:
    """The ssp synchronizations of `named_parameters` (the parameters one wrapper updates).

    Call before_update() before every local update and after_update() after it;
    average_models() to make every worker hold the same model, every change in
    it. Not thread-safe: the training thread calls it."""

    def __init__(self, named_parameters, compression, prefix):
        self._compression = compression
        self._params = declare_parameters(named_parameters, compression, prefix)  # (name, parameter)
        self._start = None  # worker 0's parameters, once the first update begins
        self._before = None  # the parameters before the update in progress
        self.rounds = 0  # push_pulls of the model so far

    def before_update(self):
        """Takes the start from worker 0 before the first update (a collective: every worker's first
        update calls it), and notes the parameters the update starts from."""
        with torch.no_grad():
            if self._start is None:
                self._start = [p.detach().clone() for _, p in self._params]
                for (name, _), s in zip(self._params, self._start):
                    broadcast_tensor_(s, 0, "ssp.start." + name)
                for (_, p), s in zip(self._params, self._start):
                    p.copy_(s)
            self._before = [p.detach().clone() for _, p in self._params]

    def after_update(self):
        """Sends the update's change and takes the model the servers answer with (nothing to send
        unless before_update() came after the last exchange)."""
        if self._before is None:
            return
        with torch.no_grad():
            changes = [p - b for (_, p), b in zip(self._params, self._before)]
        self._before = None
        self._exchange(changes)

    def average_models(self):
        """Waits until every worker's changes are in, then takes the model: every worker then holds the
        same parameters, every change included. A collective: every worker calls it after the same
        number of updates."""
        if self._start is None:
            self.before_update()
        self.after_update()  # an update not sent yet (the DDP wrapper sends at the next forward)
        _session.current().worker.barrier()  # every worker's pushes so far are taken by now
        with torch.no_grad():
            self._exchange([torch.zeros_like(p) for _, p in self._params])

    def _exchange(self, changes):
        handles = [ops.post_model_change(c, name=name, priority=-i, compression=self._compression)
                   for i, ((name, _), c) in enumerate(zip(self._params, changes))]
        with torch.no_grad():
            for (_, p), s, handle in zip(self._params, self._start, handles):
                p.copy_(s + ops.synchronize(handle))
        self.rounds += 1
