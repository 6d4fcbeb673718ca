"""Checks that run inside every worker of a job: python torch_checks.py CHECK.

Each check asserts exact outcomes and prints 'CHECK ok' at its end; a failed
assertion exits non-zero, which ends the job with the worker's traceback.
"""
import os
import threading
import time

import torch

import least_squares as ls
import syncline.torch as bps
from expect import expect_error, run_check
from syncline import _session


def exact_sums():
    """push_pull of known values returns exact sums and averages in every dtype, in each calling style."""
    n, size, rank = bps.size(), bps.size(), bps.rank()
    for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
        base = torch.arange(1000, dtype=torch.float64) % 8  # small integers: sums exact even in bfloat16
        mine = (base * (rank + 1)).to(dtype)
        total = sum(base * (r + 1) for r in range(size))
        got = bps.push_pull(mine, average=False, name=f"sum.{dtype}")
        assert torch.equal(got.double(), total), (dtype, got[:8], total[:8])
        assert torch.equal(mine.double(), base * (rank + 1)), "push_pull must not change its input"
        got = bps.push_pull(mine * size, average=True, name=f"avg.{dtype}")
        assert torch.equal(got.double(), total), (dtype, "average")
        inplace = mine.clone()
        assert bps.push_pull_inplace(inplace, average=False, name=f"inplace.{dtype}") is inplace
        assert torch.equal(inplace.double(), total), (dtype, "inplace")
        handle = bps.push_pull_async(mine, average=False, name=f"async.{dtype}", priority=5)
        got = bps.synchronize(handle)
        assert torch.equal(got.double(), total), (dtype, "async")
        assert not hasattr(bps, "nothing")
    # A non-contiguous view, summed into its own memory.
    matrix = torch.full((4, 6), float(rank + 1)).t()
    bps.push_pull_inplace(matrix, average=False, name="strided")
    assert torch.equal(matrix, torch.full((6, 4), float(sum(range(1, size + 1)))))
    # poll: eventually true, and synchronize after it returns at once.
    handle = bps.push_pull_async_inplace(torch.ones(100000), average=False, name="polled")
    for _ in range(100000):
        if bps.poll(handle):
            break
    result = bps.synchronize(handle)
    assert torch.equal(result, torch.full((100000,), float(n)))
    # fp16 compression: float32 in, float32 out, within fp16 precision.
    values = torch.linspace(-3, 3, 5000) * (rank + 1)
    expected = sum(torch.linspace(-3, 3, 5000) * (r + 1) for r in range(size)) / size
    got = bps.push_pull(values, average=True, name="fp16", compression=bps.Compression.fp16)
    assert got.dtype == torch.float32
    assert torch.allclose(got, expected, rtol=2e-3, atol=2e-3), (got - expected).abs().max()
    # Differentiable: the gradient of a summed tensor is summed too.
    x = torch.ones(10, requires_grad=True)
    y = bps.push_pull(x, average=False, name="differentiable")
    (y * (rank + 1)).sum().backward()
    assert torch.equal(x.grad, torch.full((10,), float(sum(range(1, size + 1)))))
    # A tensor declared ahead of its first push_pull.
    bps.declare("declared", torch.zeros(3))
    assert torch.equal(bps.push_pull(torch.ones(3), average=False, name="declared"), torch.full((3,), float(n)))


def broadcasts():
    """Workers seeded apart end equal: parameters, optimizer state, objects and integer tensors."""
    rank = bps.rank()
    torch.manual_seed(100 + rank)
    model = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.BatchNorm1d(7), torch.nn.Linear(7, 2))
    model(torch.randn(4, 5)).sum().backward()  # BatchNorm counts a batch: an int64 buffer
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01 * (rank + 1))
    if rank != 0:
        optimizer.step()  # only non-roots have Adam state: the root's (empty) state must win
    root_state = {k: v.clone() for k, v in model.state_dict().items()}
    bps.broadcast_parameters(model.state_dict(), root_rank=0)
    bps.broadcast_optimizer_state(optimizer, root_rank=0)
    seen = bps.broadcast_object({"rank": rank, "state": root_state, "text": "é" * 1000}, root_rank=0)
    assert seen["rank"] == 0 and seen["text"] == "é" * 1000
    for name, value in model.state_dict().items():
        assert torch.equal(value, seen["state"][name]), name
    assert optimizer.param_groups[0]["lr"] == 0.01, optimizer.param_groups[0]["lr"]
    assert len(optimizer.state) == 0, "the root's optimizer had no state yet"
    # Root 1, and an integer tensor with values no float sum keeps exact.
    big = torch.tensor([2**62 + rank, -(2**40), 7], dtype=torch.int64)
    bps.broadcast_parameters([("big", big)], root_rank=1)
    assert big.tolist() == [2**62 + 1, -(2**40), 7]
    assert bps.broadcast_object(b"\x00\xff" * 3 if rank == 1 else None, root_rank=1) == b"\x00\xff" * 3


def errors():
    """Bad calls raise documented exceptions with clear messages; nothing hangs."""
    expect_error(TypeError, lambda: bps.push_pull(torch.ones(3, dtype=torch.int32)),
                 ["torch.int32", "torch.float32", "torch.bfloat16"], "an int32 push_pull was accepted")
    bps.push_pull(torch.ones(4), name="shape")
    expect_error(ValueError, lambda: bps.push_pull(torch.ones(5), name="shape"), ["'shape'", "[4]", "[5]"],
                 "a name reused with another shape was accepted")
    expect_error(ValueError, lambda: bps.synchronize(12345), ["12345"], "an unknown handle was accepted")
    expect_error(ValueError, lambda: bps.broadcast_parameters([("x", torch.ones(2))], root_rank=bps.size()),
                 ["root_rank"], "a root beyond the job was accepted")
    _shutdown_refuses_new_calls_and_a_second_one_waits()
    expect_error(bps.NotInitializedError, bps.rank, ["shut down"], "rank() after shutdown() answered")


def _shutdown_refuses_new_calls_and_a_second_one_waits():
    """While shutdown() runs (here: in a closer of its own), a new push_pull and init() are refused,
    and a second shutdown() from another thread returns only once the worker has left."""
    session, seen = _session.current(), {}

    def during_shutdown():
        expect_error(bps.NotInitializedError, lambda: bps.push_pull(torch.ones(4), name="shape"), ["shutting down"],
                     "a push_pull started during shutdown()")
        expect_error(bps.NotInitializedError, bps.init, ["shutting down"], "init() during shutdown() was answered")

        def second():
            bps.shutdown()
            seen["left"] = session.left.is_set()

        seen["thread"] = threading.Thread(target=second)
        seen["thread"].start()

    session.on_shutdown(during_shutdown)
    bps.shutdown()
    seen["thread"].join(timeout=60)
    assert seen.get("left") is True, "a second shutdown() returned before the first had left the job"


def dead_peer():
    """A worker that leaves mid-job without shutting down: the other's push_pull fails, naming it."""
    if bps.rank() == 1:
        bps.push_pull(torch.ones(10), name="before")
        os._exit(0)  # gone, without telling the scheduler
    bps.push_pull(torch.ones(10), name="before")
    e = expect_error(bps.SynclineError, lambda: bps.push_pull(torch.ones(10), name="after"), ["worker 1"],
                     "a push_pull with a dead peer succeeded")
    print(f"dead_peer raised: {e}", flush=True)
    print("dead_peer ok", flush=True)
    os._exit(0)


def early_finish():
    """A worker that shuts down after fewer push_pulls than the other: the other's next push_pull fails
    at once (not after the request timeout), naming the worker and the tensor."""
    for _ in range(2):
        bps.push_pull(torch.ones(10), name="steps")
    if bps.rank() == 1:
        return  # shuts down cleanly, two push_pulls short
    start = time.monotonic()
    e = expect_error(bps.SynclineError, lambda: bps.push_pull(torch.ones(10), name="steps"),
                     ["worker 1 finished without pushing round 2", "[tensor 'steps']"],
                     "a push_pull no other worker makes succeeded")
    assert time.monotonic() - start < 30, f"the error took {time.monotonic() - start:.0f} s: {e}"
    print("early_finish ok", flush=True)
    os._exit(0)  # the job is over: nothing to shut down


def optimizer_passes():
    """backward_passes_per_step=2 averages gradients accumulated over two passes; parameters stay equal."""
    rank, size = bps.rank(), bps.size()
    model = torch.nn.Linear(3, 1, bias=False)
    with torch.no_grad():
        model.weight.fill_(1.0)
    optimizer = bps.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=1.0),
                                         named_parameters=model.named_parameters(), backward_passes_per_step=2)
    for _ in range(2):
        model(torch.full((1, 3), float(rank + 1))).sum().backward()  # gradient: rank+1 per element, twice
    optimizer.step()
    mean = sum(2.0 * (r + 1) for r in range(size)) / size
    assert torch.equal(model.weight, torch.full((1, 3), 1.0 - mean)), model.weight
    model(torch.ones(1, 3)).sum().backward()

    def two_more_passes():
        model(torch.ones(1, 3)).sum().backward()
        model(torch.ones(1, 3)).sum().backward()
    expect_error(RuntimeError, two_more_passes, ["backward_passes_per_step"],
                 "a third backward pass before step() was accepted")
    optimizer.synchronize()  # the second pass's gradients went out: finish them on every worker


def cross_iteration_adam():
    """Adam with overlapped updates moves parameters exactly as without overlap."""
    rank = bps.rank()
    models, optimizers = [], []
    for overlap in (False, True):
        torch.manual_seed(7)
        model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
        named = [(f"overlap{overlap}.{n}", p) for n, p in model.named_parameters()]
        optimizers.append(bps.DistributedOptimizer(torch.optim.Adam(model.parameters(), lr=0.01),
                                                   named_parameters=named, cross_iteration=overlap))
        models.append(model)
    assert [o.cross_iteration for o in optimizers] == [False, True]
    calls = [0, 0]
    if hasattr(optimizers[0], "register_step_post_hook"):  # torch >= 2.0
        for i, optimizer in enumerate(optimizers):
            optimizer.register_step_post_hook(lambda *args, i=i: calls.__setitem__(i, calls[i] + 1))
    data = torch.Generator().manual_seed(rank)
    for _ in range(5):
        x = torch.randn(4, 6, generator=data)
        for model, optimizer in zip(models, optimizers):
            optimizer.zero_grad()
            model(x).square().sum().backward()
            optimizer.step()
    optimizers[1].synchronize()
    for (name, a), b in zip(models[0].named_parameters(), models[1].parameters()):
        assert torch.equal(a, b), name
    if hasattr(optimizers[0], "register_step_post_hook"):
        assert calls == [5, 5], f"step hooks ran {calls} times in 5 steps"
    import io
    torch.save(models[1], io.BytesIO())  # a wrapped model still pickles


class _SlowSGD(torch.optim.SGD):
    """SGD whose update takes a while: a read that does not wait for it sees the old parameters."""

    def step(self, closure=None):
        time.sleep(0.3)
        return super().step(closure)


def cross_iteration_setting():
    """Overlap is off unless SYNCLINE_CROSS_ITERATION=1 (or cross_iteration=True); reads and writes of a parameter by hand (state_dict(),
    load_state_dict(), detach(), an in-place clamp) wait for its update, reads of its shape do not;
    step(closure) runs without overlap."""
    rank, size = bps.rank(), bps.size()
    mean = sum(r + 1 for r in range(size)) / size
    default = os.environ.get("SYNCLINE_CROSS_ITERATION") == "1"
    made = {}
    for label, make in (("sgd", lambda ps: torch.optim.SGD(ps, lr=0.1)), ("adam", lambda ps: torch.optim.Adam(ps)),
                        ("lbfgs", lambda ps: torch.optim.LBFGS(ps)), ("subclass", lambda ps: _SlowSGD(ps, lr=0.1))):
        model = torch.nn.Linear(2, 1)
        made[label] = bps.DistributedOptimizer(make(model.parameters()),
                                               named_parameters=[(f"{label}.{n}", p) for n, p in model.named_parameters()])
    got = {label: o.cross_iteration for label, o in made.items()}
    assert got == {"sgd": default, "adam": default, "lbfgs": default, "subclass": default}, got

    model = torch.nn.Linear(4, 1, bias=False)
    with torch.no_grad():
        model.weight.fill_(1.0)
    optimizer = bps.DistributedOptimizer(_SlowSGD(model.parameters(), lr=1.0),
                                         named_parameters=[("slow.weight", model.weight)], cross_iteration=True)

    def one_step(closure=None):
        optimizer.zero_grad()
        model(torch.full((1, 4), float(rank + 1))).sum().backward()
        return optimizer.step(closure)

    one_step()  # returns at once; the update sleeps first
    assert model.weight.shape == (1, 4) and optimizer._updater.is_pending(model.weight), \
        "reading a parameter's shape waited for its update"
    assert torch.equal(model.state_dict()["weight"], torch.full((1, 4), 1.0 - mean)), \
        "state_dict() read the weight before its update"
    before = {k: v.clone() for k, v in model.state_dict().items()}
    one_step()
    model.load_state_dict(before)  # must not be overwritten by the update still running
    optimizer.synchronize()
    assert torch.equal(model.weight, before["weight"]), "an update still in flight overwrote load_state_dict()"
    one_step()
    assert torch.equal(model.weight.detach(), before["weight"] - mean), "a read by hand saw the weight before its update"
    one_step()
    with torch.no_grad():
        model.weight.clamp_(max=-100.0)  # a write by hand lands after the update, not under it
    optimizer.synchronize()
    assert torch.equal(model.weight, torch.full((1, 4), -100.0)), model.weight
    assert type(model.weight) is torch.nn.Parameter
    assert one_step(lambda: torch.tensor(3.0)).item() == 3.0  # the closure's loss, as without overlap
    assert torch.equal(model.weight, torch.full((1, 4), -100.0 - mean)), "step(closure) returned before its update"


def optimizer_api():
    """Horovod/BytePS usage: synchronize() + clipping + skip_synchronize(); DDP's no_sync(); one wrapper per
    parameter; shutdown() finishes overlapped updates still in flight."""
    rank, size = bps.rank(), bps.size()
    mean = sum(r + 1 for r in range(size)) / size
    model = torch.nn.Linear(4, 1, bias=False)
    with torch.no_grad():
        model.weight.fill_(1.0)
    optimizer = bps.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.5),
                                         named_parameters=model.named_parameters())
    model(torch.full((1, 4), float(rank + 1))).sum().backward()
    optimizer.synchronize()
    assert torch.equal(model.weight.grad, torch.full((1, 4), mean)), model.weight.grad
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)  # norm 2*mean -> each element 0.5
    with optimizer.skip_synchronize():
        optimizer.step()
    assert torch.allclose(model.weight, torch.full((1, 4), 0.75)), model.weight
    expect_error(ValueError, lambda: bps.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                                              named_parameters=model.named_parameters()),
                 ["already has its gradient averaged"], "a second wrapper over the same parameters was accepted")

    net = bps.DistributedDataParallel(torch.nn.Linear(2, 1, bias=False), device_ids=None)
    with torch.no_grad():
        net.module.weight.fill_(0.0)
    with net.no_sync():
        net(torch.full((1, 2), float(rank + 1))).sum().backward()
        net(torch.full((1, 2), float(rank + 1))).sum().backward()
    net(torch.full((1, 2), float(rank + 1))).sum().backward()  # sends all three passes' sum
    assert torch.equal(net.module.weight.grad, torch.full((1, 2), 3 * mean)), net.module.weight.grad

    layer = torch.nn.Linear(3, 3)
    with torch.no_grad():
        layer.weight.fill_(1.0)
        layer.bias.fill_(0.0)
    overlapped = bps.DistributedOptimizer(torch.optim.SGD(layer.parameters(), lr=1.0),
                                          named_parameters=[("late." + n, p) for n, p in layer.named_parameters()],
                                          cross_iteration=True)
    layer(torch.full((1, 3), float(rank + 1))).sum().backward()
    overlapped.synchronize()  # with overlap too: the gradients are averaged, ready to be clipped
    assert torch.equal(layer.weight.grad, torch.full((3, 3), mean)), layer.weight.grad
    overlapped.step()  # returns before the update; shutdown() must finish it
    expect_error(ValueError, lambda: overlapped.add_param_group({"params": [torch.zeros(1, requires_grad=True)]}),
                 ["fixed when it is built"], "a parameter group added after construction was accepted")
    bps.shutdown()
    assert torch.equal(layer.weight, torch.full((3, 3), 1.0 - mean)), layer.weight
    assert torch.equal(layer.bias, -torch.ones(3)), layer.bias


def horovod_names():
    """horovod.torch's names for the same collectives: allreduce with its ops and scale factors, broadcast,
    allgather of uneven first dimensions in any dtype, and DistributedOptimizer(op=, gradient_predivide_factor=)."""
    rank, size = bps.rank(), bps.size()
    base = torch.arange(12, dtype=torch.float32) % 5
    mine = base * (rank + 1)
    total = base * sum(r + 1 for r in range(size))
    assert torch.equal(bps.allreduce(mine * size, name="hvd.avg"), total), "allreduce averages by default"
    assert torch.equal(bps.allreduce(mine, name="hvd.sum", op=bps.Sum), total)
    assert torch.equal(bps.allreduce(mine, False, "hvd.sum.old"), total), "average=False sums (the older spelling)"
    scaled = bps.allreduce(mine, name="hvd.scaled", op=bps.Sum, prescale_factor=4.0, postscale_factor=0.5)
    assert torch.equal(scaled, total * 2), scaled
    inplace = mine.clone()
    assert bps.allreduce_(inplace, name="hvd.inplace", op=bps.Sum) is inplace
    assert torch.equal(inplace, total)
    assert torch.equal(bps.synchronize(bps.allreduce_async(mine, name="hvd.async", op=bps.Sum)), total)
    inplace = mine.clone()
    handle = bps.allreduce_async_(inplace, name="hvd.async_", op=bps.Sum, prescale_factor=0.25, postscale_factor=2.0)
    assert bps.synchronize(handle) is inplace and torch.equal(inplace, total * 0.5)
    # The factors apply on either side of the sum, as Horovod's: float16 values whose sum overflows float16
    # (40960 x 2 or more workers) average exactly when prescaled by 1/4 and postscaled by 4.
    halves = torch.full((8,), 40960.0, dtype=torch.float16)
    got = bps.allreduce(halves, name="hvd.fp16.factors", prescale_factor=0.25, postscale_factor=4.0)
    assert got.dtype == torch.float16 and torch.equal(got, halves), got
    assert torch.equal(mine, base * (rank + 1)), "allreduce must not change its input"
    x = torch.ones(4, requires_grad=True)  # the gradient is allreduced with the same op and factors
    y = bps.allreduce(x, name="hvd.grad", op=bps.Sum, prescale_factor=2.0, postscale_factor=3.0)
    (y * (rank + 1)).sum().backward()
    assert torch.equal(x.grad, torch.full((4,), 6.0 * sum(r + 1 for r in range(size)))), x.grad
    expect_error(ValueError, lambda: bps.allreduce(mine, name="hvd.adasum", op=bps.Adasum), ["Adasum", "op=Average"],
                 "op=Adasum was accepted")
    expect_error(ValueError, lambda: bps.allreduce(mine, average=True, op=bps.Sum), ["op=", "average="],
                 "op and average together were accepted")
    expect_error(ValueError, lambda: bps.allreduce(mine, op="max"), ["'max'", "Average or Sum"],
                 "an unknown op was accepted")

    # Integer tensors sum exactly, wrapping on overflow as integers do; their average is rounded toward zero,
    # as horovod.torch's.
    def wrapped(value, bits):
        return (value + 2**(bits - 1)) % 2**bits - 2**(bits - 1)

    ranks, triangle = sum(range(size)), sum(r + 1 for r in range(size))
    longs = torch.tensor([2**62 + rank, -(2**40) * (rank + 1), 7 * rank - 5, -1], dtype=torch.int64)
    got = bps.allreduce(longs, op=bps.Sum, name="hvd.int64")
    assert got.dtype == torch.int64 and got.tolist() == [wrapped(2**62 * size + ranks, 64), -(2**40) * triangle,
                                                         7 * ranks - 5 * size, -size], got
    ints = torch.tensor([2**31 - 1, rank - 1], dtype=torch.int32)
    assert bps.allreduce_(ints, op=bps.Sum) is ints and ints.tolist() == [wrapped((2**31 - 1) * size, 32), ranks - size]
    bytes_ = torch.tensor([200 + rank], dtype=torch.uint8)
    assert bps.synchronize(bps.allreduce_async(bytes_, op=bps.Sum)).tolist() == [(200 * size + ranks) % 256]
    one = torch.tensor([int(rank == 0), -int(rank == 0), 3], dtype=torch.int16)
    assert bps.allreduce(one).tolist() == [0, 0, 3], "an integer average is sum / size rounded toward zero"
    expect_error(ValueError, lambda: bps.allreduce(longs, op=bps.Sum, prescale_factor=2.0), ["int64", "exactly"],
                 "a scale factor on an integer tensor was accepted")
    expect_error(TypeError, lambda: bps.allreduce(torch.ones(2, dtype=torch.bool)), ["torch.bool", "torch.int64"],
                 "a bool tensor was allreduced")

    # Unnamed calls in a loop (a metric each step, say) reuse one tensor per dtype and shape, their rounds
    # kept apart even with many in flight at once, instead of declaring a tensor (and keys) per call.
    def unnamed_calls(rounds):
        handles = [bps.allreduce_async(torch.full((3,), float(i * (rank + 1))), op=bps.Sum) for i in range(rounds)]
        for i, handle in enumerate(handles):
            assert torch.equal(bps.synchronize(handle), torch.full((3,), float(i * triangle))), (i, handle)
        for i in range(rounds):
            assert bps.allreduce(torch.tensor(float(i + rank)), op=bps.Sum).item() == i * size + size * (size - 1) / 2
            assert bps.broadcast(torch.tensor([i + rank]), root_rank=size - 1).item() == i + size - 1
            assert bps.broadcast(torch.tensor([i + rank / 2]), root_rank=0).item() == i
        x = torch.full((3,), float(i), requires_grad=True)  # forward and gradient: two rounds of one tensor
        (bps.push_pull(x, average=False) * (rank + 1)).sum().backward()
        assert torch.equal(x.grad, torch.full((3,), float(triangle))), x.grad
        return sorted(_session.current()._declared)

    assert unnamed_calls(1) == unnamed_calls(30), "unnamed calls of the same tensors declared new ones"

    big = torch.tensor([2**62 + rank, -7], dtype=torch.int64)
    got = bps.broadcast(big, root_rank=1, name="hvd.big")
    assert got.tolist() == [2**62 + 1, -7] and big.tolist() == [2**62 + rank, -7], (got, big)
    assert bps.broadcast_(big, 0) is big and big.tolist() == [2**62, -7]

    rows = torch.full((rank + 1, 2), 2**40 + rank, dtype=torch.int64)
    gathered = bps.allgather(rows, name="hvd.rows")
    assert gathered.tolist() == [[2**40 + r] * 2 for r in range(size) for _ in range(r + 1)], gathered
    halves = bps.allgather(torch.full((1,), rank + 0.5, dtype=torch.bfloat16))
    assert halves.dtype == torch.bfloat16 and halves.tolist() == [r + 0.5 for r in range(size)]
    expect_error(ValueError, lambda: bps.allgather(torch.zeros(2, rank + 1)), ["every dimension but the first",
                                                                              "rank 1: torch.float32 [2, 2]"],
                 "tensors of different trailing dimensions were gathered")
    expect_error(ValueError, lambda: bps.allgather(torch.tensor(1.0)), ["at least one dimension"],
                 "a 0-dimensional tensor was gathered")
    assert bps.allgather_object({"rank": rank}) == [{"rank": r} for r in range(size)]

    # op=Sum; and float16 gradients of 10000 x size x (rank + 1), of which rank 2's overflows float16 (90000 with
    # 3 workers) unless divided by the predivide factor (size) first: the average (60000) then comes back exact.
    mean = sum(r + 1 for r in range(size)) / size
    big = 10000.0 * size
    for label, kwargs, scale, lr, expected in (
            ("sum", {"op": bps.Sum}, 1.0, 0.25, 1.0 - 0.25 * mean * size),
            ("predivided", {"gradient_predivide_factor": float(size), "compression": bps.Compression.fp16}, big,
             2.0**-16, 1.0 - 2.0**-16 * big * mean)):
        model = torch.nn.Linear(4, 1, bias=False)
        with torch.no_grad():
            model.weight.fill_(1.0)
        named = [(label + "." + n, p) for n, p in model.named_parameters()]
        optimizer = bps.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=lr), named_parameters=named,
                                             **kwargs)
        model(torch.full((1, 4), scale * (rank + 1))).sum().backward()
        optimizer.step()
        assert torch.equal(model.weight, torch.full((1, 4), expected)), (label, model.weight)
    layer = torch.nn.Linear(2, 1)
    expect_error(ValueError, lambda: bps.DistributedOptimizer(torch.optim.SGD(layer.parameters(), lr=0.1),
                                                              op=bps.Adasum), ["Adasum"], "op=Adasum was accepted")
    expect_error(ValueError, lambda: bps.DistributedOptimizer(torch.optim.SGD(layer.parameters(), lr=0.1), op=bps.Sum,
                                                              gradient_predivide_factor=2.0),
                 ["op=Average"], "a predivide factor with op=Sum was accepted")
    _trains_as_horovod_scripts_do()


def _trains_as_horovod_scripts_do():
    """Horovod's example pattern, through its names: workers seeded apart, broadcast, DistributedOptimizer with
    op=Average, fp16 compression and a predivide factor, and each step's loss averaged with allreduce (every
    worker sees the same); least squares, whose averaged loss must fall to under a hundredth of its start."""
    rank = bps.rank()
    torch.manual_seed(rank)
    model = torch.nn.Linear(ls.INPUTS, ls.OUTPUTS, bias=False)
    optimizer = torch.optim.SGD(model.parameters(), lr=ls.LEARNING_RATE)
    bps.broadcast_parameters(model.state_dict(), root_rank=0)
    bps.broadcast_optimizer_state(optimizer, root_rank=0)
    named = [("hvd.train." + n, p) for n, p in model.named_parameters()]
    optimizer = bps.DistributedOptimizer(optimizer, named_parameters=named, compression=bps.Compression.fp16,
                                         op=bps.Average, gradient_predivide_factor=2.0)
    losses = []
    for step in range(ls.STEPS):
        x, y = (torch.from_numpy(a) for a in ls.batch(rank, step))
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(bps.allreduce(loss.detach(), name="avg_loss").item())
    seen = bps.allgather(torch.tensor(losses[-1:]))
    assert torch.all(seen == losses[-1]), ("the averaged loss differs between workers", seen)
    assert losses[-1] < losses[0] / 100, losses


def cuda_sums():
    """CUDA tensors (chunk by chunk through the device stages, after torch's stream): exact sums in place
    and out of place, of a tensor of many chunks made on a busy side stream that nobody synchronises,
    and a DistributedOptimizer step on GPU parameters. Runs only where torch finds a GPU."""
    rank, size = bps.rank(), bps.size()
    device = torch.device("cuda", bps.local_rank() % torch.cuda.device_count())
    total = float(sum(r + 1 for r in range(size)))
    x = torch.full((3, 1000), float(rank + 1), device=device)
    assert torch.equal(bps.push_pull(x, average=False, name="cuda.out").cpu(), torch.full((3, 1000), total))
    bps.push_pull_inplace(x, average=False, name="cuda.in")
    assert x.is_cuda and torch.equal(x.cpu(), torch.full((3, 1000), total))
    side = torch.cuda.Stream(device)
    for step in range(3):
        with torch.cuda.stream(side):
            torch.cuda._sleep(100_000_000)  # the stream stays busy: a copy that does not wait reads too early
            big = torch.full((4 << 20,), float(rank + 1 + step), device=device)
            bps.push_pull_inplace(big, average=False, name="cuda.big")
        assert torch.equal(big.cpu(), torch.full((4 << 20,), total + size * step)), (step, big[:4])
    model = torch.nn.Linear(4, 1, bias=False).to(device)
    with torch.no_grad():
        model.weight.fill_(1.0)
    optimizer = bps.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=1.0),
                                         named_parameters=model.named_parameters())
    model(torch.full((1, 4), float(rank + 1), device=device)).sum().backward()
    optimizer.step()
    assert torch.equal(model.weight.cpu(), torch.full((1, 4), 1.0 - total / size))


CHECKS = {f.__name__: f for f in (early_finish, exact_sums, broadcasts, errors, dead_peer, optimizer_passes, cross_iteration_adam,
                                            cross_iteration_setting, optimizer_api, horovod_names,
                                            cuda_sums)}

if __name__ == "__main__":
    run_check(CHECKS, bps, leave_open=(errors, optimizer_api))
