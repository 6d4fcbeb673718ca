"""OSP: workers train on local updates while the last period's model change is averaged.

In osp mode (SYNCLINE_SYNC_MODE=osp) no gradient leaves a worker. Every step
updates the parameters with the local gradient. Every `period` steps a worker
starts, without waiting, a push_pull of its model change since the global
model it last merged; the next steps compute meanwhile. When the average is
back (looked for after every step), the worker moves to the new global model
plus its own progress since the synchronization started:

    global  <- global + average over workers of (snapshot - global)
    params  <- global + (params - snapshot)

At most one synchronization is in flight: one still out when the next is due
is waited for first, so a model is at most one period stale. The global model
is the same on every worker, bit for bit: it starts as worker 0's parameters
(broadcast at the first update) and changes only by sums every worker receives
alike. Optimizer state stays local.
"""
import torch

from syncline import _session
from syncline.torch import ops
from syncline.torch.broadcast import broadcast_tensor_


class ModelSync:
    """The OSP synchronizations of `named_parameters` (the parameters one wrapper updates).

    Call after_update() after every local update; synchronize() to make every
    worker hold the global model (a checkpoint, an evaluation). Not thread-safe:
    the training thread calls it."""

    def __init__(self, named_parameters, period, compression, prefix):
        if period < 1:
            raise ValueError(f"the OSP period must be at least 1 step, got {period}")
        session = _session.current()
        self._period = period
        self._compression = compression
        self._params = []  # (name, parameter), declaration order
        seen = set()
        for name, p in named_parameters:
            if p.requires_grad and id(p) not in seen:
                seen.add(id(p))
                self._params.append((prefix + name, p))
        # Declared up front, in the same order on every worker (declaring is a collective).
        for name, p in self._params:
            session.tensor_id(name, ops.wire_dtype(compression.wire_dtype(p.dtype)), p.shape)
        self._updates = 0
        self._global = None  # the global model, once the first update begins
        self._snapshot = None  # the parameters when the synchronization in flight started
        self._handles = None  # its push_pulls, by position in self._params
        self.synchronizations = 0  # started so far
        self.merged = 0  # merged so far

    @property
    def in_flight(self):
        """Whether a synchronization was started and not merged yet (at most one is)."""
        return self._handles is not None

    def before_update(self):
        """Takes the global model from worker 0 before the first local update (a collective: every
        worker's first update calls it): workers that started apart then train on one model."""
        if self._global is not None:
            return
        with torch.no_grad():
            self._global = [p.detach().clone() for _, p in self._params]
            for (name, _), g in zip(self._params, self._global):
                broadcast_tensor_(g, 0, "osp.start." + name)
            for (_, p), g in zip(self._params, self._global):
                p.copy_(g)

    def after_update(self):
        """Counts a local update; merges a synchronization whose average is back; starts the next one
        every `period` updates."""
        self._updates += 1
        if self._handles is not None and all(ops.poll(h) for h in self._handles):
            self._merge()
        if self._updates % self._period == 0:
            if self._handles is not None:
                self._merge()  # waits: at most one synchronization in flight
            self._start()

    def synchronize(self):
        """Merges the synchronization in flight, then averages once more and waits: every worker's
        parameters are then the global model, bit for bit."""
        self.before_update()
        if self._handles is not None:
            self._merge()
        self._start()
        self._merge()

    def _start(self):
        with torch.no_grad():
            self._snapshot = [p.detach().clone() for _, p in self._params]
            self._handles = [
                ops.post_model_change(s - g, name=name, priority=-i, compression=self._compression)
                for i, ((name, _), s, g) in enumerate(zip(self._params, self._snapshot, self._global))]
        self.synchronizations += 1

    def _merge(self):
        handles, self._handles = self._handles, None
        with torch.no_grad():
            for (_, p), g, s, handle in zip(self._params, self._global, self._snapshot, handles):
                g.add_(ops.synchronize(handle))
                p.sub_(s).add_(g)  # exactly the global model where nothing moved since the snapshot
        self._snapshot = None
        self.merged += 1
