"""A training script written for byteps.torch (or horovod.torch) with only its import changed, shaped
like BytePS's synthetic benchmark: it never calls shutdown(), as those libraries leave the job at
exit. With --raise-on-rank R, worker R raises mid-training while an operation of its own is in
flight."""
import argparse
import timeit

import torch

import syncline.torch as bps

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=5)
parser.add_argument("--raise-on-rank", type=int, default=-1)
args = parser.parse_args()

bps.init()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
optimizer = bps.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.01),
                                     named_parameters=model.named_parameters())
bps.broadcast_parameters(model.state_dict(), root_rank=0)
bps.broadcast_optimizer_state(optimizer, root_rank=0)
data, target = torch.randn(16, 32), torch.randint(0, 10, (16,))


def step():
    optimizer.zero_grad()
    torch.nn.functional.cross_entropy(model(data), target).backward()
    optimizer.step()


if args.raise_on_rank >= 0:
    bps.push_pull(torch.ones(4), name="pushed.once.by.all")  # declared (a collective) and summed once
    if bps.rank() == args.raise_on_rank:
        bps.push_pull_async(torch.ones(4), name="pushed.once.by.all")  # a second round: never completes
        raise RuntimeError("the user's script failed")
seconds = timeit.timeit(step, number=args.steps)
print(f"rank {bps.rank()}: {args.steps * 16 / seconds:.1f} samples/s", flush=True)
