"""The OSP schedule (syncline._model_sync) with an in-memory adapter: no job, no framework.

The adapter stands for every worker of a job at once: its averages are what a
test says they are, and a synchronization is back when the test says so, so the
merge rule, the one-in-flight bound and the period vote are checked exactly.
"""
import numpy as np
import pytest

from syncline._model_sync import ModelSync


class _Pending:
    def __init__(self, change):
        self.change = change
        self.back = False


class InMemoryModel:
    """One parameter of two values. `others` is what the other workers' changes add to each average
    (the job's average = (mine + others) / workers); a vote averages to `votes_average` if set."""

    names = ["p"]

    def __init__(self, start, workers=2, others=None):
        self.param = np.array(start, dtype=np.float64)
        self.workers = workers
        self.others = np.zeros(2) if others is None else np.array(others, dtype=np.float64)
        self.in_flight = []  # posted and not waited for
        self.most_in_flight = 0
        self.broadcasts = 0
        self.votes = []  # the votes this worker sent
        self.votes_average = None

    def copy(self):
        return [self.param.copy()]

    def broadcast_(self, values):
        self.broadcasts += 1
        return values  # this worker is worker 0

    def load(self, values):
        self.param = values[0].copy()

    def post(self, i, snapshot, global_):
        pending = _Pending(snapshot - global_)
        self.in_flight.append(pending)
        self.most_in_flight = max(self.most_in_flight, len(self.in_flight))
        return pending

    def done(self, handle):
        return handle.back

    def wait(self, handle):
        self.in_flight.remove(handle)
        return (handle.change + self.others) / self.workers

    def merge_(self, i, global_, snapshot, average):
        global_ += average
        self.param = (self.param - snapshot) + global_

    def post_vote(self, steps):
        self.votes.append(steps)
        return _Pending(np.array([steps]))

    def wait_vote(self, handle):
        return float(handle.change[0]) if self.votes_average is None else self.votes_average


def local_steps(sync, model, steps, delta=(1.0, -2.0)):
    for _ in range(steps):
        sync.before_update()
        model.param = model.param + np.array(delta)
        sync.after_update()


def test_the_merge_takes_the_average_and_keeps_the_progress_since_the_snapshot():
    model = InMemoryModel([10.0, 20.0], workers=2, others=[3.0, 5.0])
    sync = ModelSync(model, period=2)
    local_steps(sync, model, 2)  # a synchronization starts at update 2: snapshot = start + 2 deltas
    assert sync.in_flight and model.broadcasts == 1
    local_steps(sync, model, 2)  # merged at update 4, before the next starts
    # global = start + (2 deltas + others) / 2; then the 2 deltas since the snapshot on top.
    global_ = np.array([10.0, 20.0]) + (np.array([2.0, -4.0]) + np.array([3.0, 5.0])) / 2
    assert np.array_equal(model.param, global_ + np.array([2.0, -4.0])), model.param
    assert (sync.synchronizations, sync.merged) == (2, 1)


def test_one_worker_ends_where_local_training_ends():
    model = InMemoryModel([1.0, 1.0], workers=1)
    sync = ModelSync(model, period=3)
    local_steps(sync, model, 7)
    sync.average_models()
    assert np.array_equal(model.param, np.array([1.0, 1.0]) + 7 * np.array([1.0, -2.0]))
    assert not sync.in_flight


@pytest.mark.parametrize("period", [1, 2, 5])
def test_never_more_than_one_synchronization_in_flight(period):
    model = InMemoryModel([0.0, 0.0])
    sync = ModelSync(model, period=period)
    local_steps(sync, model, 20)
    assert model.most_in_flight == 1
    assert sync.synchronizations == 20 // period and sync.merged == sync.synchronizations - 1


def test_the_chosen_period_follows_the_averaged_vote():
    model = InMemoryModel([0.0, 0.0])
    sync = ModelSync(model, period=0)
    assert sync.auto and sync.period == 1
    model.votes_average = 3.2  # the workers' synchronizations took 3.2 steps on average
    local_steps(sync, model, 1)  # the first starts at update 1
    assert sync.period == 1
    local_steps(sync, model, 1)  # merged at 2, bringing the vote; the start right after takes it
    assert sync.period == 4
    model.votes_average = 1000.0
    local_steps(sync, model, 4)  # the next merge, at 6
    assert sync.period == ModelSync.LONGEST_AUTO_PERIOD


def test_a_synchronization_seen_back_votes_the_steps_it_took():
    model = InMemoryModel([0.0, 0.0])
    sync = ModelSync(model, period=0)
    model.votes_average = 3.0
    local_steps(sync, model, 3)  # started at 1; merged and started again at 2, now with period 3
    model.in_flight[0].back = True
    local_steps(sync, model, 2)  # seen back at update 4, 2 steps after its start; merged at 5
    assert model.votes[-1] == 2.0, model.votes


def test_a_negative_period_is_refused_before_anything_runs():
    model = InMemoryModel([0.0, 0.0])
    with pytest.raises(ValueError, match="OSP period must be 0"):
        ModelSync(model, period=-1)
    assert model.broadcasts == 0 and not model.in_flight


class _Clock:
    def __init__(self):
        self.now = 100.0

    def monotonic(self):
        return self.now


def test_the_seconds_of_each_part_are_those_the_training_thread_spent_in_it(monkeypatch):
    """A fake clock that only the adapter moves: the copy at a start takes 1 s, a wait for a sum 5 s,
    a merge 0.5 s, so each part's total is exact."""
    import syncline._model_sync as model_sync
    clock = _Clock()
    monkeypatch.setattr(model_sync, "time", clock)

    class TimedModel(InMemoryModel):
        def copy(self):
            clock.now += 1.0
            return super().copy()

        def wait(self, handle):
            clock.now += 5.0
            return super().wait(handle)

        def merge_(self, i, global_, snapshot, average):
            clock.now += 0.5
            super().merge_(i, global_, snapshot, average)

    model = TimedModel([0.0, 0.0])
    sync = ModelSync(model, period=2)
    local_steps(sync, model, 6)  # before_update's copy, then starts at 2, 4, 6 and merges at 4, 6
    assert sync.synchronizations == 3 and sync.merged == 2
    assert sync.seconds == {"start": 3.0, "wait": 10.0, "merge": 1.0}
    assert sync.late_merges == 2  # the adapter's synchronizations are never back before their wait


def test_a_merge_whose_synchronization_is_back_is_not_late():
    model = InMemoryModel([0.0, 0.0])
    sync = ModelSync(model, period=2)
    local_steps(sync, model, 2)
    for pending in model.in_flight:
        pending.back = True
    local_steps(sync, model, 2)
    assert sync.merged == 1 and sync.late_merges == 0
