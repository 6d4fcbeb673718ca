"""Checks of compressed push_pulls that run inside every worker of a job: python compression_checks.py CHECK.

The job runs with SYNCLINE_MIN_COMPRESS_BYTES=0 (every float32 tensor may be
compressed). The reference is int8 block quantization written here in numpy,
with float32 arithmetic in the order libsyncline's kernels use (no fused
multiply-add there), so the servers' sum-then-compress must match it bit for bit.
"""
import numpy as np
import torch

import least_squares as ls
import syncline.torch as bps
from syncline import _session
from expect import expect_error, run_check

BLOCK = 256  # int8 values per scale


def int8_round_trip(x):
    """What an int8 chunk of float32 `x` decodes to: per block, scale max|x| / 127 and
    values rounded half away from zero."""
    out = np.zeros_like(x)
    for start in range(0, len(x), BLOCK):
        block = x[start:start + BLOCK]
        top = np.max(np.abs(block))
        if top == 0:
            continue
        v = block * (np.float32(127) / top)
        q = np.trunc(v + np.copysign(np.float32(0.5), v)).astype(np.int8)
        out[start:start + BLOCK] = q.astype(np.float32) * (top / np.float32(127))
    return out


class Feedback:
    """Error feedback as libsyncline keeps it: encode value + residual, keep what was not sent."""

    def __init__(self, n):
        self.residual = np.zeros(n, dtype=np.float32)

    def send(self, values):
        total = values + self.residual
        decoded = int8_round_trip(total)
        self.residual = total - decoded
        return decoded


def values(rank, step, n=3000):
    return np.random.RandomState(100 * step + rank).standard_normal(n).astype(np.float32)


def int8_sums_equal_the_python_reference():
    """Four steps of an averaged push_pull in int8: every worker's result equals, bit for bit, the
    reference: each worker's chunk with its error feedback, decoded and summed in float32, averaged,
    and the average compressed again with the servers' own error feedback."""
    size = bps.size()
    workers = [Feedback(3000) for _ in range(size)]
    server = Feedback(3000)
    for step in range(4):
        result = bps.push_pull(torch.from_numpy(values(bps.rank(), step)), average=True, name="g",
                               compression=bps.Compression.int8).numpy()
        total = np.zeros(3000, dtype=np.float32)
        for rank in range(size):
            total = total + workers[rank].send(values(rank, step))
        expected = server.send(total * np.float32(1.0 / size))
        assert np.array_equal(result, expected), \
            f"step {step}: {np.sum(result != expected)} values differ, largest by {np.max(np.abs(result - expected))}"
        exact = np.mean([values(rank, step) for rank in range(size)], axis=0)
        assert not np.array_equal(result, exact), "int8 was not applied: the sum is exact"


def refusals_and_exact_broadcasts():
    """A compression a dtype cannot take, a ratio that would grow the tensor and one tensor name in two
    forms are refused with the reason; under the job's SYNCLINE_COMPRESSION broadcasts stay exact."""
    expect_error(bps.SynclineError,
                 lambda: bps.push_pull(torch.ones(3000, dtype=torch.float64), name="f64",
                                       compression=bps.Compression.onebit),
                 ["onebit takes fp32 values, not fp64"], "onebit of float64 was accepted")
    expect_error(ValueError, lambda: bps.Compression.topk(0.7), ["between 0 and 0.5"], "topk(0.7) was accepted")
    bps.push_pull(torch.ones(3000), name="twice", compression=bps.Compression.int8)
    expect_error(ValueError, lambda: bps.push_pull(torch.ones(3000), name="twice", compression=bps.Compression.topk(0.1)),
                 ["'twice'", "compression int8", "compression topk:0.1"], "a second form was accepted")
    weights = torch.from_numpy(values(bps.rank(), 9))
    bps.broadcast_parameters([("weights", weights)], root_rank=1)
    assert torch.equal(weights, torch.from_numpy(values(1, 9))), "the broadcast was not exact"


def job_compression_applies_to_float32_push_pulls():
    """SYNCLINE_COMPRESSION=onebit in the job (SYNCLINE_MIN_COMPRESS_BYTES=4096): a plain push_pull of
    float32 comes back as onebit (one magnitude, signs), a float64 one exactly."""
    result = bps.push_pull(torch.from_numpy(values(0, 0)), average=True, name="plain")
    assert len(torch.unique(result.abs())) == 1, "a float32 push_pull was not onebit"
    exact = bps.push_pull(torch.arange(3000, dtype=torch.float64), average=True, name="plain64")
    assert torch.equal(exact, torch.arange(3000, dtype=torch.float64)), exact
    # An unnamed float32 push_pull that travels compressed gets a tensor (and error feedback) of its own each
    # time; unnamed float64 ones, and float32 ones below SYNCLINE_MIN_COMPRESS_BYTES, reuse one.
    declared = set(_session.current()._declared)
    for _ in range(2):
        bps.push_pull(torch.from_numpy(values(0, 0)))
        bps.push_pull(torch.arange(3000, dtype=torch.float64))
        assert torch.equal(bps.push_pull(torch.arange(8.0)), torch.arange(8.0)), "a small float32 was compressed"
    new = sorted(set(_session.current()._declared) - declared)
    reused = {"syncline.noname.push_pull.float64[3000]", "syncline.noname.push_pull.float32[8]"}
    assert len(new) == 4 and reused <= set(new), new


def every_form_trains():
    """Each compressor trains the least-squares task of least_squares.py through
    DistributedOptimizer(compression=...): its first step is not the exact one, the loss falls below
    a hundredth of its start, and every worker ends with the same weights."""
    for name in ls.FORMS:
        model = torch.nn.Linear(ls.INPUTS, ls.OUTPUTS, bias=False)
        torch.nn.init.zeros_(model.weight)
        optimizer = bps.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=ls.LEARNING_RATE),
                                             named_parameters=[(f"least_squares.{name}", model.weight)],
                                             compression=ls.compression(bps.Compression, name))
        losses = [ls.loss(model.weight.detach().numpy())]
        for step in range(ls.STEPS):
            x, y = (torch.from_numpy(a) for a in ls.batch(bps.rank(), step))
            optimizer.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            optimizer.step()
            losses.append(ls.loss(model.weight.detach().numpy()))
            if step == 0:
                ls.check_compressed(name, model.weight.detach().numpy(), bps.size())
        weights = model.weight.detach().numpy().copy()
        ls.check_trained(name, losses, weights, bps.broadcast_object(weights, 0, name=f"least_squares.{name}.rank0"))


CHECKS = {f.__name__: f for f in (int8_sums_equal_the_python_reference, refusals_and_exact_broadcasts,
                                  job_compression_applies_to_float32_push_pulls, every_form_trains)}

if __name__ == "__main__":
    run_check(CHECKS, bps)
