"""One worker of the shim-overhead benchmark: syncline-bench-worker's loop, through a Python shim.

  --api tf        syncline.tensorflow.push_pull of a tf.Tensor, eagerly
  --api tf-graph  the same call inside a tf.function
  --api torch     syncline.torch.push_pull_inplace of a torch tensor

For each size it push_pulls one float32 tensor of that size, waits, checks the
sum, repeatedly; rank 0's clock decides (by broadcast) when every worker stops.
Prints a JSON line per size in syncline-bench-worker's units: goodput counts
the tensor's bytes once each way, 2 * bytes / median iteration time.
"""
import argparse
import json
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def tf_api(graph):
    import tensorflow as tf

    import syncline.tensorflow as bps

    # One thread each, as for the C++ worker: idle framework threads spin-wait
    # on the cores the server and the other workers need.
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)

    def call(x, name):
        return bps.push_pull(x, average=False, name=name)

    if graph:
        call = tf.function(call)
    return bps, lambda n: tf.ones(n), call, lambda t: (float(t[0]), float(t[-1])), \
        lambda go: float(bps.broadcast(tf.constant([go]), root_rank=0, name="bench.go")[0])


def torch_api():
    import torch

    import syncline.torch as bps

    torch.set_num_threads(1)

    def call(x, name):
        x.fill_(1.0)  # the C++ loop refills its buffer too
        return bps.push_pull_inplace(x, average=False, name=name)

    def go_flag(go):
        flag = torch.tensor([go])
        bps.broadcast_parameters({"bench.go": flag}, root_rank=0)
        return float(flag[0])

    return bps, lambda n: torch.ones(n), call, lambda t: (float(t[0]), float(t[-1])), go_flag


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--api", choices=["tf", "tf-graph", "torch"], required=True)
    p.add_argument("--sizes", default="1048576,4194304,16777216")
    p.add_argument("--seconds", type=float, default=2.0)
    p.add_argument("--min-iterations", type=int, default=5)
    p.add_argument("--warmup", type=int, default=2)
    a = p.parse_args()
    bps, make, call, ends, go_flag = torch_api() if a.api == "torch" else tf_api(a.api == "tf-graph")
    bps.init()
    rank, workers = bps.rank(), bps.size()
    for size in (int(s) for s in a.sizes.split(",")):
        x = make(size // 4)
        name = f"bench.{a.api}.{size}"
        times, begin = [], time.perf_counter()
        for it in range(10**9):
            start = time.perf_counter()
            out = call(x, name)
            seconds = time.perf_counter() - start
            if ends(out) != (workers, workers):
                raise SystemExit(f"wrong sum at {size} bytes: {ends(out)}")
            if it >= a.warmup:
                times.append(seconds)
            go = rank == 0 and (len(times) < a.min_iterations or time.perf_counter() - begin < a.seconds)
            if go_flag(1.0 if go else 0.0) == 0.0:
                break
        median = sorted(times)[len(times) // 2]
        print(json.dumps({"api": a.api, "rank": rank, "workers": workers, "bytes": size, "iterations": len(times),
                          "median_s": median, "goodput_MBps": 2 * size / median / 1e6}), flush=True)
    bps.shutdown()


if __name__ == "__main__":
    main()
