"""Checks of osp mode that run inside every worker of a job: python osp_checks.py CHECK (as torch_checks.py).

The job runs with SYNCLINE_SYNC_MODE=osp. The models are linear in their
parameters with gradients that do not depend on them (loss = sum(w * c)), so a
local SGD step is w -= lr * c on any model, and every value stays a dyadic
rational: sums and averages are exact, and OSP's merged model must equal BSP's
bit for bit.
"""
import os
import random
import time

import torch

import syncline.torch as bps
from syncline.torch import ops
from expect import expect_error, run_check

LR = 0.5


def constant_gradient(rank):
    """This worker's gradient: the same every step, different on every worker."""
    return torch.tensor([1.0, -2.0, 0.25, 4.0]) * (rank + 1)


def bsp_result(start, steps, size):
    """Where BSP takes `start` in `steps` steps: each step subtracts LR x the workers' mean gradient."""
    mean = sum(constant_gradient(r) for r in range(size)) / size
    return start - steps * LR * mean


class Linear(torch.nn.Module):
    def __init__(self, start):
        super().__init__()
        self.w = torch.nn.Parameter(start.clone())

    def forward(self, c):
        return (self.w * c).sum()


def train(model, optimizer, steps, delays=None, on_step=None):
    c = constant_gradient(bps.rank())
    for step in range(steps):
        optimizer.zero_grad()
        model(c).backward()
        optimizer.step()
        if on_step is not None:
            on_step(step)
        if delays is not None:
            time.sleep(delays.uniform(0, 0.02))


def trains_as_local(local, plain, distributed, wrapped, x, steps=6):
    """Trains `local` with the plain optimizer and `distributed` with the wrapped one, `steps` steps of
    the same batch each; after average_models() the two models must hold the same parameters."""
    for model, optimizer in ((local, plain), (distributed, wrapped)):
        for _ in range(steps):
            optimizer.zero_grad()
            model(x).pow(2).mean().backward()
            optimizer.step()
    wrapped.average_models()
    for (name, a), b in zip(local.named_parameters(), distributed.parameters()):
        assert torch.allclose(a, b, rtol=0, atol=1e-6), (name, a, b)


def one_worker_equals_local_training():
    """With one worker, OSP (period 2) moves the parameters exactly as plain local SGD does."""
    torch.manual_seed(3)
    local = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh(), torch.nn.Linear(3, 1))
    distributed = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh(), torch.nn.Linear(3, 1))
    with torch.no_grad():  # dyadic parameters: the merge's subtractions and additions are exact
        for a, b in zip(local.parameters(), distributed.parameters()):
            a.copy_(torch.round(a * 64) / 64)
            b.copy_(a)
    plain = torch.optim.SGD(local.parameters(), lr=0.25)
    osp = bps.DistributedOptimizer(torch.optim.SGD(distributed.parameters(), lr=0.25),
                                   named_parameters=distributed.named_parameters())
    trains_as_local(local, plain, distributed, osp, torch.round(torch.randn(8, 4) * 8) / 8)
    assert osp._model_sync.synchronizations == 4, osp._model_sync.synchronizations  # 3 periods and average_models()


def merged_model_equals_bsp():
    """After average_models() every worker holds BSP's parameters exactly, whichever worker started where
    (constant gradients: this proves that no update is lost or counted twice)."""
    start = torch.tensor([1.0, 2.0, -3.0, 0.5])
    model = Linear(start if bps.rank() == 0 else torch.zeros(4))  # worker 0's start wins
    optimizer = bps.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=LR),
                                         named_parameters=[("w", model.w)])
    train(model, optimizer, 7)
    started = optimizer._model_sync.synchronizations
    optimizer.synchronize()  # gradients are local in osp: nothing to wait for, nothing started
    assert optimizer._model_sync.synchronizations == started
    optimizer.average_models()
    assert torch.equal(model.w.detach(), bsp_result(start, 7, bps.size())), model.w


def one_synchronization_in_flight_under_random_delays():
    """Workers slowed at random between steps: never more than one synchronization is started and not
    merged, one is started every period, and the merged model still equals BSP's."""
    start = torch.tensor([1.0, 2.0, -3.0, 0.5])
    model = Linear(start)
    optimizer = bps.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=LR),
                                         named_parameters=[("w", model.w)])
    sync = optimizer._model_sync
    period = int(os.environ["SYNCLINE_OSP_PERIOD"])

    def check(step):
        assert sync.synchronizations - sync.merged <= 1, (sync.synchronizations, sync.merged)
        assert sync.synchronizations == (step + 1) // period, (step, sync.synchronizations)

    train(model, optimizer, 40, delays=random.Random(bps.rank()), on_step=check)
    optimizer.average_models()
    assert torch.equal(model.w.detach(), bsp_result(start, 40, bps.size())), model.w


def chosen_period_grows_and_agrees():
    """Period 0 (chosen): with a model whose synchronization takes many of its (tiny) steps, the period
    grows past 1, every worker changes it at the same steps, no step has two synchronizations in
    flight, and the merged model still equals BSP's."""
    n = 1 << 22  # 16 MiB of float32: a push_pull takes far longer than a step of this model
    start = torch.tensor([1.0, 2.0, -3.0, 0.5]).repeat(n // 4)
    model = Linear(start)
    optimizer = bps.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=LR),
                                         named_parameters=[("big", model.w)])
    sync = optimizer._model_sync
    periods = []
    c = constant_gradient(bps.rank()).repeat(n // 4)
    for _ in range(60):
        optimizer.zero_grad()
        model(c).backward()
        optimizer.step()
        assert sync.synchronizations - sync.merged <= 1
        periods.append(sync.period)
    assert max(periods) > 1, periods
    assert bps.broadcast_object(periods, root_rank=0) == periods, "the workers chose different periods"
    optimizer.average_models()
    expected = start - 60 * LR * (sum(constant_gradient(r) for r in range(bps.size())) / bps.size()).repeat(n // 4)
    assert torch.equal(model.w.detach(), expected)
    print(f"periods chosen: {periods}", flush=True)


def ddp_wrapper_merges_to_bsp():
    """The DDP-style wrapper in osp mode (each training forward counts a step) and in ssp mode (each sends
    the update before it): average_models() gives BSP's model."""
    start = torch.tensor([1.0, 2.0, -3.0, 0.5])
    model = bps.DistributedDataParallel(Linear(start))
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    train(model, optimizer, 9)
    model.average_models()
    assert torch.equal(model.module.w.detach(), bsp_result(start, 9, bps.size())), model.module.w


def model_change_is_averaged_in_place():
    """The one push_pull of osp sums in the change it is given (a temporary the schedule makes for it):
    synchronize() returns that very tensor, holding the exact average, with no copy in or out."""
    change = torch.full((5,), float(bps.rank()))
    averaged = ops.synchronize(ops.post_model_change(change, name="osp.inplace", priority=0,
                                                     compression=bps.Compression.none))
    assert averaged is change, "the average came back in another tensor than the change"
    expected = sum(range(bps.size())) / bps.size()
    assert torch.equal(change, torch.full((5,), expected)), change


def refusals():
    """What osp cannot honour is refused with the reason."""
    expect_error(bps.SynclineError, lambda: bps.push_pull(torch.ones(3), name="raw"),
                 ["osp mode", "SYNCLINE_SYNC_MODE"], "a raw push_pull ran in osp mode")
    expect_error(bps.SynclineError, lambda: bps.push_pull_async_inplace(torch.ones(3), name="raw"),
                 ["osp mode"], "a raw push_pull_async_inplace ran in osp mode")
    expect_error(bps.SynclineError, lambda: bps.allreduce(torch.ones(3), name="raw"),
                 ["allreduce is refused in osp mode"], "Horovod's allreduce ran in osp mode")
    model = torch.nn.Linear(2, 1)
    expect_error(ValueError, lambda: bps.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                                              cross_iteration=True),
                 ["osp", "cross-iteration"], "cross-iteration overlap was accepted in osp mode")
    expect_error(ValueError, lambda: bps.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                                              op=bps.Sum),
                 ["op=Sum", "osp mode"], "op=Sum was accepted in osp mode")
    assert bps.broadcast_object({"rank": bps.rank()}, root_rank=0) == {"rank": 0}  # broadcasts still work


CHECKS = {f.__name__: f for f in (one_worker_equals_local_training, merged_model_equals_bsp,
                                  one_synchronization_in_flight_under_random_delays, chosen_period_grows_and_agrees,
                                  ddp_wrapper_merges_to_bsp, model_change_is_averaged_in_place,
                                  refusals)}

if __name__ == "__main__":
    run_check(CHECKS, bps)
