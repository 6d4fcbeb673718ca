"""How close any Python shim can come to C++ for one eager push_pull: the whole
syncline.tensorflow.push_pull beside the bare path under it (no checks), the same bare path with
the output tensor made while the sum is in flight, and the C++ reference in place and into a
second buffer, all through one worker and timed in one loop in an order drawn afresh each
iteration (the same on every worker). Not a test: rank 0 prints medians and each / C++ in place.

  pslaunch --workers 2 --servers 1 -- .venv/bin/python bench/tensorflow/eager_ceiling.py [--calls 2500]

Build first (scripts/build): the C++ reference is build/lib/libsyncline_bench_timed_push_pull.so.
"""
import argparse
import ctypes
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
from syncline import _capi, _session  # noqa: E402
from syncline.tensorflow import ops  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench" / "tensorflow"))
from shim_worker import CppReference  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--calls", type=int, default=2500)
    p.add_argument("--warmup", type=int, default=100)
    p.add_argument("--bytes", type=int, default=1 << 20)
    p.add_argument("--library", default=str(ROOT / "build" / "lib" / "libsyncline_bench_timed_push_pull.so"))
    a = p.parse_args()
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    bps.init()
    workers, x = bps.size(), tf.ones(a.bytes // 4)
    session = _session.current()
    lib, handle = session.worker._lib, session.worker._handle
    cpp = CppReference(a.library, a.bytes)
    now = time.perf_counter_ns

    def checked(out, start):
        elapsed = (now() - start) / 1000
        if float(np.asarray(out)[-1]) != workers:
            raise SystemExit(f"wrong sum: {float(np.asarray(out)[-1])}")
        return elapsed

    def whole():
        start = now()
        return checked(bps.push_pull(x, average=False, name="ceiling.whole"), start)

    def bare(overlap):
        start = now()
        array = np.from_dlpack(x)
        tensor_id = session.tensor_id(f"ceiling.bare{overlap}", _session.array_dtype(array), array.shape)
        output = session.output_array(array.shape, array.dtype)
        if overlap:  # start, make the output tensor while the sum is in flight, then wait
            op = ctypes.c_void_p()
            code = lib.syncline_push_pull_to(handle, tensor_id, array.ctypes.data, output.ctypes.data, 0, 0,
                                             _capi._NO_CALLBACK, None, ctypes.byref(op))
            out = ops._to_tensor(output) if code == 0 else None
            code = code or lib.syncline_wait(op, -1)
            lib.syncline_op_free(op)
        else:
            code = lib.syncline_push_pull(handle, tensor_id, array.ctypes.data, output.ctypes.data, 0, 0)
            out = ops._to_tensor(output) if code == 0 else None
        if code:
            raise SystemExit(f"push_pull failed: {lib.syncline_last_error().decode()}")
        del output  # the returned tensor holds it; dropped with `out`, it is free in the pool again
        return checked(out, start)

    variants = {"push_pull, whole": whole,
                "bare path (no checks)": lambda: bare(False),
                "bare path, tensor made in flight": lambda: bare(True),
                "C++ in place": lambda: cpp.seconds(workers, False) * 1e6,
                "C++ into a second buffer": lambda: cpp.seconds(workers, True) * 1e6}
    times = {k: [] for k in variants}
    for it in range(a.calls):
        order = list(variants)
        random.Random(it).shuffle(order)  # alike on every worker: their collectives match
        for k in order:
            us = variants[k]()
            if it >= a.warmup:
                times[k].append(us)
        if it % 500 == 499 and bps.rank() == 0:
            print(f"  {it + 1}/{a.calls} iterations", flush=True)
    if bps.rank() == 0:
        medians = {k: statistics.median(v) for k, v in times.items()}
        reference = medians["C++ in place"]
        print(f"{a.bytes} bytes, {workers} worker(s), medians of {a.calls - a.warmup} calls:")
        for k, us in medians.items():
            print(f"  {k:34s} {us:8.1f} us  x{reference / us:.2f} of C++ in place")
    bps.shutdown()


if __name__ == "__main__":
    main()
