"""The cross-iteration updater's guard, without a job: a parameter whose update is queued makes
an operation on its data wait for the update, and gets its class back after it."""
import threading

import torch

from syncline.torch.cross_iteration import CrossIterationUpdater


class _GatedUpdates:
    """update_one for the updater: each update (p -= 1) runs once the test opens the gate."""

    def __init__(self):
        self.gate = threading.Event()
        self.calls = []

    def __call__(self, p, context):
        assert self.gate.wait(timeout=30), "the test never opened the gate"
        with torch.no_grad():
            p.sub_(1.0)
        self.calls.append(context)


def _open_after_reads(updates, updater, p):
    # Opens the gate from another thread once the main thread blocks on p (it is still pending then).
    def opener():
        assert updater.is_pending(p)
        updates.gate.set()
    return threading.Timer(0.2, opener)


def test_a_read_by_hand_waits_for_the_update_and_metadata_does_not():
    updates = _GatedUpdates()
    updater = CrossIterationUpdater(updates)
    model = torch.nn.Linear(3, 2, bias=False)
    with torch.no_grad():
        model.weight.fill_(5.0)
    updater.submit([(model.weight, None, (None,))])
    assert isinstance(model.weight, torch.nn.Parameter) and type(model.weight) is not torch.nn.Parameter
    assert model.weight.shape == (2, 3) and model.weight.dtype == torch.float32  # no wait: the gate is shut
    assert updater.is_pending(model.weight)
    _open_after_reads(updates, updater, model.weight).start()
    assert torch.equal(model.weight.detach(), torch.full((2, 3), 4.0))  # waited for the update
    assert type(model.weight) is torch.nn.Parameter
    updater.close()


def test_a_write_by_hand_lands_after_the_update():
    updates = _GatedUpdates()
    updater = CrossIterationUpdater(updates)
    p = torch.nn.Parameter(torch.full((4,), 5.0))
    updater.submit([(p, None, (None,))])
    _open_after_reads(updates, updater, p).start()
    with torch.no_grad():
        p.clamp_(max=0.0)
    assert torch.equal(p, torch.zeros(4)), p
    updater.close()


def test_state_dict_and_load_state_dict_wait():
    updates = _GatedUpdates()
    updater = CrossIterationUpdater(updates)
    model = torch.nn.Linear(2, 1)
    with torch.no_grad():
        model.weight.fill_(3.0)
        model.bias.fill_(1.0)
    saved = {k: v.clone() for k, v in model.state_dict().items()}
    updater.submit([(model.weight, None, (None,)), (model.bias, None, (None,))])
    _open_after_reads(updates, updater, model.weight).start()
    assert torch.equal(model.state_dict()["weight"], torch.full((1, 2), 2.0))
    updates.gate.clear()
    updater.submit([(model.weight, None, (None,))])
    threading.Timer(0.2, updates.gate.set).start()
    model.load_state_dict(saved)  # the queued update must run before the load, not over it
    updater.wait()
    assert torch.equal(model.weight, saved["weight"]) and torch.equal(model.bias, saved["bias"])
    updater.close()


def test_updates_run_most_urgent_first_and_give_each_parameter_its_class_back():
    updates = _GatedUpdates()
    updates.gate.set()
    params = [torch.nn.Parameter(torch.zeros(2)) for _ in range(5)]
    updater = CrossIterationUpdater(updates)
    updater.submit([(p, None, (i,)) for i, p in enumerate(params)])
    updater.wait()
    assert updates.calls == [0, 1, 2, 3, 4], updates.calls
    assert all(type(p) is torch.nn.Parameter and torch.equal(p, torch.full((2,), -1.0)) for p in params)
    updater.close()


def test_a_forward_waits_only_for_its_own_module():
    updates = _GatedUpdates()
    updater = CrossIterationUpdater(updates)
    first, second = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)
    updater.submit([(second.weight, None, (None,))])
    first(torch.ones(1, 2))  # does not touch second.weight: no wait although the gate is shut
    assert updater.is_pending(second.weight)
    updates.gate.set()
    second(torch.ones(1, 2))
    assert not updater.is_pending(second.weight)
    updater.close()
