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
no step waits for the network, at most LONGEST_AUTO_PERIOD steps. Each
synchronization carries every worker's vote (how many of its own steps the
previous one took) and the average, identical everywhere, becomes the period
after the next start. A start is a collective (the k-th push_pull of every
worker is summed together), so every worker must start its k-th at the same
update: the period is never changed by what one worker alone observed.

This module holds the schedule, framework-free; each shim gives it its
parameters through a small adapter (syncline.torch.model_sync,
syncline.tensorflow.model_sync) with these methods:

    names                       the parameters' names, declared to the job in this order
    copy()                      a copy of every parameter's value, in order
    broadcast_(values)          worker 0's `values` into `values`, in place, on every worker; returns them
    load(values)                the parameters := values
    post(i, snapshot, global_)  starts averaging parameter i's change, snapshot - global_; returns a handle
    done(handle)                True once the handle's average is back
    wait(handle)                the average (bounded by the job's request timeout)
    merge_(i, global_, snapshot, average)
                                global_ += average; parameter i += global_ - snapshot
    post_vote(steps), wait_vote(handle)
                                the period vote: one float averaged over workers

The same adapters serve ssp's schedule (syncline._stale_sync), which also asks
for current() and zeros().
"""
import math
import time


def check_period(period):
    """Raises ValueError unless `period` is 0 (chosen from measurement) or a number of steps."""
    if period < 0:
        raise ValueError(f"the OSP period must be 0 (chosen from measurement) or a number of steps, got {period}")


class ModelSync:
    """The OSP synchronizations of one wrapper's parameters (`model`: the shim's adapter above).

    Call before_update() before every local update and after_update() after it;
    average_models() to make every worker hold the global model (a checkpoint, an
    evaluation). Not thread-safe: the training thread calls it."""

    # A chosen period never exceeds this many steps (a model is at most this stale). The vote is
    # the network's view only: on the digits CNN (3 ms steps) it asked for 12-18, and 16 local
    # steps apart never reached the loss BSP reached, where 4 and 8 did in half BSP's time
    # (docs/benchmarks.md, OSP). A longer period is a fixed SYNCLINE_OSP_PERIOD.
    LONGEST_AUTO_PERIOD = 8

    def __init__(self, model, period):
        check_period(period)
        self._model = model
        self._auto = period == 0
        self.period = 1 if self._auto else period  # steps from the last start to the next
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
        self._handles = None  # its push_pulls, by parameter position
        self.synchronizations = 0  # started so far
        self.merged = 0  # merged so far
        # Seconds of the training thread spent so far in each part of the schedule: copying the
        # snapshot and posting (start), waiting for sums (wait), moving the parameters (merge).
        self.seconds = {"start": 0.0, "wait": 0.0, "merge": 0.0}
        self.late_merges = 0  # merges that found their synchronization not back yet (and waited for it)

    @property
    def auto(self):
        """Whether the period is chosen from measurement (and a vote travels with each synchronization)."""
        return self._auto

    @property
    def in_flight(self):
        """Whether a synchronization was started and not merged yet (at most one is)."""
        return self._handles is not None

    def before_update(self):
        """Takes the global model from worker 0 before the first local update (a collective: every
        worker's first update calls it): workers that started apart then train on one model."""
        if self._global is not None:
            return
        self._global = self._model.broadcast_(self._model.copy())
        self._model.load(self._global)

    def after_update(self):
        """Counts a local update; when the next synchronization is due (every `period` updates),
        merges the one in flight and starts it."""
        self._updates += 1
        self._time_step()
        if self._auto and self._handles is not None and self._back_after is None and \
                all(self._model.done(h) for h in self._handles):
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
        began = time.monotonic()
        if self._auto:
            # Every worker has merged the last vote by now (a start follows the merge before it), so
            # the period changes at the same update everywhere.
            self.period = self._voted_period
            self._vote = self._model.post_vote(self._latency_steps)
        self._snapshot = self._model.copy()
        self._handles = [self._model.post(i, s, g) for i, (s, g) in enumerate(zip(self._snapshot, self._global))]
        self._started_update, self._back_after = self._updates, None
        self.synchronizations += 1
        self.seconds["start"] += time.monotonic() - began

    def _merge(self):
        handles, self._handles = self._handles, None
        if not all(self._model.done(h) for h in handles):
            self.late_merges += 1
        waiting_since = time.monotonic()
        merging = 0.0
        for i, (g, s, handle) in enumerate(zip(self._global, self._snapshot, handles)):
            total = self._model.wait(handle)
            merge_began = time.monotonic()
            self._model.merge_(i, g, s, total)
            merging += time.monotonic() - merge_began
        now = time.monotonic()
        self._waited += now - waiting_since
        self.seconds["wait"] += now - waiting_since - merging
        self.seconds["merge"] += merging
        self._snapshot = None
        self.merged += 1
        if self._auto:
            vote, self._vote = self._vote, None
            average = self._model.wait_vote(vote)
            self._voted_period = max(1, min(self.LONGEST_AUTO_PERIOD, math.ceil(average - 1e-9)))
            # Whole steps where it was seen back; else the steps until now plus what this merge
            # waited, in steps.
            waited = now - waiting_since
            self._latency_steps = float(self._back_after) if self._back_after is not None else \
                (self._updates - self._started_update) + (waited / self._step_seconds if self._step_seconds else 1.0)
