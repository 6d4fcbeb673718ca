"""Trains a small CNN on scikit-learn's handwritten digits through Syncline.

    pslaunch --workers 2 --servers 1 -- python examples/torch/train_digits.py

Written as a BytePS script would be; only the import names Syncline. Each
worker takes its share of every global batch, DistributedOptimizer averages
the gradients through the servers, so N workers train like one process on
the whole global batch. Rank 0 prints the loss of every epoch and the final
accuracy on held-out digits. `--single` trains the same model in one process
without Syncline, over the same global batches, for comparison.
"""
import argparse
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from sklearn.datasets import load_digits


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=15)
    p.add_argument("--batch-size", type=int, default=64, help="global batch size (split across workers)")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--seed", type=int, default=0, help="data split and shuffling (the same on every worker)")
    p.add_argument("--init-seed", type=int, default=None,
                   help="seed of the model's initial weights (default: --seed plus the rank, so that workers "
                        "start apart and broadcast_parameters must make them equal)")
    p.add_argument("--wrapper", choices=["optimizer", "ddp"], default="optimizer",
                   help="DistributedOptimizer (BytePS style) or the DistributedDataParallel wrapper")
    p.add_argument("--fp16", action="store_true", help="push_pull gradients as float16 (as --compression fp16)")
    p.add_argument("--compression", default="none",
                   help="how gradients travel: none, fp16 (a cast in Python), or one libsyncline applies with error "
                        "feedback: bf16, int8, onebit, topk:R, randomk:R (R: the fraction of values sent)")
    p.add_argument("--cross-iteration", action="store_true",
                   help="overlap each step's parameter updates with the next forward pass "
                        "(also SYNCLINE_CROSS_ITERATION=1)")
    p.add_argument("--single", action="store_true", help="train in this process alone, without Syncline")
    p.add_argument("--save", default=None, help="write the final parameters here ({rank} is replaced)")
    return p.parse_args()


class DigitsNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc1 = nn.Linear(32 * 4 * 4, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.relu(self.fc1(x.flatten(1)))
        return self.fc2(x)


def compressor(bps, name):
    """bps.Compression's compressor called `name` ("int8", "topk:0.01", ...)."""
    kind, _, ratio = name.partition(":")
    if kind in ("topk", "randomk"):
        return getattr(bps.Compression, kind)(float(ratio))
    if not hasattr(bps.Compression, kind):
        raise SystemExit(f"--compression {name}: not one of none, fp16, bf16, int8, onebit, topk:R, randomk:R")
    return getattr(bps.Compression, kind)


def load_data(seed):
    digits = load_digits()
    x = torch.tensor(digits.images / 16.0, dtype=torch.float32).unsqueeze(1)
    y = torch.tensor(digits.target, dtype=torch.long)
    order = torch.tensor(np.random.RandomState(seed).permutation(len(y)))
    x, y = x[order], y[order]
    held_out = len(y) // 5
    return (x[held_out:], y[held_out:]), (x[:held_out], y[:held_out])


def main():
    args = parse_args()
    torch.set_num_threads(1)  # workers share this host's cores
    if args.single:
        rank, size, bps = 0, 1, None
    else:
        import syncline.torch as bps  # a BytePS script has: import byteps.torch as bps

        bps.init()
        rank, size = bps.rank(), bps.size()
    if args.batch_size % size:
        raise SystemExit(f"--batch-size {args.batch_size} does not split evenly over {size} workers")
    (train_x, train_y), (test_x, test_y) = load_data(args.seed)
    torch.manual_seed(args.init_seed if args.init_seed is not None else args.seed + rank)
    model = DigitsNet()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    if bps is not None:
        compression = compressor(bps, "fp16" if args.fp16 else args.compression)
        if args.wrapper == "ddp":
            model = bps.DistributedDataParallel(model, compression=compression)
        else:
            bps.broadcast_parameters(model.state_dict(), root_rank=0)
            optimizer = bps.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                                 compression=compression,
                                                 cross_iteration=True if args.cross_iteration else None)
            bps.broadcast_optimizer_state(optimizer, root_rank=0)
    if rank == 0:
        overlap = getattr(optimizer, "cross_iteration", False)
        print(f"training on {len(train_y)} digits, testing on {len(test_y)}; {size} worker(s), "
              f"global batch {args.batch_size}, {args.epochs} epochs" +
              (", updates overlapping the next forward pass" if overlap else ""), flush=True)
    shuffle = torch.Generator().manual_seed(args.seed)
    per_worker = args.batch_size // size
    for epoch in range(1, args.epochs + 1):
        start = time.perf_counter()
        order = torch.randperm(len(train_y), generator=shuffle)
        total, batches = 0.0, 0
        for first in range(0, len(order) - args.batch_size + 1, args.batch_size):
            mine = order[first + rank * per_worker: first + (rank + 1) * per_worker]
            optimizer.zero_grad()
            loss = F.cross_entropy(model(train_x[mine]), train_y[mine])
            loss.backward()
            optimizer.step()
            total += loss.item()
            batches += 1
        if rank == 0:
            print(f"epoch {epoch}/{args.epochs}: loss {total / batches:.4f} ({time.perf_counter() - start:.2f} s)",
                  flush=True)
    if bps is not None:
        # With cross-iteration overlap the last updates may still be running; in osp and ssp
        # modes (SYNCLINE_SYNC_MODE) every worker takes the global model.
        wrapper = optimizer if args.wrapper == "optimizer" else model
        wrapper.synchronize()
        wrapper.average_models()
    model.eval()
    with torch.no_grad():
        accuracy = (model(test_x).argmax(1) == test_y).float().mean().item()
    print(f"rank {rank}: final accuracy {accuracy:.4f} on {len(test_y)} held-out digits", flush=True)
    if args.save:
        torch.save({n: p.detach().clone() for n, p in model.state_dict().items()},
                   args.save.replace("{rank}", str(rank)))
    if bps is not None:
        bps.shutdown()


if __name__ == "__main__":
    main()
