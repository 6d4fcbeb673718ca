#!/usr/bin/env python3
"""Final accuracy on the digits task for each gradient compression, in one run: the digits example
(examples/torch/train_digits.py: 2 workers, each on an emulated host of its own, 15 epochs, global
batch 64) through Syncline with each
form, and PyTorch DDP (gloo) trained the same way, from the same start, with its own communication
hooks (fp32, bf16, PowerSGD of rank 4). Prints a table; --json writes {configuration: accuracy}
with the configuration names of bench/torch/run.py (input of tradeoff_svg.py).

  .venv/bin/python bench/compression/digits_accuracy.py --json /tmp/accuracy.json

SYNCLINE_MIN_COMPRESS_BYTES is 4096 here, so conv2 and fc1 (18 and 128 KiB, 98% of the model) are
compressed; the biases and conv1 are not (they would be under the default 64 KiB too). The tuner is
off (SYNCLINE_AUTOTUNE=0): its partition switches depend on timing and move the chunk boundaries,
and with them the lossy forms' results (onebit: 0.975-0.997 over runs with it on).
"""
import argparse
import importlib.util
import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "torch" / "train_digits.py"
sys.path.insert(0, str(ROOT / "bench"))
from benchenv import clean_env, require_current_package  # noqa: E402

SYNCLINE_FORMS = ["none", "bf16", "int8", "onebit", "topk:0.01"]
DDP_HOOKS = ["none", "bf16", "powersgd"]
WORKERS = 2


def syncline_name(form):
    label = {"none": "", "topk:0.01": "topk 1%"}.get(form, form)
    return "Syncline, server hosts" + (f" ({label})" if label else "")


def ddp_name(hook):
    return "DDP" + ("" if hook == "none" else f" {hook}")


def accuracy_of(output):
    m = re.search(r"rank 0: final accuracy ([0-9.]+)", output)
    if not m:
        raise RuntimeError("no accuracy in:\n" + output[-3000:])
    return float(m.group(1))


def run_syncline(form):
    pslaunch = str(Path(sys.executable).parent / "pslaunch")
    # Each worker on a host of its own, as in the cluster runs: two on one host would sum locally
    # and compress their sum once (one stream, not two), which is another experiment.
    out = subprocess.run([pslaunch, "--workers", str(WORKERS), "--servers", "1", "--emulated-hosts", str(WORKERS),
                          "--", sys.executable, str(EXAMPLE),
                          "--compression", form], env=clean_env({"SYNCLINE_MIN_COMPRESS_BYTES": "4096", "SYNCLINE_AUTOTUNE": "0"}),
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
    return accuracy_of(out.stdout)


def run_ddp(hook):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = [subprocess.Popen([sys.executable, __file__, "--ddp-worker", hook],
                              env=clean_env(dict(RANK=r, WORLD_SIZE=WORKERS, MASTER_ADDR="127.0.0.1", MASTER_PORT=port)),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for r in range(WORKERS)]
    outs = [p.communicate(timeout=600)[0] for p in procs]
    if any(p.returncode != 0 for p in procs):
        raise RuntimeError(f"DDP {hook} failed:\n" + "\n".join(o[-2000:] for o in outs))
    return accuracy_of(outs[0])


def ddp_worker(hook):
    """The example's training loop under torch DDP (same data split, start and hyperparameters)."""
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F

    sys.path.insert(0, str(ROOT / "bench" / "torch"))
    from train_step import register_ddp_hook

    spec = importlib.util.spec_from_file_location("train_digits", EXAMPLE)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, size = dist.get_rank(), dist.get_world_size()
    epochs, batch, seed = 15, 64, 0
    (train_x, train_y), (test_x, test_y) = example.load_data(seed)
    torch.manual_seed(seed + rank)
    model = example.DigitsNet()
    model = torch.nn.parallel.DistributedDataParallel(model, **({"bucket_cap_mb": 1024} if hook == "powersgd" else {}))
    register_ddp_hook(model, hook, warmup=2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    shuffle = torch.Generator().manual_seed(seed)
    per_worker = batch // size
    for _ in range(epochs):
        order = torch.randperm(len(train_y), generator=shuffle)
        for first in range(0, len(order) - batch + 1, batch):
            mine = order[first + rank * per_worker: first + (rank + 1) * per_worker]
            optimizer.zero_grad()
            F.cross_entropy(model(train_x[mine]), train_y[mine]).backward()
            optimizer.step()
    model.eval()
    with torch.no_grad():
        accuracy = (model(test_x).argmax(1) == test_y).float().mean().item()
    print(f"rank {rank}: final accuracy {accuracy:.4f}", flush=True)
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", help="write {configuration: accuracy} here")
    p.add_argument("--ddp-worker", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.ddp_worker:
        return ddp_worker(a.ddp_worker)
    require_current_package(ROOT)
    results = {}
    for hook in DDP_HOOKS:
        results[ddp_name(hook)] = run_ddp(hook)
        print(f"  {ddp_name(hook):32s} {results[ddp_name(hook)]:.4f}", flush=True)
    for form in SYNCLINE_FORMS:
        results[syncline_name(form)] = run_syncline(form)
        print(f"  {syncline_name(form):32s} {results[syncline_name(form)]:.4f}", flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(results) + "\n")


if __name__ == "__main__":
    sys.exit(main())
