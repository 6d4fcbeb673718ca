#!/usr/bin/env python3
"""Shim-overhead benchmark: the goodput of one push_pull through the Python shims against the same
push_pull from C++ (syncline-bench-worker), same sizes, same local job shape, in one run.

  .venv/bin/python bench/tensorflow/shim_overhead.py [--runs 5] [--apis tf,tf-graph,torch] [--in-flight 8]

Each run starts one job per API (--workers, 2 by default, and 1 server on this host), the C++
reference first (and C++ summing into a second buffer, as the TensorFlow shim
must: its tensors are immutable); with --in-flight N, N tensors per call, all
started before any is waited for (a gradient list), on both sides. Runs are
interleaved and medians reported, with the ratio shim / C++ in place (issue
target: >= 0.9 for tf at >= 1 MiB). Run it with the Python of the shims'
environment (.venv/bin/python, made by scripts/build).
"""
import argparse
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT / "bench"))
from benchenv import clean_env, json_lines  # noqa: E402

PSLAUNCH = str(Path(sys.executable).parent / "pslaunch")
MIB = 1024 * 1024


def job(worker_argv, workers, env=None, timeout=600):
    argv = [PSLAUNCH, "--workers", str(workers), "--servers", "1", "--timeout", str(timeout), "--", *worker_argv]
    out = subprocess.run(argv, env=clean_env({"SYNCLINE_LOG_LEVEL": "warn", **(env or {})}), stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, timeout=timeout + 30)
    if out.returncode != 0:
        sys.exit(f"failed ({out.returncode}): {' '.join(argv)}\n{out.stdout[-3000:]}")
    rows = [r for r in json_lines(out.stdout) if "goodput_MBps" in r]
    # The slower worker bounds the job: its goodput per size.
    return {size: min(r["goodput_MBps"] for r in rows if r["bytes"] == size) for size in {r["bytes"] for r in rows}}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--apis", default="tf,tf-graph,tf-numpy,tf-graph-numpy,torch",
                   help="tf, tf-graph: through the compiled SynclinePushPull op; tf-numpy, tf-graph-numpy: "
                        "the same where the op was not built (dlpack, tf.numpy_function); torch")
    p.add_argument("--sizes", default=f"{MIB},{4 * MIB},{16 * MIB}")
    p.add_argument("--seconds", type=float, default=2.0, help="per size and job")
    p.add_argument("--in-flight", type=int, default=1,
                   help="tensors per call, all started before any is waited for (a gradient list)")
    p.add_argument("--workers", type=int, default=2,
                   help="workers of each job (1: the shim's own cost, without three busy processes on two cores)")
    p.add_argument("--build", default=str(ROOT / "build"))
    a = p.parse_args()
    apis = [x for x in a.apis.split(",") if x]
    sizes = [int(s) for s in a.sizes.split(",")]
    common = ["--sizes", a.sizes, "--seconds", str(a.seconds), "--in-flight", str(a.in_flight)]
    cpp = [str(Path(a.build) / "bin" / "syncline-bench-worker"), *common]
    samples = {name: {s: [] for s in sizes} for name in ["C++", "C++ out", *apis]}
    for run in range(1, a.runs + 1):
        for name in samples:
            api, numpy_path = name.removesuffix("-numpy"), name.endswith("-numpy")
            argv = cpp if name == "C++" else [*cpp, "--separate-output"] if name == "C++ out" else [
                sys.executable, str(HERE / "shim_worker.py"), "--api", api, *common]
            got = job(argv, a.workers, {"SYNCLINE_TF_OP": "0"} if numpy_path else None)
            for s in sizes:
                samples[name][s].append(got[s])
            print(f"  [run {run}/{a.runs}] {name:14s} " + "  ".join(f"{s // MIB:3d} MiB {got[s]:7.0f} MB/s"
                                                                  for s in sizes), flush=True)
    print(f"\nloopback, {a.workers} worker(s) + 1 server, {a.in_flight} float32 tensor(s) per call; medians of {a.runs} runs "
          "(goodput: 2 x bytes / time, MB/s; ratio: / C++)")
    apis = ["C++ out", *apis]
    print(f"  {'size':>7s} {'C++':>8s} " + " ".join(f"{n:>14s} {'ratio':>6s}" for n in apis))
    for s in sizes:
        ref = statistics.median(samples["C++"][s])
        cells = []
        for n in apis:
            med = statistics.median(samples[n][s])
            cells.append(f"{med:14.0f} {med / ref:6.2f}")
        print(f"  {s // MIB:4d} MiB {ref:8.0f} " + " ".join(cells))


if __name__ == "__main__":
    main()
