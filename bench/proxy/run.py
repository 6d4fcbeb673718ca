#!/usr/bin/env python3
"""Scheduling-proxy benchmark: a layered training step (bench/proxy/layered_job.cc; VGG-16 or
ResNet-50 layer profiles, parameters scaled) run through real scheduler/server/worker processes,
in one run for each compute kind:

  compute-only    the step without communication: the floor
  comm-only       push_pull of every gradient with no compute
  FIFO            no scheduler: every chunk goes at once, in the order backward produced it
  scheduled       priority (forward order) + credit at the default settings
  grid            every (partition, credit) point; the best is reported

and the ratios the targets are stated in: scheduled / FIFO and
scheduled / max(compute-only, comm-only).

  bench/proxy/run.py loopback [--workers 2 --servers 1]        every process on this host
  sudo bench/proxy/run.py cluster [--rate 1gbit]                4 worker hosts, 2 server hosts (emulated)

By default the compute of a step is set equal to the comm-only time measured first (the regime
where overlap matters most); --compute-ms fixes it instead.
"""
import argparse
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "bench" / "cluster"))
from benchenv import clean_env, json_lines, parse_variants  # noqa: E402

MIB = 1024 * 1024


def log(*args):
    print(*args, flush=True)


class Loopback:
    name = "loopback"

    def __init__(self, a):
        self.a = a
        self.bin = Path(a.build_dir) / "bin"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def run(self, worker_args, env):
        argv = [str(self.bin / "pslaunch"), "--workers", str(self.a.workers), "--servers", str(self.a.servers),
                "--timeout", str(self.a.job_timeout), "--", str(self.bin / "syncline-bench-layered"), *worker_args]
        out = subprocess.run(argv, env=clean_env(dict(env, SYNCLINE_LOG_LEVEL="warn", SYNCLINE_SHM="0")),
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             timeout=self.a.job_timeout + 30)
        if out.returncode != 0:
            raise RuntimeError(f"job failed ({out.returncode}): {' '.join(argv)}\n{out.stdout[-3000:]}")
        return [r for r in json_lines(out.stdout) if "step_ms" in r]


class Cluster:
    name = "emulated cluster"

    def __init__(self, a):
        import jobs
        import netcluster
        self.jobs, self.netcluster, self.a = jobs, netcluster, a
        self.layout = jobs.Layout(a.workers, a.servers, a.colocate)

    def __enter__(self):
        self.c = self.netcluster.EmulatedCluster(self.layout.hosts, rate=self.a.rate, timeout=self.a.timeout)
        self.c.__enter__()
        log(f"emulated cluster: {self.layout.hosts} hosts, links {self.netcluster.format_rate(self.c.rate)} each way; "
            f"{self.a.workers} workers, {self.a.servers} servers{' colocated' if self.a.colocate else ' on their own hosts'}")
        return self

    def __exit__(self, *exc):
        return self.c.__exit__(*exc)

    def run(self, worker_args, env):
        command = [self.jobs.binary("syncline-bench-layered"), *worker_args]
        job = self.jobs.start_job(self.c, self.layout, command, dict(env, SYNCLINE_LOG_LEVEL="warn"),
                                  timeout=self.a.job_timeout)
        codes = job.wait(self.a.job_timeout + 10)
        if any(code != 0 for code in codes):
            raise RuntimeError("job failed: " + "; ".join(
                f"{p.name}: exit {code}\n{p.output()[-2000:]}" for p, code in zip(job.procs, codes) if code != 0))
        return [r for p in job.workers for r in json_lines(p.output()) if "step_ms" in r]


def step(platform, a, compute, compute_ms, env, communicate=True, warmup=None):
    """Median over workers of each worker's median step time, in ms."""
    args = ["--model", a.model, "--scale", str(a.scale), "--compute", compute, "--compute-ms", str(compute_ms),
            "--iterations", str(a.iterations), "--warmup", str(a.warmup if warmup is None else warmup), "--quiet"]
    if not communicate:
        args.append("--no-communication")
    rows = platform.run(args, env)
    if len(rows) != a.workers:
        raise RuntimeError(f"expected {a.workers} results, got {rows}")
    return statistics.median(r["step_ms"] for r in rows), rows[0]


def fifo_env(partition):
    """No scheduling anywhere: chunks in posting order, unlimited credit, servers answer as rounds complete."""
    return {"SYNCLINE_SCHEDULING": "fifo", "SYNCLINE_SCHEDULING_CREDIT": "0", "SYNCLINE_PARTITION_BYTES": partition,
            "SYNCLINE_AUTOTUNE": "0", "SYNCLINE_SERVER_SCHEDULE": "0"}


def scheduled_env(partition, credit_partitions):
    return {"SYNCLINE_SCHEDULING": "priority", "SYNCLINE_PARTITION_BYTES": partition,
            "SYNCLINE_SCHEDULING_CREDIT": credit_partitions * partition, "SYNCLINE_AUTOTUNE": "0"}


FIXED = {"SYNCLINE_AUTOTUNE": "0"}  # the defaults, untuned


def bench(platform, a):
    """Every configuration once per repeat, repeats interleaved (a slow phase of the machine hits all
    alike); each figure is the median over repeats."""
    results = []
    for compute in a.compute.split(","):
        comm, info = step(platform, a, "sleep", 0, fifo_env(MIB))
        compute_ms = a.compute_ms if a.compute_ms is not None else comm
        log(f"\n{platform.name}, {a.model} x{a.scale} ({info['layers']} layers, {info['grad_bytes'] / MIB:.1f} MiB of "
            f"gradients per worker), compute {compute} {compute_ms:.0f} ms per step, medians of {a.repeats}")
        configs = {"comm-only": ("sleep", 0, fifo_env(MIB), True),
                   "compute-only": (compute, compute_ms, FIXED, False),
                   "FIFO": (compute, compute_ms, fifo_env(MIB), True),
                   "scheduled (default)": (compute, compute_ms, FIXED, True),
                   "tuner": (compute, compute_ms, {}, True)}
        for label, env in a.variants.items():
            configs[f"default, {label}"] = (compute, compute_ms, dict(FIXED, **env), True)
        for partition in [int(p) for p in a.partitions.split(",")]:
            for credit in [int(c) for c in a.credits.split(",")]:
                configs[(partition, credit)] = (compute, compute_ms, scheduled_env(partition, credit), True)
        samples = {k: [] for k in configs}
        tuned = []
        for r in range(a.repeats):
            for k, (kind, ms, env, communicate) in configs.items():
                # The tuner searches during its first steps; its figure is the steps after.
                ms_step, row = step(platform, a, kind, ms, env, communicate,
                                    warmup=a.tuner_steps if k == "tuner" else None)
                samples[k].append(ms_step)
                label = k if isinstance(k, str) else f"{k[0] // 1024} KiB x {k[1]} credit"
                extra = ""
                if k == "tuner":
                    tuned.append((row["tuned_partition"], row["tuned_credit_partitions"], row["settled_at"]))
                    extra = (f"  (settled at step {row['settled_at']} on {row['tuned_partition'] // 1024} KiB x "
                             f"credit {row['tuned_credit_partitions']})")
                log(f"  [repeat {r + 1}/{a.repeats}] {label:24s} {samples[k][-1]:8.1f} ms{extra}")
        med = {k: statistics.median(v) for k, v in samples.items()}
        comm, floor, fifo, default = med["comm-only"], med["compute-only"], med["FIFO"], med["scheduled (default)"]
        grid = {k: v for k, v in med.items() if not isinstance(k, str)}
        best = min(grid, key=grid.get)
        bound = max(floor, comm)
        log(f"\n  {'configuration':32s} {'step ms':>8s} {'x FIFO':>7s} {'x max(compute, comm)':>21s}")
        for k, v in med.items():
            label = k if isinstance(k, str) else f"priority, {k[0] // 1024} KiB x credit {k[1]}"
            log(f"  {label:32s} {v:8.1f} {v / fifo:7.2f} {v / bound:21.2f}")
        log(f"  best grid point: {best[0] // 1024} KiB partitions, credit {best[1]} partitions: {grid[best]:.1f} ms, "
            f"{grid[best] / fifo:.2f} x FIFO, {grid[best] / bound:.2f} x max(compute, comm); "
            f"default {default / fifo:.2f} x FIFO")
        log(f"  tuner: {med['tuner']:.1f} ms, {med['tuner'] / grid[best]:.2f} x the best grid point, "
            f"{med['tuner'] / fifo:.2f} x FIFO; settled (step, partition KiB, credit) per repeat: "
            f"{[(s, p // 1024, c) for p, c, s in tuned]}")
        results.append(dict(compute=compute, compute_ms=compute_ms, median=med, best=best))
    return results


def trace(platform, a):
    """FIFO, scheduled (--trace-partition x --trace-credit) and scheduled with each --variant's
    settings, traced, and a picture of one step of each."""
    compute = a.compute.split(",")[0]
    comm, _ = step(platform, a, "sleep", 0, fifo_env(MIB))
    compute_ms = a.compute_ms if a.compute_ms is not None else comm
    traced = dict(SYNCLINE_TRACE="1", SYNCLINE_TRACE_START_STEP=a.warmup, SYNCLINE_TRACE_END_STEP=a.warmup + 2)
    panels = []
    scheduled = scheduled_env(a.trace_partition, a.trace_credit)
    runs = [("FIFO", fifo_env(MIB)), ("scheduled", scheduled),
            *[(f"scheduled, {label}", dict(scheduled, **env)) for label, env in a.variants.items()]]
    for name, env in runs:
        out = Path(a.trace) / re.sub(r"[^a-z0-9]+", "-", name.lower())
        ms, _ = step(platform, a, compute, compute_ms, dict(env, SYNCLINE_TRACE_DIR=str(out), **traced))
        log(f"  {name:10s} {ms:8.1f} ms per step; traces in {out}")
        label = env_label(env) + ("" if name in ("FIFO", "scheduled") else ", " + name.partition(", ")[2])
        panels.append(f"{name.partition(',')[0]} ({label})={out / 'worker-0.json'}")
    svg = Path(a.trace) / "timeline.svg"
    subprocess.run([sys.executable, str(Path(__file__).with_name("timeline_svg.py")), "--step", "1", "--out", str(svg),
                    *panels], check=True)


def trace_cost(platform, a):
    """What the timeline costs: the same scheduled job with tracing off, on but outside its steps
    (every chunk still timestamped, nothing kept), and recording every step; repeats interleaved,
    medians. Small partitions make chunks many, where per-chunk costs would show."""
    partition = a.trace_partition
    base = scheduled_env(partition, a.trace_credit)
    with tempfile.TemporaryDirectory() as out:
        variants = {
            "off": base,
            "on, idle": dict(base, SYNCLINE_TRACE="1", SYNCLINE_TRACE_DIR=out, SYNCLINE_TRACE_START_STEP=10**9,
                             SYNCLINE_TRACE_END_STEP=10**9),
            "recording": dict(base, SYNCLINE_TRACE="1", SYNCLINE_TRACE_DIR=out, SYNCLINE_TRACE_START_STEP=0,
                              SYNCLINE_TRACE_END_STEP=10**9),
        }
        for compute in a.compute.split(","):
            compute_ms = a.compute_ms if a.compute_ms is not None else 0
            times = {name: [] for name in variants}
            for r in range(a.repeats):
                for name, env in variants.items():
                    times[name].append(step(platform, a, compute, compute_ms, env)[0])
                log(f"  repeat {r + 1}/{a.repeats}: " + ", ".join(f"{n} {t[-1]:.1f} ms" for n, t in times.items()))
            med = {n: statistics.median(t) for n, t in times.items()}
            spread = {n: (max(t) - min(t)) / med[n] for n, t in times.items()}
            log(f"{compute} compute {compute_ms:.0f} ms, {partition // 1024} KiB partitions: " +
                "; ".join(f"{n} {med[n]:.1f} ms ({med[n] / med['off']:.3f} x off, spread {spread[n]:.0%})"
                          for n in variants))


def env_label(env):
    if env.get("SYNCLINE_SCHEDULING") == "fifo":
        return "all chunks at once, 1 MiB partitions"
    p = int(env["SYNCLINE_PARTITION_BYTES"])
    return f"priority, {p // 1024} KiB partitions, credit {int(env['SYNCLINE_SCHEDULING_CREDIT']) // p}"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("where", choices=["loopback", "cluster"])
    p.add_argument("--model", default="vgg16", choices=["vgg16", "resnet50"])
    p.add_argument("--scale", type=float, default=None, help="fraction of the parameters (default: 1/32 loopback, 1/16 cluster)")
    p.add_argument("--compute", default="sleep,cpu", help="compute kinds: sleep (GPU-like), cpu (busy arithmetic)")
    p.add_argument("--compute-ms", type=float, help="compute per step (default: the comm-only time)")
    p.add_argument("--iterations", type=int, default=8)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--tuner-steps", type=int, default=50, help="steps the tuner may search before it is measured")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--partitions", default=f"{256 * 1024},{MIB},{4 * MIB}")
    p.add_argument("--credits", default="1,2,4,8,16", help="credit grid, in partitions")
    p.add_argument("--workers", type=int)
    p.add_argument("--servers", type=int)
    p.add_argument("--colocate", action="store_true", help="cluster: servers on the worker hosts")
    p.add_argument("--rate", default="1gbit", help="cluster: link rate each way")
    p.add_argument("--timeout", type=float, default=3000, help="cluster: the whole run's deadline")
    p.add_argument("--job-timeout", type=int, default=300)
    p.add_argument("--build-dir", default=str(ROOT / "build"))
    p.add_argument("--trace", metavar="DIR", help="instead: trace FIFO and one scheduled point into DIR and draw a step")
    p.add_argument("--trace-partition", type=int, default=256 * 1024)
    p.add_argument("--trace-credit", type=int, default=4, help="in partitions")
    p.add_argument("--trace-cost", action="store_true",
                   help="instead: step time with tracing off, on outside its steps, and recording (--trace-partition)")
    p.add_argument("--variant", action="append", default=[], metavar="LABEL:NAME=VALUE,...",
                   help="also run the default configuration with these settings, labelled (repeatable); e.g. "
                        "'no server schedule:SYNCLINE_SERVER_SCHEDULE=0'")
    a = p.parse_args(argv)
    a.variants = parse_variants(a.variant)
    cluster = a.where == "cluster"
    a.workers = a.workers or (4 if cluster else 2)
    a.servers = a.servers or (2 if cluster else 1)
    a.scale = a.scale or (1 / 16 if cluster else 1 / 32)
    with (Cluster(a) if cluster else Loopback(a)) as platform:
        if a.trace_cost:
            trace_cost(platform, a)
        elif a.trace:
            trace(platform, a)
        else:
            bench(platform, a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
