#!/usr/bin/env python3
"""End-to-end training benchmark: Syncline's framework shims against the framework's own
data-parallel training, same model, same per-worker batch, same machine, in one run; each
configuration once per repeat, repeats interleaved, medians reported.

  compute-only   the same workers at once, without communication (the floor of a step)
  DDP            (torch) torch.nn.parallel.DistributedDataParallel, gloo all-reduce among the workers
  MWMS           (--framework tensorflow) tf.distribute.MultiWorkerMirroredStrategy, its ring all-reduce
  Syncline       the shim's DistributedOptimizer through Syncline's servers

  bench/torch/run.py loopback [--models mlp5m,mlp25m,mlp100m]      2 workers + 1 server on this host
  sudo bench/torch/run.py cluster [--models mlp25m,resnet18]       4 worker hosts, 1 Gbit/s links:
        Syncline with 4 server hosts, Syncline colocated (a server on each worker host), DDP
  sudo bench/torch/run.py cluster --framework tensorflow           the same with Keras models and MWMS

Run it with the Python of the shims' environment (.venv/bin/python, made by scripts/build).
The cluster mode also prints the link-rate floor (gradient bytes / link rate, each way).
With --straggler one worker's compute (or, rotating, a different worker's each step) takes twice as
long, e.g. bounded staleness against bsp with a sleep standing for the accelerator's compute:

  sudo bench/torch/run.py cluster --models mlp5m --configs compute,server --compute-ms 200 \
      --straggler rotating --variant "ssp:SYNCLINE_SYNC_MODE=ssp"
Hosts of several workers (hierarchical reduce: a host's workers sum among themselves and one copy of
each gradient leaves the host), against flat pushes and DDP on the same hosts:

  sudo bench/torch/run.py cluster --workers-per-host 2 --models mlp25m,resnet18 \
      --variant "flat:SYNCLINE_LOCAL_REDUCE=0" --configs compute,ddp,server
Loopback, the workers split into emulated hosts (pslaunch --emulated-hosts; local reduce among each
host's workers), against flat pushes:

  bench/torch/run.py loopback --workers 4 --models mlp5m,mlp25m --configs compute,ddp,syncline \
      --variant "flat:SYNCLINE_LOCAL_REDUCE=0" --variant "2 hosts:EMULATED_HOSTS=2"
Compression, against DDP's own hooks (bf16 casts, PowerSGD of rank 4), e.g.:

  sudo bench/torch/run.py cluster --models mlp25m,resnet18 --configs compute,ddp,server --ddp-hooks bf16,powersgd \
      --variant "int8:SYNCLINE_COMPRESSION=int8" --variant "onebit:SYNCLINE_COMPRESSION=onebit"
With --curve the MLPs train on a learnable task (labels from a fixed teacher) and the run reports
each configuration's loss against training time and samples (bench/torch/curves.py) and, for the
MLPs and the digits CNN (--models digits, real data), worker 0's held-out accuracy after the last
step (after average_models() in osp and ssp), e.g. osp:

  sudo bench/torch/run.py cluster --models mlp25m --configs ddp,server --curve --steps 80 --repeats 1 \
      --variant "osp1:SYNCLINE_SYNC_MODE=osp,SYNCLINE_OSP_PERIOD=1" --curve-svg docs/osp-{model}.svg
"""
import argparse
import json
import os
import re
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "bench" / "cluster"))
from benchenv import parse_variants, require_current_package  # noqa: E402

import curves  # noqa: E402
from platforms import PSLAUNCH, SYNCLINE_ENV, Cluster, Loopback, log  # noqa: E402


class Torch:
    step = str(HERE / "train_step.py")
    baseline, baseline_mode = "DDP", "ddp"
    models = {"loopback": "mlp5m,mlp25m,mlp100m", "cluster": "mlp25m,resnet18"}

    @staticmethod
    def baseline_env(rank, workers, addresses, port, ifname=None):
        env = dict(RANK=rank, WORLD_SIZE=workers, MASTER_ADDR=addresses[0], MASTER_PORT=port)
        return dict(env, GLOO_SOCKET_IFNAME=ifname) if ifname else env


class TensorFlow:
    step = str(ROOT / "bench" / "tensorflow" / "train_step.py")
    baseline, baseline_mode = "MWMS", "mwms"
    models = {"loopback": "mlp5m,mlp25m", "cluster": "mlp5m,mlp25m"}

    @staticmethod
    def baseline_env(rank, workers, addresses, port, ifname=None):
        config = {"cluster": {"worker": [f"{a}:{port + i}" for i, a in enumerate(addresses)]},
                  "task": {"type": "worker", "index": rank}}
        return dict(TF_CONFIG=json.dumps(config), TF_CPP_MIN_LOG_LEVEL=2)


FRAMEWORKS = {"torch": Torch, "tensorflow": TensorFlow}


def bench(platform, a):
    summary = []
    for model in a.models.split(","):
        configs = [c for c in platform.configs if not a.configs or any(word in c.lower() for word in a.configs)]
        samples = {c: [] for c in configs}
        busy = {c: [] for c in configs}  # the machine's busy CPU share over the timed steps, per repeat
        loss_curves = {}  # config -> worker 0's curve of the last repeat
        accuracy = {}  # config -> worker 0's held-out accuracy at the end of the last repeat
        info = {}
        for r in range(a.repeats):
            for config in configs:
                dropped = platform.drops() if hasattr(platform, "drops") else None
                rows = platform.run(config, model)
                if a.logs:
                    name = re.sub(r"[^A-Za-z0-9.]+", "-", f"{model} {config} {r + 1}").strip("-")
                    (Path(a.logs) / f"{name}.log").write_text(platform.last_output)
                ms = statistics.median(row["step_ms"] for row in rows)
                samples[config].append(ms)
                info = rows[0]
                if a.curve and config != "compute-only":
                    first = next(row for row in rows if row["rank"] == 0)
                    loss_curves[config] = first["curve"]
                    if "accuracy" in first:
                        accuracy[config] = first["accuracy"]
                extra = ""
                if dropped is not None:
                    extra = "   " + platform.drop_report(config, dropped, platform.drops(), a.warmup + a.steps)
                if "osp_period" in rows[0]:
                    extra += f"   (osp period at the end: {rows[0]['osp_period']})"
                if "compute_ms" in rows[0]:  # the median over workers of each one's median
                    extra += f"   forward + backward {statistics.median(r['compute_ms'] for r in rows):.1f} ms"
                if "parts_ms" in rows[0]:  # the mean over workers of each part's mean per step (they add up)
                    parts = ", ".join(f"{part} {statistics.mean(r['parts_ms'][part] for r in rows):.1f}"
                                      for part in rows[0]["parts_ms"])
                    extra += f"   mean step by part: {parts} ms"
                shares = [r["cpu_busy"] for r in rows if "cpu_busy" in r]  # a window under a tick has none
                if shares:  # the median over workers (each measured over its own timed steps)
                    busy[config].append(statistics.median(shares))
                    extra += f"   machine CPU busy {100 * busy[config][-1]:.0f}%"
                if "late_merges" in rows[0]:
                    extra += f"   merges that waited (worker 0): {next(r for r in rows if r['rank'] == 0)['late_merges']}"
                log(f"  [{model}, repeat {r + 1}/{a.repeats}] {config:24s} {ms:9.1f} ms per step{extra}")
        med = {c: statistics.median(v) for c, v in samples.items()}
        grad_bytes = 4 * info["params"]
        global_batch = a.batch * a.workers
        log(f"\n{platform.name}: {model} ({info['params'] / 1e6:.1f}M parameters, {grad_bytes / 2**20:.0f} MiB of "
            f"gradients), {a.workers} workers x batch {a.batch}, medians of {a.repeats}")
        base = a.fw.baseline
        cpu = {c: statistics.median(v) for c, v in busy.items() if v}
        log(f"  {'configuration':24s} {'step ms':>9s} {'samples/s':>10s} {'x ' + base:>7s} {'CPU busy':>9s}")
        for c, ms in med.items():
            share = f"{100 * cpu[c]:8.0f}%" if c in cpu else ""
            log(f"  {c:24s} {ms:9.1f} {1000 * global_batch / ms:10.1f} {ms / med.get(base, float('nan')):7.2f} {share}")
        row = dict(model=model, params=info["params"], median=med, baseline=a.fw.baseline, cpu_busy=cpu)
        if a.where == "cluster":
            floor_ms = 1000 * grad_bytes * 8 / platform.c.rate
            log(f"  link-rate floor {floor_ms:.1f} ms (gradient bytes / link rate, each way)")
            for c in med:
                if c.startswith("Syncline, server hosts") and "compute-only" in med:
                    bound = floor_ms + med["compute-only"]
                    log(f"  {c}: {med[c] / bound:.2f} x (floor + compute-only)")
            row["floor_ms"] = floor_ms
        if loss_curves:
            reference = next((c for c in loss_curves if c.startswith("Syncline")), a.fw.baseline)
            log(f"\n  loss on the learnable task (worker 0; lr {a.lr}), against {reference}:")
            for line in curves.report(loss_curves, reference, global_batch, accuracy, a.curve_window,
                                      a.curve_target):
                log(line)
            row["curves"] = loss_curves
            row["accuracy"] = accuracy
            if a.curve_svg:
                path = Path(a.curve_svg.replace("{model}", model))
                path.write_text(curves.svg(loss_curves, f"{model}: loss (mean of {a.curve_window} steps), "
                                           f"{platform.name}, {a.workers} workers x batch {a.batch}", global_batch,
                                           window=a.curve_window))
                log(f"  curves drawn in {path}")
        summary.append(row)
    log("\nsummary (JSON): " + json.dumps(summary))
    if a.json:
        Path(a.json).write_text(json.dumps(summary) + "\n")
    return summary


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("where", choices=["loopback", "cluster"])
    p.add_argument("--framework", choices=list(FRAMEWORKS), default="torch")
    p.add_argument("--models", default=None, help="comma-separated: mlp5m, mlp25m, mlp100m, resnet18, digits (torch)")
    p.add_argument("--batch", type=int, default=8, help="per-worker batch")
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--workers", type=int)
    p.add_argument("--servers", type=int, default=1, help="loopback: servers")
    p.add_argument("--workers-per-host", type=int, default=1,
                   help="cluster: workers on each worker host (a host's GPUs; Syncline reduces among them first)")
    p.add_argument("--rate", default="1gbit", help="cluster: link rate each way")
    p.add_argument("--timeout", type=float, default=5400, help="cluster: the whole run's deadline")
    p.add_argument("--queue-ms", type=float, help="cluster: depth of each link's queue, in ms at the link rate "
                   "(default: bench/cluster's shallow switch buffer)")
    p.add_argument("--job-timeout", type=int, default=600)
    p.add_argument("--curve", action="store_true",
                   help="train on a learnable task and report the loss curves: time and samples to the first "
                        "Syncline configuration's final loss")
    p.add_argument("--lr", type=float, default=0.004, help="--curve: the SGD learning rate (momentum 0.9)")
    p.add_argument("--curve-window", type=int, default=curves.WINDOW,
                   help="--curve: steps of the moving average losses are compared by (more for noisier losses)")
    p.add_argument("--curve-target", type=float,
                   help="--curve: the loss each configuration is timed to (default: the reference's final loss)")
    p.add_argument("--curve-svg", help="--curve: draw the curves here ({model} is replaced by the model's name)")
    p.add_argument("--logs", help="write each job's whole output (every process's, with "
                   "SYNCLINE_LOG_LEVEL as set) into this folder, a file per model, configuration and repeat")
    p.add_argument("--json", help="also write the summary here (input of bench/torch/bars_svg.py)")
    p.add_argument("--compute-ms", type=float, default=0.0,
                   help="every step also sleeps this long (an accelerator's compute, leaving the shared CPUs free)")
    p.add_argument("--straggler", choices=["none", "one", "rotating"], default="none",
                   help="timed steps whose compute takes twice as long, in every configuration: all of worker 0's "
                        "(one) or step i of worker i mod workers (rotating); step times are then means")
    p.add_argument("--ddp-hooks", default="", help="torch: also DDP with these communication hooks, comma-separated: "
                   "bf16, powersgd (rank 4)")
    p.add_argument("--configs", default="", help="only the configurations whose names contain one of these comma-separated words "
                   "(compute, ddp or mwms, server, colocated, syncline); ratios need the baseline")
    p.add_argument("--env", action="append", default=[], metavar="NAME=VALUE", help="a setting for Syncline's processes")
    p.add_argument("--variant", action="append", default=[], metavar="LABEL:NAME=VALUE,...",
                   help="also run Syncline with these settings, labelled (repeatable); e.g. "
                        "'256K x 2M:SYNCLINE_PARTITION_BYTES=262144,SYNCLINE_SCHEDULING_CREDIT=2097152'")
    a = p.parse_args(argv)
    a.configs = [c.strip().lower() for c in a.configs.split(",") if c.strip()]
    a.env = dict(item.split("=", 1) for item in a.env)
    a.variants = {"": a.env, **parse_variants(a.variant, a.env)}
    cluster = a.where == "cluster"
    a.workers = a.workers or (4 * a.workers_per_host if cluster else 2)
    if a.workers % a.workers_per_host:
        sys.exit(f"--workers {a.workers} do not split into hosts of --workers-per-host {a.workers_per_host}")
    a.fw = FRAMEWORKS[a.framework]
    a.ddp_hooks = [h.strip() for h in a.ddp_hooks.split(",") if h.strip()]
    if a.ddp_hooks and a.framework != "torch":
        sys.exit("--ddp-hooks are DDP's (--framework torch)")
    a.models = a.models or a.fw.models[a.where]
    if a.logs:
        Path(a.logs).mkdir(parents=True, exist_ok=True)
    if not os.access(PSLAUNCH, os.X_OK):
        sys.exit(f"{PSLAUNCH} is missing: run this with the shims' Python (.venv/bin/python, made by scripts/build)")
    require_current_package(ROOT)
    # The tuner is off here unless --env turns it on (platforms.SYNCLINE_ENV): say which, so that a
    # table of "nothing set" is not measured with it off by mistake.
    tuner_on = a.env.get("SYNCLINE_AUTOTUNE", SYNCLINE_ENV["SYNCLINE_AUTOTUNE"]) not in ("0", "false", "off")
    log("Syncline's online tuner (the base configuration; a --variant may set its own): " +
        ("on" if tuner_on else "off (--env SYNCLINE_AUTOTUNE=1 turns it on, as shipped)"))
    with (Cluster(a) if cluster else Loopback(a)) as platform:
        bench(platform, a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
