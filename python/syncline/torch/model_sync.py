"""OSP: workers train on local updates while the last period's model change is averaged.

In osp mode (SYNCLINE_SYNC_MODE=osp) no gradient leaves a worker. Every step
updates the parameters with the local gradient. Every `period` steps a worker
starts, without waiting, a push_pull of its model change since the global
model it last merged, and merges the average when the next one is due (it is
back by then unless the network is slower than a period, and then that step
waits for it): one synchronization in flight at a time.

    global  <- global + average over workers of (snapshot - global)
    params  <- global + (params - snapshot)

The global model is the same on every worker, bit for bit: it starts as worker
0's parameters (broadcast at the first update) and changes only by sums every
worker receives alike. A worker sees another's updates at most two periods
late (one period until that worker's snapshot, one in flight). Merges happen
at fixed steps, so with a fixed period and SYNCLINE_DETERMINISTIC a run is
bit-reproducible. Optimizer state stays local.

Period 0 (SYNCLINE_OSP_PERIOD=0, the default) chooses the period from
measurement: the fewest steps in which a synchronization comes back, so that
no step waits for the network. Each synchronization carries every worker's
vote (how many of its own steps the previous one took) and the average,
identical everywhere, becomes the period after the next start. A start is a
collective (the k-th push_pull of every worker is summed together), so every
worker must start its k-th at the same update: the period is never changed by
what one worker alone observed.
"""
import math
import time

import torch

from syncline import _session
from syncline.compression import native_form
from syncline.torch import ops
from syncline.torch.broadcast import broadcast_tensor_


def declare_parameters(named_parameters, compression, prefix):
    """The trainable parameters of `named_parameters`, each once, as (prefix + name, parameter) in
    declaration order, declared to the job up front in that order on every worker (declaring is a
    collective): what the osp and ssp wrappers sum."""
    session = _session.current()
    params, seen = [], set()
    for name, p in named_parameters:
        if p.requires_grad and id(p) not in seen:
            seen.add(id(p))
            params.append((prefix + name, p))
    for name, p in params:
        session.tensor_id(name, ops.wire_dtype(compression.wire_dtype(p.dtype)), p.shape, native_form(compression))
    return params


class ModelSync:
    """The OSP synchronizations of `named_parameters` (the parameters one wrapper updates).

    Call after_update() after every local update; average_models() to make every
    worker hold the global model (a checkpoint, an evaluation). Not thread-safe:
    the training thread calls it."""

    # A chosen period never exceeds this many steps (a model is at most this stale).
    LONGEST_AUTO_PERIOD = 64

    def __init__(self, named_parameters, period, compression, prefix):
        if period < 0:
            raise ValueError(f"the OSP period must be 0 (chosen from measurement) or a number of steps, got {period}")
        session = _session.current()
        self._auto = period == 0
        self.period = 1 if self._auto else period  # steps from the last start to the next
        self._compression = compression
        self._params = declare_parameters(named_parameters, compression, prefix)  # (name, parameter)
        # One vote tensor per wrapper: named after its first parameter, which no other wrapper has.
        self._vote_name = f"{self._params[0][0]}.period.vote" if self._params else prefix + "period.vote"
        if self._auto:
            session.tensor_id(self._vote_name, ops.wire_dtype(torch.float64), (1,))
        self._vote = None  # handle of the period vote of the synchronization in flight
        self._voted_period = self.period  # the average of the last merged vote, in force after the next start
        self._latency_steps = 1.0  # how many of this worker's steps its last merged synchronization took
        self._started_update = 0  # the update count at which the synchronization in flight started
        self._back_after = None  # steps after its start at which it was seen back, if it was
        self._step_seconds = None  # this worker's step time without waits for the network (moving average)
        self._last_update_at = None
        self._waited = 0.0  # seconds of the last step spent waiting for a synchronization
        self._next_due = None  # the update count at which the next synchronization starts
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
        """Counts a local update; when the next synchronization is due (every `period` updates),
        merges the one in flight and starts it."""
        self._updates += 1
        self._time_step()
        if self._auto and self._handles is not None and self._back_after is None and \
                all(ops.poll(h) for h in self._handles):
            self._back_after = self._updates - self._started_update  # the vote: it is back
        if self._next_due is None:
            self._next_due = self.period
        if self._updates >= self._next_due:
            if self._handles is not None:
                self._merge()  # waits: at most one synchronization in flight
            self._start()
            self._next_due = self._updates + self.period

    def _time_step(self):
        now = time.monotonic()
        if self._last_update_at is not None:
            seconds = now - self._last_update_at - self._waited
            self._step_seconds = seconds if self._step_seconds is None else 0.8 * self._step_seconds + 0.2 * seconds
        self._last_update_at, self._waited = now, 0.0

    def average_models(self):
        """Merges the synchronization in flight, then averages once more and waits: every worker's
        parameters are then the global model, bit for bit. A collective: every worker calls it
        after the same number of updates."""
        self.before_update()
        if self._handles is not None:
            self._merge()
        self._start()
        self._merge()

    def _start(self):
        if self._auto:
            # Every worker has merged the last vote by now (a start follows the merge before it), so
            # the period changes at the same update everywhere.
            self.period = self._voted_period
            self._vote = ops.post_model_change(torch.tensor([self._latency_steps], dtype=torch.float64),
                                               name=self._vote_name, priority=1, compression=ops.Compression.none)
        with torch.no_grad():
            self._snapshot = [p.detach().clone() for _, p in self._params]
            self._handles = [
                ops.post_model_change(s - g, name=name, priority=-i, compression=self._compression)
                for i, ((name, _), s, g) in enumerate(zip(self._params, self._snapshot, self._global))]
        self._started_update, self._back_after = self._updates, None
        self.synchronizations += 1

    def _merge(self):
        handles, self._handles = self._handles, None
        waiting_since = time.monotonic()
        with torch.no_grad():
            for (_, p), g, s, handle in zip(self._params, self._global, self._snapshot, handles):
                g.add_(ops.synchronize(handle))
                p.sub_(s).add_(g)  # exactly the global model where nothing moved since the snapshot
        now = time.monotonic()
        self._waited += now - waiting_since
        self._snapshot = None
        self.merged += 1
        if self._auto:
            vote, self._vote = self._vote, None
            average = float(ops.synchronize(vote)[0])
            self._voted_period = max(1, min(self.LONGEST_AUTO_PERIOD, math.ceil(average - 1e-9)))
            # Whole steps where it was seen back; else the steps until now plus what this merge
            # waited, in steps.
            waited = now - waiting_since
            self._latency_steps = float(self._back_after) if self._back_after is not None else \
                (self._updates - self._started_update) + (waited / self._step_seconds if self._step_seconds else 1.0)
