"""One worker of the end-to-end PyTorch benchmark: timed SGD steps of a model.

  --mode compute   this process alone, no communication (the floor)
  --mode syncline  syncline.torch's DistributedOptimizer (launched by pslaunch; in osp
                   or ssp mode with SYNCLINE_SYNC_MODE)
  --mode ddp       torch.nn.parallel.DistributedDataParallel over gloo (RANK,
                   WORLD_SIZE, MASTER_ADDR, MASTER_PORT in the environment)

Prints one JSON line: the median step time over the timed steps and the
samples per second of the whole job (global batch / step time).
"""
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import models  # noqa: E402
import step_timing  # noqa: E402


def register_ddp_hook(model, hook, warmup):
    """DDP's own gradient compression, as a PyTorch user would pick it: bf16 casts, or PowerSGD of
    rank 4 with error feedback from the second step on (before the timed steps)."""
    if hook == "bf16":
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        model.register_comm_hook(None, default_hooks.bf16_compress_hook)
    elif hook == "powersgd":
        from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook
        state = powerSGD_hook.PowerSGDState(process_group=None, matrix_approximation_rank=4,
                                            start_powerSGD_iter=min(2, max(warmup, 2)))
        model.register_comm_hook(state, powerSGD_hook.powerSGD_hook)


def step_parts_ms(times, sleep_s, compute_s, step_s, model_sync, sync_at_warmup):
    """Mean milliseconds per timed step of each part of the step: the sleep standing for an
    accelerator's compute, forward + backward, optimizer.step() and, in osp mode, the parts of the
    synchronization it ran (start, wait, merge; "local update" is the rest of the optimizer's step);
    "other" is what the step took besides (zero_grad, the loss's value, the timing itself). In osp
    mode also how many of the timed steps' merges found their synchronization not back yet."""
    if not step_s:
        return None, None
    late_merges = None
    parts = {"sleep": 1000 * statistics.mean(sleep_s), "forward+backward": 1000 * statistics.mean(compute_s),
             "optimizer": 1000 * statistics.mean(step_s)}
    if model_sync is not None and sync_at_warmup:
        late_merges = f"{model_sync.late_merges - sync_at_warmup['late']} of {model_sync.merged - sync_at_warmup['merged']}"
        for part, seconds in model_sync.seconds.items():
            parts[part] = 1000 * (seconds - sync_at_warmup[part]) / len(step_s)
        parts["local update"] = parts["optimizer"] - parts["start"] - parts["wait"] - parts["merge"]
    parts["other"] = 1000 * statistics.mean(times) - parts["sleep"] - parts["forward+backward"] - parts["optimizer"]
    return parts, late_merges


def main():
    a = step_timing.parse_args(models.NAMES, "ddp")
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    task = models.build(a.model, learnable=a.task == "learnable")
    model, make_batch, loss_fn = task.model, task.batch, task.loss
    optimizer = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9)
    rank, size = 0, 1
    if a.mode == "syncline":
        import syncline.torch as bps
        bps.init()
        rank, size = bps.rank(), bps.size()
        bps.broadcast_parameters(model.state_dict(), root_rank=0)
        optimizer = bps.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    elif a.mode == "ddp":
        import torch.distributed as dist
        dist.init_process_group("gloo")
        rank, size = dist.get_rank(), dist.get_world_size()
        # PowerSGD's hook chains three all-reduces per bucket; with several buckets in flight gloo
        # sees them in different orders on different workers and fails (a size mismatch): one bucket.
        bucket = {"bucket_cap_mb": 1024} if a.ddp_hook == "powersgd" else {}
        model = torch.nn.parallel.DistributedDataParallel(model, **bucket)
        register_ddp_hook(model, a.ddp_hook, a.warmup)
    data = torch.Generator().manual_seed(rank)
    straggler = step_timing.Straggler(a, rank, size)
    steps = [0]
    compute_s = []  # forward + backward of each timed step (a CPU that others share makes it longer)
    step_s = []  # optimizer.step() of each timed step (in osp mode with its synchronization's parts)
    sleep_s = []  # the sleep of each timed step (--compute-ms, a straggler's)
    sync_at_warmup = {}  # osp mode: the schedule's seconds by part and its merges when the timed steps began

    def step(x, y):
        start = time.perf_counter()
        straggler.before_step(steps[0])
        if steps[0] >= a.warmup:
            sleep_s.append(time.perf_counter() - start)
        optimizer.zero_grad()
        start = time.perf_counter()
        loss = loss_fn(model(x), y)
        loss.backward()
        computed = time.perf_counter() - start
        straggler.computed(steps[0], computed)
        if steps[0] >= a.warmup:
            compute_s.append(computed)
        if steps[0] == a.warmup and getattr(optimizer, "_model_sync", None) is not None:
            sync = optimizer._model_sync
            sync_at_warmup.update(sync.seconds, merged=sync.merged, late=sync.late_merges)
        start = time.perf_counter()
        optimizer.step()
        if steps[0] >= a.warmup:
            step_s.append(time.perf_counter() - start)
        steps[0] += 1
        return loss.item() if a.curve else 0.0

    curve = [] if a.curve else None
    times = step_timing.time_steps(a, rank, lambda: make_batch(a.batch, data), step, curve)
    model_sync = getattr(optimizer, "_model_sync", None)  # osp mode: the period in force at the end
    period = getattr(model_sync, "period", None)
    accuracy = None
    if a.curve and task.accuracy is not None:
        if a.mode == "syncline":
            optimizer.average_models()  # osp and ssp: every worker takes the global model (bsp: nothing to do)
        accuracy = task.accuracy(model.module if a.mode == "ddp" else model)
    parts, late_merges = step_parts_ms(times, sleep_s, compute_s, step_s, model_sync, sync_at_warmup)
    step_timing.report(a, rank, size, sum(t.numel() for t in model.parameters()), times, curve,
                       osp_period=period, accuracy=accuracy,
                       compute_ms=1000 * statistics.median(compute_s) if compute_s else None,
                       parts_ms=parts, late_merges=late_merges)
    if a.mode == "syncline":
        bps.shutdown()
    elif a.mode == "ddp":
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
