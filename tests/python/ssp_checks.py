"""Checks of ssp mode that run inside every worker of a job: python ssp_checks.py CHECK (as osp_checks.py).

The job runs with SYNCLINE_SYNC_MODE=ssp and SYNCLINE_SSP_STALENESS. The
linear models of osp_checks.py (gradients that do not depend on the
parameters, dyadic values) make sums exact, so after average_models() the
model must equal BSP's bit for bit; the counting model shows, in each
worker's own parameters, how many steps of every other worker it has seen.
"""
import os
import random
import time

import torch

import syncline.torch as bps
from expect import expect_error, run_check
from osp_checks import LR, Linear, bsp_result, ddp_wrapper_merges_to_bsp, train, trains_as_local


def one_worker_equals_local_training():
    """With one worker, ssp moves the parameters as plain local SGD does."""
    torch.manual_seed(3)
    local = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh(), torch.nn.Linear(3, 1))
    distributed = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh(), torch.nn.Linear(3, 1))
    distributed.load_state_dict(local.state_dict())
    plain = torch.optim.SGD(local.parameters(), lr=0.25, momentum=0.5)
    ssp = bps.DistributedOptimizer(torch.optim.SGD(distributed.parameters(), lr=0.25, momentum=0.5),
                                   named_parameters=distributed.named_parameters())
    trains_as_local(local, plain, distributed, ssp, torch.randn(8, 4))
    assert ssp._model_sync.rounds == 7, ssp._model_sync.rounds  # 6 steps and average_models()


def model_equals_bsp_under_random_delays():
    """Workers slowed at random between steps, each reading models up to k steps stale: after
    average_models() every worker holds BSP's parameters exactly, whichever worker started where (no
    change is lost or counted twice)."""
    start = torch.tensor([1.0, 2.0, -3.0, 0.5])
    model = Linear(start if bps.rank() == 0 else torch.zeros(4))  # worker 0's start wins
    optimizer = bps.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=LR),
                                         named_parameters=[("w", model.w)])
    train(model, optimizer, 15, delays=random.Random(bps.rank()))
    optimizer.synchronize()  # gradients are local in ssp: nothing to wait for
    optimizer.average_models()
    assert torch.equal(model.w.detach(), bsp_result(start, 15, bps.size())), model.w


def no_worker_reads_more_than_k_steps_ahead():
    """Worker 0 is a straggler (it sleeps every step). Each worker's SGD step adds 1 to its own element of
    a shared counter, so the parameters a worker holds after its step t count the steps of every worker
    it has seen: never fewer than t - k + 1, and the fast workers do run ahead of worker 0."""
    k = int(os.environ["SYNCLINE_SSP_STALENESS"])
    size = bps.size()
    steps = 20
    model = Linear(torch.zeros(size))
    optimizer = bps.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=1.0),
                                         named_parameters=[("counts", model.w)])
    mine = torch.zeros(size)
    mine[bps.rank()] = -float(size)  # the step adds size to my element; the servers average it to 1
    largest_lead = 0
    for step in range(steps):
        if bps.rank() == 0:
            time.sleep(0.03)
        optimizer.zero_grad()
        model(mine).backward()
        optimizer.step()
        counts = model.w.detach()
        assert counts[bps.rank()] == step + 1, (step, counts)
        assert all(c >= step + 1 - k for c in counts.tolist()), f"step {step}: read {counts.tolist()}, k = {k}"
        largest_lead = max(largest_lead, step + 1 - int(counts.min()))
    lead = bps.broadcast_object(largest_lead, root_rank=1)
    if bps.rank() == 1:
        assert 0 < lead <= k, f"worker 1 ran {lead} steps ahead of the slowest (k = {k})"
    optimizer.average_models()
    assert model.w.detach().tolist() == [float(steps)] * size, model.w
    print(f"worker {bps.rank()}: the largest lead read was {largest_lead} steps", flush=True)


def refusals_and_broadcasts():
    """What ssp cannot honour is refused with the reason; broadcasts, summed as whole rounds, work every time."""
    expect_error(bps.SynclineError, lambda: bps.push_pull(torch.ones(3), name="raw"),
                 ["ssp mode", "running total", "SYNCLINE_SYNC_MODE"], "a raw push_pull ran in ssp mode")
    expect_error(bps.SynclineError, lambda: bps.allreduce(torch.ones(3), name="raw"),
                 ["allreduce is refused in ssp mode"], "Horovod's allreduce ran in ssp mode")
    model = torch.nn.Linear(2, 1)
    expect_error(ValueError, lambda: bps.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                                              cross_iteration=True),
                 ["ssp", "cross-iteration"], "cross-iteration overlap was accepted in ssp mode")
    expect_error(ValueError, lambda: bps.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                                              op=bps.Sum),
                 ["op=Sum", "ssp mode"], "op=Sum was accepted in ssp mode")
    for time_ in range(3):
        assert bps.broadcast_object({"time": time_, "rank": bps.rank()}, root_rank=time_ % 2) == \
            {"time": time_, "rank": time_ % 2}
        tensor = torch.full((5,), float(bps.rank() + 10 * time_))
        bps.broadcast_parameters([("t", tensor)], root_rank=0)
        assert torch.equal(tensor, torch.full((5,), float(10 * time_))), tensor


CHECKS = {f.__name__: f for f in (one_worker_equals_local_training, model_equals_bsp_under_random_delays,
                                  no_worker_reads_more_than_k_steps_ahead, ddp_wrapper_merges_to_bsp,
                                  refusals_and_broadcasts)}

if __name__ == "__main__":
    run_check(CHECKS, bps)
