"""What a few of the eager shim's Python calls cost between 1 MiB push_pulls, and whether they
cost less before the call than after it. The "pieces" are part of what the bare eager path does
around its one C call (the input's pointer through dlpack, the output's, and a tf.Tensor over the
output; not the tensor id or the pooled output). They are timed two ways, their check and the
tensor's release always outside the clock:

  1. alone, in this process before it joins the job, right after writing N KiB of memory (what a
     sum moves through the caches), N = 0, 256, 1024, 4096, 16384;
  2. in the job, one shuffled loop (the same order on every worker): the C++ push_pull into a
     second buffer, the same call through ctypes, that call followed by the pieces, the pieces
     followed by the call, and the pieces right after a push_pull, 2 ms after one spent asleep,
     and 2 ms after one spent busy (a loop reading the clock).

Not a test: rank 0 prints medians.

  pslaunch --workers 2 --servers 1 -- .venv/bin/python bench/tensorflow/cold_python.py [--calls 2000]

Build first (scripts/build): the C++ reference is build/lib/libsyncline_bench_timed_push_pull.so.
"""
import os
import random
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import syncline.tensorflow as bps  # noqa: E402
from syncline import _outputs, _session  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from shim_worker import CppReference, check_sum, poison_ends, single_tensor_loop_options  # noqa: E402


def median_us(samples, warmup):
    return statistics.median(samples[warmup:]) / 1000


def main():
    a = single_tensor_loop_options(__doc__, calls=2000)
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    x = tf.ones(a.bytes // 4)
    output = _outputs.aligned_empty((a.bytes // 4,), np.float32)
    now = time.perf_counter_ns

    def pieces():
        """The pieces; returns what they made, for a check outside the clock."""
        tensor = tf.experimental.dlpack.from_dlpack(output.__dlpack__())
        return np.from_dlpack(x).ctypes.data, output.ctypes.data, tensor

    x_at = np.from_dlpack(x).ctypes.data

    def check_pieces(made):
        """The pointers are the input's and the output's own, and the tensor shares the output's
        memory (no copy)."""
        input_at, output_at, tensor = made
        if input_at != x_at or output_at != output.ctypes.data or np.from_dlpack(tensor).ctypes.data != output_at:
            raise SystemExit("the pieces did not show the input's and the output's own memory")

    def timed_pieces():
        start = now()
        made = pieces()
        elapsed = now() - start
        check_pieces(made)
        return elapsed

    alone = {}
    for kib in (0, 256, 1024, 4096, 16384):
        sweep = np.ones(kib * 256, np.float32)
        samples = []
        for _ in range(a.calls):
            sweep[:] = 2.0
            samples.append(timed_pieces())
        alone[kib] = median_us(samples, a.warmup)

    bps.init()
    workers, session = bps.size(), _session.current()
    cpp = CppReference(a.library, a.bytes)
    # A bench may reach into the package's private parts: the same call the shim makes, by hand.
    lib, handle = session.worker._lib, session.worker._handle
    data, sums = cpp.data, cpp.sums
    tensor_id, data_at, sums_at = cpp.tensor_id, data.ctypes.data, sums.ctypes.data

    def call():
        if lib.syncline_push_pull(handle, tensor_id, data_at, sums_at, 0, 0):
            raise SystemExit(f"push_pull failed: {lib.syncline_last_error().decode()}")

    def prepare():  # untimed, as the C++ reference's refill
        data[:] = 1.0
        poison_ends(sums)

    def timed(*steps):
        """Times the steps (call, pieces) one after the other; checks what they made after."""
        prepare()
        start = now()
        made = [step() for step in steps]
        elapsed = now() - start
        check_sum(sums, workers)
        for result in made:
            if result is not None:  # what pieces() made; call() makes nothing
                check_pieces(result)
        return elapsed

    def pieces_after(pause, busy=False):
        prepare()
        call()
        if busy:
            until = now() + int(pause * 1e9)
            while now() < until:
                pass
        elif pause:
            time.sleep(pause)
        elapsed = timed_pieces()
        check_sum(sums, workers)
        return elapsed

    variants = {"C++ into a second buffer": lambda: cpp.seconds(workers, True) * 1e9,
                "the call through ctypes": lambda: timed(call),
                "call, then pieces": lambda: timed(call, pieces),
                "pieces, then call": lambda: timed(pieces, call),
                "pieces alone, right after a call": lambda: pieces_after(0),
                "pieces alone, 2 ms asleep after a call": lambda: pieces_after(0.002),
                "pieces alone, 2 ms busy after a call": lambda: pieces_after(0.002, busy=True)}
    times = {k: [] for k in variants}
    for it in range(a.calls):
        order = list(variants)
        random.Random(it).shuffle(order)  # alike on every worker: their collectives match
        for k in order:
            times[k].append(variants[k]())
        if it % 500 == 499 and bps.rank() == 0:
            print(f"  {it + 1}/{a.calls} iterations", flush=True)
    if bps.rank() == 0:
        print(f"pieces alone, medians of {a.calls - a.warmup}, before joining the job:")
        for kib, us in alone.items():
            print(f"  right after writing {kib:5d} KiB {us:8.1f} us")
        print(f"in the job: {a.bytes} bytes, {workers} worker(s), medians of {a.calls - a.warmup} iterations:")
        for k, samples in times.items():
            print(f"  {k:34s} {median_us(samples, a.warmup):8.1f} us")
    bps.shutdown()


if __name__ == "__main__":
    main()
