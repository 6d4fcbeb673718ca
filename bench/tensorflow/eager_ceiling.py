"""How close the eager TensorFlow shim comes to C++ for one push_pull, and what is under the
gap: the whole syncline.tensorflow.push_pull beside the bare path under it (no checks), the same
bare path with the output tensor made while the sum is in flight, and the C++ reference in place
and into a second buffer, all through one worker and timed in one loop in an order drawn afresh
each iteration (the same on every worker). Not a test: rank 0 prints medians and each against
both C++ references.

  pslaunch --workers 2 --servers 1 -- .venv/bin/python bench/tensorflow/eager_ceiling.py [--calls 2500]

Build first (scripts/build): the C++ reference is build/lib/libsyncline_bench_timed_push_pull.so.
"""
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from shim_worker import CppReference, check_sum, poison_free_outputs, single_tensor_loop_options  # noqa: E402


def main():
    a = single_tensor_loop_options(__doc__, calls=2500)
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    bps.init()
    workers, x = bps.size(), tf.ones(a.bytes // 4)
    session = _session.current()
    # A bench may reach into the package's private parts: the bare path is what they do.
    lib, handle = session.worker._lib, session.worker._handle
    cpp = CppReference(a.library, a.bytes)
    now = time.perf_counter_ns

    def share(array):
        """A tensor over the array's own memory, or None: TensorFlow's from_dlpack never copies."""
        try:
            return tf.experimental.dlpack.from_dlpack(array.__dlpack__())
        except (BufferError, TypeError, RuntimeError, ValueError, tf.errors.InvalidArgumentError):
            return None

    def checked(out, start):
        elapsed = (now() - start) / 1000
        check_sum(out, workers)
        return elapsed

    def whole():
        start = now()
        return checked(bps.push_pull(x, average=False, name="ceiling.whole"), start)

    def bare(name, overlap):
        start = now()
        array = np.from_dlpack(x)
        tensor_id = session.tensor_id(name, _session.array_dtype(array), array.shape)
        output = session.outputs.take(array.shape, array.dtype)
        if overlap:  # start, make the output tensor while the sum is in flight, then wait
            op = ctypes.c_void_p()
            code = lib.syncline_push_pull_to(handle, tensor_id, array.ctypes.data, output.ctypes.data, 0, 0,
                                             _capi._NO_CALLBACK, None, ctypes.byref(op))
            out = share(output) if code == 0 else None  # never a copy: the sum is not there yet
            code = code or lib.syncline_wait(op, -1)
            if code == 0:  # after a failed wait the operation may still run: it is kept, as are its arrays
                lib.syncline_op_free(op)
        else:
            code = lib.syncline_push_pull(handle, tensor_id, array.ctypes.data, output.ctypes.data, 0, 0)
            out = share(output) if code == 0 else None
        if code or out is None:
            _session.keep_alive(array, output)  # the transport may still use both
            raise SystemExit(f"push_pull failed: {lib.syncline_last_error().decode()}" if code else
                             "TensorFlow did not take the output through dlpack")
        del output  # the returned tensor holds it; dropped with `out`, it is free in the pool again
        return checked(out, start)

    variants = {"push_pull, whole": whole,
                "bare path (no checks)": lambda: bare("ceiling.bare", False),
                "bare path, tensor made in flight": lambda: bare("ceiling.bare_in_flight", True),
                "C++ in place": lambda: cpp.seconds(workers, False) * 1e6,
                "C++ into a second buffer": lambda: cpp.seconds(workers, True) * 1e6}
    times = {k: [] for k in variants}
    for it in range(a.calls):
        order = list(variants)
        random.Random(it).shuffle(order)  # alike on every worker: their collectives match
        for k in order:
            us = variants[k]()
            poison_free_outputs(session)
            if it >= a.warmup:
                times[k].append(us)
        if it % 500 == 499 and bps.rank() == 0:
            print(f"  {it + 1}/{a.calls} iterations", flush=True)
    if bps.rank() == 0:
        medians = {k: statistics.median(v) for k, v in times.items()}
        in_place, second = medians["C++ in place"], medians["C++ into a second buffer"]
        print(f"{a.bytes} bytes, {workers} worker(s), medians of {a.calls - a.warmup} calls "
              f"(x: C++ in place / C++ into a second buffer, the identical operation for an immutable tensor):")
        for k, us in medians.items():
            print(f"  {k:34s} {us:8.1f} us  x{in_place / us:.2f}  x{second / us:.2f}")
    bps.shutdown()


if __name__ == "__main__":
    main()
