"""What the end-to-end training workers (bench/torch/train_step.py, bench/tensorflow/train_step.py)
share: their options, the timed loop (batches made outside the timing), and the JSON line
bench/torch/run.py reads."""
import argparse
import json
import statistics
import sys
import time


def parse_args(models, baseline_mode):
    p = argparse.ArgumentParser()
    p.add_argument("--model", choices=list(models), required=True)
    p.add_argument("--mode", choices=["compute", "syncline", baseline_mode], required=True)
    p.add_argument("--batch", type=int, default=8, help="per-worker batch")
    p.add_argument("--steps", type=int, default=10, help="timed steps")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    return p.parse_args()


def time_steps(a, rank, next_batch, step):
    """Runs a.warmup + a.steps steps, step(*next_batch()) each (step returns once the step is done);
    returns the seconds of the timed ones. Rank 0 shows each step on stderr."""
    times = []
    for i in range(a.warmup + a.steps):
        batch = next_batch()
        start = time.perf_counter()
        step(*batch)
        if i >= a.warmup:
            times.append(time.perf_counter() - start)
        if rank == 0:
            print(f"step {i + 1}/{a.warmup + a.steps}: {1000 * (time.perf_counter() - start):.0f} ms",
                  file=sys.stderr, flush=True)
    return times


def report(a, rank, size, params, times):
    """Prints the JSON line of this worker: median step time, and samples per second of the job."""
    step_s = statistics.median(times)
    print(json.dumps({"mode": a.mode, "model": a.model, "rank": rank, "workers": size, "params": params,
                      "step_ms": 1000 * step_s, "samples_per_s": a.batch * size / step_s}), flush=True)
