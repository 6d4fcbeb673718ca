"""What the end-to-end training workers (bench/torch/train_step.py, bench/tensorflow/train_step.py)
share: their options, the timed loop (batches made outside the timing), and the JSON line
bench/torch/run.py reads."""
import argparse
import json
import os
import statistics
import sys
import time

from benchenv import machine_cpu_ticks


def parse_args(models, baseline_mode):
    p = argparse.ArgumentParser()
    p.add_argument("--model", choices=list(models), required=True)
    p.add_argument("--mode", choices=["compute", "syncline", baseline_mode], required=True)
    p.add_argument("--batch", type=int, default=8, help="per-worker batch")
    p.add_argument("--steps", type=int, default=10, help="timed steps")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--task", choices=["synthetic", "learnable"], default="synthetic",
                   help="synthetic: random labels (step time only); learnable: labels from a fixed teacher")
    p.add_argument("--lr", type=float, default=0.001)
    p.add_argument("--curve", action="store_true", help="report every step's loss and time since the first step")
    p.add_argument("--compute-ms", type=float, default=0.0,
                   help="each step also sleeps this long before its forward pass (an accelerator's compute, which "
                        "leaves the CPU to the others: emulated hosts here share two cores)")
    p.add_argument("--straggler", choices=["none", "one", "rotating"], default="none",
                   help="timed steps whose compute takes twice as long: every step of worker 0 (one), or step i of "
                        "worker i mod workers (rotating: each worker slow one step in `workers`)")
    p.add_argument("--ddp-hook", choices=["none", "bf16", "powersgd"], default="none",
                   help="--mode ddp (torch): DDP's communication hook, bf16 casts or PowerSGD of rank 4")
    p.add_argument("--as-worker", default="0/1", metavar="RANK/WORKERS",
                   help="--mode compute: the worker this process stands for, so that --straggler slows the steps "
                        "it would slow in a job")
    return p.parse_args()


class Straggler:
    """Slows the steps --straggler names to twice their compute, by sleeping as long again before the
    forward pass (the median forward + backward of the warmup steps plus --compute-ms). Call
    before_step(i) at the start of step i and computed(seconds) with each step's forward + backward time."""

    def __init__(self, a, rank, size):
        if a.mode == "compute":  # alone, standing for one worker of the job
            rank, size = (int(v) for v in a.as_worker.split("/"))
        self.a, self.rank, self.size = a, rank, size
        self._warmup_compute = []

    def before_step(self, i):
        slow = i >= self.a.warmup and (
            (self.a.straggler == "one" and self.rank == 0) or
            (self.a.straggler == "rotating" and i % self.size == self.rank))
        extra = statistics.median(self._warmup_compute) if slow and self._warmup_compute else 0.0
        time.sleep(self.a.compute_ms / 1000 * (2 if slow else 1) + extra)

    def computed(self, i, seconds):
        if i < self.a.warmup:
            self._warmup_compute.append(seconds)


class Times(list):
    """The seconds of each timed step, and `cpu_busy`: the share of the whole machine's CPU time
    (every core, every process: /proc/stat) that was busy from the first timed step's start to the
    last one's end, or None where /proc/stat cannot be read. Emulated hosts share this machine's
    cores, so a share near 1 says the steps were bound by the CPU, not by the links."""
    cpu_busy = None


def time_steps(a, rank, next_batch, step, curve=None):
    """Runs a.warmup + a.steps steps, step(*next_batch()) each (step returns once the step is done);
    returns the seconds of the timed ones (Times, with the machine's busy CPU share over them). Into
    `curve` (a list) goes each step's (seconds of steps so far, making batches not counted; the loss
    step returned). Rank 0 shows each step on stderr."""
    times = Times()
    training_s = 0.0  # the steps' own time, without making batches
    ticks_at_start = None
    for i in range(a.warmup + a.steps):
        batch = next_batch()
        if i == a.warmup:
            ticks_at_start = machine_cpu_ticks()
        start = time.perf_counter()
        loss = step(*batch)
        took = time.perf_counter() - start
        training_s += took
        if curve is not None:
            curve.append((round(training_s, 4), float(loss)))
        if i >= a.warmup:
            times.append(took)
        if rank == 0:
            print(f"step {i + 1}/{a.warmup + a.steps}: {1000 * (time.perf_counter() - start):.0f} ms",
                  file=sys.stderr, flush=True)
    ticks_at_end = machine_cpu_ticks()
    if ticks_at_start and ticks_at_end and ticks_at_end[1] > ticks_at_start[1]:
        times.cpu_busy = (ticks_at_end[0] - ticks_at_start[0]) / (ticks_at_end[1] - ticks_at_start[1])
    return times


def report(a, rank, size, params, times, curve=None, osp_period=None, accuracy=None, compute_ms=None,
           parts_ms=None, late_merges=None):
    """Prints the JSON line of this worker: median step time, samples per second of the job, and the
    loss curve, the final held-out accuracy, the median forward + backward of the timed steps and
    the mean of each part of a step (parts_ms), osp's merges that waited and the machine's busy CPU
    share over the timed steps (times.cpu_busy), where they were measured."""
    # In osp mode a period's wait for the network falls on one step of the period: the median of
    # the steps would hide it, so the mean is reported (over whole periods where the timed steps
    # are a multiple of the period; a chosen period changes during the run).
    # A straggler's slow steps, and ssp's waits for one, fall on some steps too.
    uneven = os.environ.get("SYNCLINE_SYNC_MODE") in ("osp", "ssp") or a.straggler != "none"
    step_s = statistics.mean(times) if uneven else statistics.median(times)
    row = {"mode": a.mode, "model": a.model, "rank": rank, "workers": size, "params": params,
           "step_ms": 1000 * step_s, "samples_per_s": a.batch * size / step_s}
    if curve is not None:
        row["curve"] = curve
    if osp_period is not None:
        row["osp_period"] = osp_period
    if accuracy is not None:
        row["accuracy"] = accuracy
    if compute_ms is not None:
        row["compute_ms"] = compute_ms
    if parts_ms is not None:
        row["parts_ms"] = parts_ms
    if late_merges is not None:
        row["late_merges"] = late_merges
    if times.cpu_busy is not None:
        row["cpu_busy"] = times.cpu_busy
    print(json.dumps(row), flush=True)
