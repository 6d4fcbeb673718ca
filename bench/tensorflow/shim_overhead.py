#!/usr/bin/env python3
"""Shim-overhead benchmark: the goodput of one push_pull through the Python shims against the same
push_pull from C++ (syncline-bench-worker), same sizes, same local job shape, in one run.

  .venv/bin/python bench/tensorflow/shim_overhead.py [--runs 5] [--apis tf,tf-graph,torch] [--in-flight 8]

Each run starts one job per API (--workers, 2 by default, and 1 server on this host), the C++
reference first (and C++ summing into a second buffer, as the TensorFlow shim
must: its tensors are immutable); with --in-flight N, N tensors per call, all
started before any is waited for (a gradient list), on both sides. Runs are
interleaved and medians reported, with the ratio shim / C++ in place (issue
target: >= 0.9 for tf at >= 1 MiB). With --in-process (one tensor per call)
each run also starts, per API, a job that times the same push_pull from C++
in the shim's own processes, in place and into a second buffer, in a random
order each iteration (shim_worker.py --interleave-cpp): a second table gives
those ratios, free of the drift between jobs. Run it with the Python of the shims' environment
(.venv/bin/python, made by scripts/build).
"""
import argparse
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT / "bench"))
from benchenv import clean_env, json_lines, require_current_package  # noqa: E402

PSLAUNCH = str(Path(sys.executable).parent / "pslaunch")
MIB = 1024 * 1024


def job(worker_argv, workers, env=None, timeout=600):
    argv = [PSLAUNCH, "--workers", str(workers), "--servers", "1", "--timeout", str(timeout), "--", *worker_argv]
    out = subprocess.run(argv, env=clean_env({"SYNCLINE_LOG_LEVEL": "warn", **(env or {})}), stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, timeout=timeout + 30)
    if out.returncode != 0:
        sys.exit(f"failed ({out.returncode}): {' '.join(argv)}\n{out.stdout[-3000:]}")
    rows = [r for r in json_lines(out.stdout) if "goodput_MBps" in r]
    # The slower worker bounds the job: its goodput per size (and, from a shim job with
    # --interleave-cpp, the same for the C++ calls it made: under "cpp" and "cpp out").
    sizes = {r["bytes"] for r in rows}
    got = {size: min(r["goodput_MBps"] for r in rows if r["bytes"] == size) for size in sizes}
    for key, label in (("cpp_goodput_MBps", "cpp"), ("cpp_out_goodput_MBps", "cpp out")):
        if rows and all(key in r for r in rows):
            got[label] = {size: min(r[key] for r in rows if r["bytes"] == size) for size in sizes}
    return got


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
    p.add_argument("--in-process", action="store_true",
                   help="also time the shims beside C++ calls in their own processes (one tensor per call)")
    p.add_argument("--build", default=str(ROOT / "build"))
    a = p.parse_args()
    require_current_package(ROOT, a.build)
    if a.in_process and a.in_flight != 1:
        p.error("--in-process compares single-tensor calls: use --in-flight 1")
    apis = [x for x in a.apis.split(",") if x]
    sizes = [int(s) for s in a.sizes.split(",")]
    common = ["--sizes", a.sizes, "--seconds", str(a.seconds), "--in-flight", str(a.in_flight)]
    cpp = [str(Path(a.build) / "bin" / "syncline-bench-worker"), *common]
    interleave = ["--interleave-cpp", str(Path(a.build) / "lib" / "libsyncline_bench_timed_push_pull.so")]
    samples = {name: {s: [] for s in sizes} for name in ["C++", "C++ out", *apis]}
    beside = {name: {s: [] for s in sizes} for name in (apis if a.in_process else [])}  # (shim, C++, C++ out)
    for run in range(1, a.runs + 1):
        for name in samples:
            api, numpy_path = name.removesuffix("-numpy"), name.endswith("-numpy")
            argv = cpp if name == "C++" else [*cpp, "--separate-output"] if name == "C++ out" else [
                sys.executable, str(HERE / "shim_worker.py"), "--api", api, *common]
            env = {"SYNCLINE_TF_OP": "0"} if numpy_path else None
            got = job(argv, a.workers, env)
            for s in sizes:
                samples[name][s].append(got[s])
            print(f"  [run {run}/{a.runs}] {name:14s} " + "  ".join(f"{s // MIB:3d} MiB {got[s]:7.0f} MB/s"
                                                                  for s in sizes), flush=True)
            if name in beside:
                got = job([*argv, *interleave], a.workers, env)
                for s in sizes:
                    beside[name][s].append((got[s], got["cpp"][s], got["cpp out"][s]))
                print(f"  [run {run}/{a.runs}] {name + ' beside C++':25s} " + "  ".join(
                    f"{s // MIB:3d} MiB x{got[s] / got['cpp'][s]:.2f}" for s in sizes), flush=True)
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
    if beside:
        print("\nthe same push_pull from C++ in each shim job's own processes, calls in a random order each iteration; "
              "medians of the runs' ratios (shim / C++ in place, shim / C++ into a second buffer, C++ second buffer / "
              "in place)")
        print(f"  {'size':>7s} " + " ".join(f"{n:>14s} {'/out':>5s} {'out/':>5s}" for n in beside))
        for s in sizes:
            cells = []
            for n in beside:
                runs = beside[n][s]
                cells.append(f"{statistics.median(x / c for x, c, _ in runs):14.2f} "
                             f"{statistics.median(x / o for x, _, o in runs):5.2f} "
                             f"{statistics.median(o / c for _, c, o in runs):5.2f}")
            print(f"  {s // MIB:4d} MiB " + " ".join(cells))


if __name__ == "__main__":
    main()
