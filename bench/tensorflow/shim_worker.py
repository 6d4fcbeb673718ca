"""One worker of the shim-overhead benchmark: syncline-bench-worker's loop, through a Python shim.

  --api tf        syncline.tensorflow.push_pull of a tf.Tensor, eagerly
  --api tf-graph  the same call inside a tf.function
  --api torch     syncline.torch.push_pull_inplace of a torch tensor
  --api capi      no framework: numpy arrays through libsyncline's C API (ctypes)

For each size it push_pulls --in-flight float32 tensors of that size (one: the
single-tensor call above; more: all started before any is waited for, as a
gradient tape's list is: push_pull_list for tf, push_pull_async_inplace for
torch), waits, checks the sums, repeatedly; rank 0's clock decides (by
broadcast) when every worker stops. Prints a JSON line per size in
syncline-bench-worker's units: goodput counts every tensor's bytes once each
way, 2 * bytes * in_flight / median iteration time.

With --interleave-cpp each iteration also times the same push_pull from C++
(timed_push_pull.cc) through this process's worker, in place and into a second
array, in an order drawn afresh each iteration (the same on every worker): the
shim and its reference see the same machine at the same moments, which
separate jobs on a busy host do not. The row then carries cpp_* and cpp_out_*
figures too.

The single-tensor loops beside it (eager_breakdown, eager_ceiling, cold_python) take their options
and their C++ reference from here.
"""
import argparse
import ctypes
import json
import os
import random
import time
from pathlib import Path

import numpy as np

from syncline import _outputs, _session  # framework-neutral: imports neither torch nor TensorFlow

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def tf_api(graph):
    import tensorflow as tf

    import syncline.tensorflow as bps
    from syncline.tensorflow.ops import push_pull_list

    # One thread each, as for the C++ worker: idle framework threads spin-wait
    # on the cores the server and the other workers need.
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)

    def call(xs, names):
        if len(xs) == 1:
            return [bps.push_pull(xs[0], average=False, name=names[0])]
        return push_pull_list(xs, names, average=False)

    if graph:
        call = tf.function(call)
    return bps, lambda n: tf.ones(n), call, None


def torch_api():
    import torch

    import syncline.torch as bps

    torch.set_num_threads(1)

    def call(xs, names):
        if len(xs) == 1:
            return [bps.push_pull_inplace(xs[0], average=False, name=names[0])]
        handles = [bps.push_pull_async_inplace(x, average=False, name=n) for x, n in zip(xs, names)]
        return [bps.synchronize(h) for h in handles]

    def refill(xs):  # the sums landed in place; as the C++ loop does, untimed
        for x in xs:
            x.fill_(1.0)

    return bps, lambda n: torch.ones(n), call, refill


def capi_api():
    """No framework: numpy arrays through libsyncline's C API (ctypes), each summed into another
    array (one of the session's pooled outputs; a fresh one per tensor with --in-flight), as
    syncline.tensorflow's eager path does. The floor under any Python shim's cost."""
    def call(xs, names):
        session = _session.current()
        if len(xs) == 1:  # started and waited for in one C call
            return [session.push_pull_array(names[0], xs[0], False)]
        outs, ops = [], []
        for x, name in zip(xs, names):
            outs.append(np.empty_like(x))
            tensor_id = session.tensor_id(name, _session.array_dtype(x), x.shape)
            ops.append(session.worker.push_pull_async(tensor_id, x.ctypes.data, False, 0, outs[-1].ctypes.data))
        for op in ops:
            op.wait()
        return outs

    return _session, lambda n: np.ones(n, dtype=np.float32), call, None


def poison_ends(array):
    """NaN at both ends of a float array that a sum is about to be written into, so that the check
    of its ends fails unless this call wrote them (only the ends: the check reads no more)."""
    array.flat[0] = array.flat[-1] = np.nan


def poison_free_outputs(session):
    """poison_ends on each of the session's pooled output arrays that no tensor holds any more (after
    a call whose result was dropped, the one it used), so the next sum into it is checked for real;
    stops the bench where the pool has arrays and none is free. A bench may reach into the package's
    private parts: the pool is one."""
    poisoned, pooled = session.outputs.visit_free(poison_ends)
    if poisoned == 0 and pooled > 0:
        raise SystemExit("no pooled output was free after a call: the next sum would go unchecked")


def check_sum(result, workers, where=""):
    """Stops the bench unless both ends of a sum (a numpy array, a tf.Tensor or a torch tensor) are
    `workers`, what every worker's ones add up to. Reads only the ends: poison_ends before the call
    makes this fail unless the call wrote them."""
    flat = np.asarray(result).reshape(-1)
    ends = (float(flat[0]), float(flat[-1]))
    if ends != (workers, workers):
        raise SystemExit(f"wrong sum{where}: {ends}")


def go_flag(go):
    """Rank 0's `go` on every worker. Not timed, but cheap, as in the C++ loop: through the
    framework-neutral session, so the framework's own per-call costs (slicing a tf.Tensor ~0.15 ms,
    an eager tf.numpy_function ~0.4 ms) do not set the workers apart before each timed call."""
    session = _session.current()
    flag = np.array([go], dtype=np.float32)
    session.broadcast_array(session.tensor_id("bench.go", _session.array_dtype(flag), flag.shape), flag, 0)
    return float(flag[0])


def single_tensor_loop_options(description, calls, cpp_reference=True):
    """The options of the single-tensor loops (eager_breakdown, eager_ceiling, cold_python), parsed:
    how many iterations, how many of them untimed first, the tensor's size, and where it has one,
    the library of the C++ reference (CppReference)."""
    p = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--calls", type=int, default=calls)
    p.add_argument("--warmup", type=int, default=100)
    p.add_argument("--bytes", type=int, default=1 << 20)
    if cpp_reference:
        library = Path(__file__).resolve().parents[2] / "build" / "lib" / "libsyncline_bench_timed_push_pull.so"
        p.add_argument("--library", default=str(library), help="built by scripts/build")
    return p.parse_args()


class CppReference:
    """The same push_pull timed in C++ (timed_push_pull.cc) through this process's worker, on a
    float32 array refilled with ones before each call, as syncline-bench-worker runs it: in place,
    or into a second array (the input only read, as for an immutable tensor). Its arrays (data,
    sums) and tensor_id are public for loops that make the same call by hand."""

    def __init__(self, library, size):
        self._timed = ctypes.CDLL(library).syncline_bench_timed_push_pull
        self._timed.restype = ctypes.c_int
        self._timed.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_void_p,
                                ctypes.c_uint64, ctypes.POINTER(ctypes.c_int64)]
        session = _session.current()
        self._worker = session.worker
        self._push_pull = ctypes.cast(self._worker._lib.syncline_push_pull, ctypes.c_void_p)
        self.data = _outputs.aligned_empty((size // 4,), np.float32)
        self.sums = _outputs.aligned_empty((size // 4,), np.float32)
        self.tensor_id = session.tensor_id(f"bench.cpp.{size}", _session.array_dtype(self.data), self.data.shape)
        self._ns = ctypes.c_int64()

    def seconds(self, workers, separate_output):
        result = self.sums if separate_output else self.data
        if separate_output:  # in place, the C++ refill of the input with ones does this (with 2+ workers)
            poison_ends(result)
        if self._timed(self._push_pull, self._worker._handle, self.tensor_id, self.data.ctypes.data,
                       result.ctypes.data, self.data.size, ctypes.byref(self._ns)) != 0:
            raise SystemExit(f"C++ push_pull failed: {self._worker._lib.syncline_last_error().decode()}")
        check_sum(result, workers, f" from C++ at {self.data.nbytes} bytes")
        return self._ns.value / 1e9


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--api", choices=["tf", "tf-graph", "torch", "capi"], required=True)
    p.add_argument("--sizes", default="1048576,4194304,16777216")
    p.add_argument("--in-flight", type=int, default=1)
    p.add_argument("--seconds", type=float, default=2.0)
    p.add_argument("--min-iterations", type=int, default=5)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--interleave-cpp", metavar="LIBRARY",
                   help="libsyncline_bench_timed_push_pull.so: time the same push_pull from C++ in this process "
                        "too, each iteration (single-tensor calls only)")
    a = p.parse_args()
    if a.interleave_cpp and a.in_flight != 1:
        p.error("--interleave-cpp times single-tensor calls: use --in-flight 1")
    apis = {"tf": lambda: tf_api(False), "tf-graph": lambda: tf_api(True), "torch": torch_api, "capi": capi_api}
    bps, make, call, refill = apis[a.api]()
    bps.init()
    rank, workers, session = bps.rank(), bps.size(), _session.current()
    for size in (int(s) for s in a.sizes.split(",")):
        xs = [make(size // 4) for _ in range(a.in_flight)]
        names = [f"bench.{a.api}.{size}.{t}" for t in range(a.in_flight)]

        def shim_seconds():
            start = time.perf_counter()
            outs = call(xs, names)
            seconds = time.perf_counter() - start
            for out in outs:
                check_sum(out, workers, f" at {size} bytes")
            del out, outs  # as a training step drops its gradients: their memory may serve the next call
            poison_free_outputs(session)
            if refill:
                refill(xs)
            return seconds

        timed = {"": shim_seconds}
        if a.interleave_cpp:
            cpp = CppReference(a.interleave_cpp, size)
            timed.update(cpp_=lambda: cpp.seconds(workers, False), cpp_out_=lambda: cpp.seconds(workers, True))
        times, begin = {k: [] for k in timed}, time.perf_counter()
        for it in range(10**9):
            order = list(timed)
            random.Random(it).shuffle(order)  # seeded alike on every worker: their collectives match
            for k in order:
                seconds = timed[k]()
                if it >= a.warmup:
                    times[k].append(seconds)
            go = rank == 0 and (len(times[""]) < a.min_iterations or time.perf_counter() - begin < a.seconds)
            if go_flag(1.0 if go else 0.0) == 0.0:
                break
        row = {"api": a.api, "rank": rank, "workers": workers, "bytes": size, "in_flight": a.in_flight,
               "iterations": len(times[""])}
        for k, samples in times.items():
            median = sorted(samples)[len(samples) // 2]
            row.update({f"{k}median_s": median, f"{k}goodput_MBps": 2 * size * a.in_flight / median / 1e6})
        print(json.dumps(row), flush=True)
    bps.shutdown()


if __name__ == "__main__":
    main()
