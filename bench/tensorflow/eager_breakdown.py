"""Where an eager syncline.tensorflow.push_pull spends its time, piece by piece, measured right
after each wait (the state a real call is in: its code cold, as after every push_pull here),
beside the whole call and the bare C call from numpy. Not a test: it prints medians.

  pslaunch --workers 1 --servers 1 -- .venv/bin/python bench/tensorflow/eager_breakdown.py [--calls 3000]

Each iteration runs the path's pieces one by one (as _push_pull_eager does), then
syncline.tensorflow.push_pull whole, then session.push_pull_array of a numpy array (the floor any
Python shim stands on); rank 0 prints the medians after --warmup iterations. With more than one
worker every worker runs the same loop.
"""
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import syncline.tensorflow as bps  # noqa: E402
from syncline import _session  # noqa: E402
from syncline.tensorflow import ops  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from shim_worker import check_sum, poison_free_outputs, single_tensor_loop_options  # noqa: E402


def main():
    a = single_tensor_loop_options(__doc__, calls=3000, cpp_reference=False)
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    bps.init()
    n = a.bytes // 4
    x, floor_input = tf.ones(n), np.ones(n, np.float32)
    name = f"breakdown.{a.bytes}"
    pieces = ["session, dtype check", "eager and tape check", "dlpack in", "tensor id, pooled output",
              "C call (push_pull and wait)", "dlpack out", "push_pull, whole", "push_pull_array (numpy floor)"]
    times = {k: [] for k in pieces}
    now = time.perf_counter_ns
    for it in range(a.calls):
        t0 = now()
        session = _session.current()
        ops._check_dtype(x)
        t1 = now()
        assert tf.executing_eagerly() and not ops.should_record_backprop([x])
        t2 = now()
        array = np.from_dlpack(x)
        t3 = now()
        tensor_id = session.tensor_id(name, _session.array_dtype(array), array.shape)
        output = session.outputs.take(array.shape, array.dtype)
        t4 = now()
        session.worker.push_pull(tensor_id, array.ctypes.data, False, 0, output.ctypes.data)
        t5 = now()
        result = ops._to_tensor(output)
        t6 = now()
        check_sum(result, bps.size())
        del result, output, array
        poison_free_outputs(session)
        w0 = now()
        whole = bps.push_pull(x, average=False, name=name)
        w1 = now()
        check_sum(whole, bps.size())
        del whole
        poison_free_outputs(session)
        f0 = now()
        floor = session.push_pull_array(name, floor_input, False)
        f1 = now()
        check_sum(floor, bps.size())
        del floor
        poison_free_outputs(session)
        if it >= a.warmup:
            for k, d in zip(pieces, [t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, t6 - t5, w1 - w0, f1 - f0]):
                times[k].append(d / 1000)
        if it % 1000 == 999 and bps.rank() == 0:
            print(f"  {it + 1}/{a.calls} calls", flush=True)
    if bps.rank() == 0:
        print(f"{a.bytes} bytes, {bps.size()} worker(s), medians of {a.calls - a.warmup} calls (us):")
        for k, v in times.items():
            print(f"  {k:32s} {statistics.median(v):8.1f}")
    bps.shutdown()


if __name__ == "__main__":
    main()
