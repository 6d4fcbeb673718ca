"""One worker of the end-to-end PyTorch benchmark: timed SGD steps of a model.

  --mode compute   this process alone, no communication (the floor)
  --mode syncline  syncline.torch's DistributedOptimizer (launched by pslaunch)
  --mode ddp       torch.nn.parallel.DistributedDataParallel over gloo (RANK,
                   WORLD_SIZE, MASTER_ADDR, MASTER_PORT in the environment)

Prints one JSON line: the median step time over the timed steps and the
samples per second of the whole job (global batch / step time).
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import models  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", choices=models.NAMES, required=True)
    p.add_argument("--mode", choices=["compute", "syncline", "ddp"], required=True)
    p.add_argument("--batch", type=int, default=8, help="per-worker batch")
    p.add_argument("--steps", type=int, default=10, help="timed steps")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model, make_batch, loss_fn = models.build(a.model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.001, momentum=0.9)
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
        model = torch.nn.parallel.DistributedDataParallel(model)
    data = torch.Generator().manual_seed(rank)
    times = []
    for i in range(a.warmup + a.steps):
        x, y = make_batch(a.batch, data)
        start = time.perf_counter()
        optimizer.zero_grad()
        loss_fn(model(x), y).backward()
        optimizer.step()
        if i >= a.warmup:
            times.append(time.perf_counter() - start)
        if rank == 0:
            print(f"step {i + 1}/{a.warmup + a.steps}: {1000 * (time.perf_counter() - start):.0f} ms",
                  file=sys.stderr, flush=True)
    step_s = statistics.median(times)
    params = sum(t.numel() for t in model.parameters())
    print(json.dumps({"mode": a.mode, "model": a.model, "rank": rank, "workers": size, "params": params,
                      "step_ms": 1000 * step_s, "samples_per_s": a.batch * size / step_s}), flush=True)
    if a.mode == "syncline":
        bps.shutdown()
    elif a.mode == "ddp":
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
