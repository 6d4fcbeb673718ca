"""The Syncline worker of this Python process, shared by every framework shim.

A training process joins one job, once: `init()` makes the worker, `current()`
hands it to the shims (or says clearly why there is none), `shutdown()` ends it.
Besides the worker, a session remembers every tensor name it declared, so a
name reused with another shape or dtype is refused before it reaches the
network, and it broadcasts arbitrary bytes (objects, integer tensors) exactly.
"""
import atexit
import os
import sys
import threading

import numpy as np

from syncline import _capi
from syncline._handles import Handles
from syncline._outputs import OutputPool
from syncline._unnamed import UnnamedCalls
from syncline.errors import NotInitializedError, SynclineError

# Settings that say this process was started as part of a job (by pslaunch,
# a Helm chart or a BytePS-style launcher).
_JOB_VARIABLES = ("SYNCLINE_NUM_WORKERS", "DMLC_NUM_WORKER", "SYNCLINE_SCHEDULER_PORT", "DMLC_PS_ROOT_PORT",
                  "SYNCLINE_ROLE", "DMLC_ROLE")


_CODE_OF_DTYPE_NAME = {name: code for code, name in _capi.DTYPE_NAMES.items()}


_CODE_OF_DTYPE = {}  # numpy dtype -> code, filled as dtypes are met: numpy 2 builds dtype.name in Python (~5 us)


def array_dtype(array):
    """Syncline's code for a numpy array's dtype, or a TypeError listing those it carries."""
    code = _CODE_OF_DTYPE.get(array.dtype)
    if code is not None:
        return code
    code = _CODE_OF_DTYPE_NAME.get(array.dtype.name)
    if code is None:
        raise _capi.unsupported_dtype(array.dtype.name, _CODE_OF_DTYPE_NAME)
    _CODE_OF_DTYPE[array.dtype] = code
    return code


class _Posted:
    """A posted array until it is waited for: libsyncline's operation, the array the sum lands in,
    and the input it reads (kept alive while it may)."""
    __slots__ = ("op", "result", "input")

    def __init__(self, op, result, input_):
        self.op, self.result, self.input = op, result, input_


class Session:
    def __init__(self):
        if not any(name in os.environ for name in _JOB_VARIABLES):
            raise SynclineError(
                "this process was not started as part of a Syncline job (none of " + ", ".join(_JOB_VARIABLES) +
                " is set): launch it with `pslaunch --workers N --servers M -- python your_script.py`")
        self.worker = _capi.Worker()
        self._lock = threading.Lock()
        self._declare_lock = threading.Lock()  # a name's check and declaration as one step
        self._declared = {}  # name -> (dtype code, shape, tensor id, compression)
        self.unnamed = UnnamedCalls(self.worker).name  # unnamed(kind, dtype, shape, form): a call's name
        self.handles = Handles()  # every shim's operations in flight, until waited for
        self.outputs = OutputPool()  # what sums are written into, for shims that hand them over
        self._closers = []  # run at shutdown, before the worker leaves (e.g. updater threads)
        self.closing = False  # shutdown() has begun: no new operation may start
        self.left = threading.Event()  # shutdown() has ended: the worker left the job
        # osp and ssp: the wrappers sum model changes, and the shims' own sums are refused.
        self.sync_mode = self.worker.sync_mode
        self.sums_models = self.sync_mode in ("osp", "ssp")

    def refuse_raw_sums(self, what, in_async=False):
        """Raises, in osp and ssp modes, for `what` (a shim's call that would sum gradients or values):
        there workers sum their model changes through the wrappers, and a gradient summed too would be
        applied on top of them (in ssp, a push_pull returns the servers' running total of every push
        so far, not this step's sum). `in_async`: in async mode too, where a push_pull also returns
        the running total (push_pull itself keeps that meaning there, BytePS's)."""
        to_log = ("Send values to log with a broadcast (syncline.torch's broadcast_object, syncline.tensorflow's "
                  "broadcast), or run with SYNCLINE_SYNC_MODE=bsp")
        if self.sync_mode == "osp":
            raise SynclineError(
                f"{what} is refused in osp mode (SYNCLINE_SYNC_MODE=osp): there workers sum their model changes "
                "every SYNCLINE_OSP_PERIOD steps through the DistributedOptimizer (or syncline.torch's "
                "DistributedDataParallel), and a gradient summed here would be applied on top of them. " + to_log)
        if self.sync_mode == "ssp":
            raise SynclineError(
                f"{what} is refused in ssp mode (SYNCLINE_SYNC_MODE=ssp): there the servers keep a running total "
                "of every push, which the DistributedOptimizer (or syncline.torch's DistributedDataParallel) uses "
                "to carry model changes, so a push_pull returns that total rather than this step's sum. " + to_log)
        if in_async and self.sync_mode == "async":
            raise SynclineError(
                f"{what} is refused in async mode (SYNCLINE_SYNC_MODE=async): there the servers keep a running "
                "total of every push, so a sum would not be this call's (push_pull keeps BytePS's asynchronous "
                "meaning). " + to_log)

    def on_shutdown(self, close):
        """Runs close() at shutdown(), before the worker leaves the job."""
        with self._lock:
            self._closers.append(close)

    def tensor_id(self, name, dtype, shape, compression=None):
        """The id of tensor `name`, declaring it on first use (a collective: every worker declares it).
        `compression`: the form its chunks travel in ("none", "int8", "topk:0.01", ...; None: the
        job's SYNCLINE_COMPRESSION, for float32 tensors). Every operation a shim starts asks it first,
        so it also refuses them once shutdown() has begun."""
        if self.closing:
            raise NotInitializedError("Syncline is shutting down: no operation may start during shutdown()")
        # Asked on every call: a name seen before with this dtype and shape is answered without
        # the lock (one dict read is atomic in CPython, and entries are never changed).
        known = self._declared.get(name)
        if known is not None and known[0] == dtype and known[1] == shape and compression in (known[3], None):
            return known[2]
        shape = tuple(int(d) for d in shape)
        known = self._known(name, dtype, shape, compression)
        if known is not None:
            return known
        # A new name: one declaration at a time (checked again under the lock), while
        # names already declared never wait behind it (a declaration waits for every worker).
        with self._declare_lock:
            known = self._known(name, dtype, shape, compression)
            if known is not None:
                return known
            tensor_id = self.worker.declare(name, dtype, int(np.prod(shape, dtype=np.int64)), compression)
            with self._lock:
                self._declared[name] = (dtype, shape, tensor_id, compression)
            return tensor_id

    def _known(self, name, dtype, shape, compression):
        with self._lock:
            known = self._declared.get(name)
        if known is None:
            return None
        if known[:2] != (dtype, shape):
            raise ValueError(
                f"tensor name '{name}' was first used for a {_capi.DTYPE_NAMES[known[0]]} tensor of shape "
                f"{list(known[1])} and now for a {_capi.DTYPE_NAMES[dtype]} tensor of shape {list(shape)}: "
                "a name stands for one tensor; give the other one its own name")
        # None (the job's form) matches whatever the name was declared with: libsyncline then
        # applies the form the tensor has (and refuses what that form cannot do, a broadcast).
        if known[3] != compression and known[3] is not None and compression is not None:
            def said(form):
                return "the job's compression" if form is None else f"compression {form}"
            raise ValueError(f"tensor name '{name}' was first used with {said(known[3])} and now with "
                             f"{said(compression)}: a tensor travels in one form; give the other use its own name")
        return known[2]

    def push_pull_array(self, name, array, average, priority=0, form=None):
        """Sums `array` (C-contiguous; only read) across workers and returns the sum, in one of
        this session's pooled output arrays (self.outputs): the one-call path of an eager shim,
        with no handle to keep. `form`: the compression it travels in (as tensor_id's)."""
        if not array.flags.c_contiguous:
            raise ValueError(f"tensor '{name}' is not contiguous")
        tensor_id = self.tensor_id(name, array_dtype(array), array.shape, form)
        output = self.outputs.take(array.shape, array.dtype)
        try:
            self.worker.push_pull(tensor_id, array.ctypes.data, average, priority, output.ctypes.data)
        except BaseException:
            keep_alive(array, output)  # the transport may still read the one and write the other
            self.outputs.forget(output)  # kept for good
            raise
        return output

    def post_array(self, name, array, average, priority=0, output=None, form=None):
        """Starts summing `array` (C-contiguous) across workers, in place or into `output` (an array of
        its dtype and shape; `array` is then only read); returns a handle for wait_arrays. The path
        of shims that hold tensors as numpy arrays (syncline.tensorflow), which post each gradient
        as soon as it exists and wait for them together."""
        # Checked before the declaration, a collective the other workers would wait in.
        if not array.flags.c_contiguous:
            raise ValueError(f"tensor '{name}' is not contiguous")
        if output is not None and (output.dtype != array.dtype or output.shape != array.shape or
                                   not output.flags.c_contiguous or not output.flags.writeable):
            raise ValueError(f"the output of tensor '{name}' is not a writable contiguous array like its input")
        tensor_id = self.tensor_id(name, array_dtype(array), array.shape, form)
        op = self.worker.push_pull_async(tensor_id, array.ctypes.data, average, priority,
                                         None if output is None else output.ctypes.data)
        return self.handles.add(_Posted(op, array if output is None else output, array))

    def push_pull_arrays(self, names, arrays, average, priorities, form=None):
        """Sums each of `arrays` (C-contiguous; only read) across workers, posted in the order given,
        and returns the sums in pooled output arrays (self.outputs): an eager shim's whole path. One
        array is one blocking C call; several are all posted before any is waited for."""
        if len(arrays) == 1:
            return [self.push_pull_array(names[0], arrays[0], average, priorities[0], form)]
        handles = []
        try:
            for name, array, priority in zip(names, arrays, priorities):
                output = self.outputs.take(array.shape, array.dtype)
                handles.append(self.post_array(name, array, average, priority, output, form))
        except BaseException:
            self.abandon(handles)
            raise
        return self.wait_arrays(handles)

    def abandon(self, handles):
        """Forgets posted arrays that will not be waited for (a later post failed): they stay
        alive for good, as the transport may still use them."""
        keep_alive(self.handles.discard(handles))

    def wait_arrays(self, handles):
        """Waits for posted arrays; returns them, summed, in the order of `handles`."""
        posted = self.handles.pop(handles)
        try:
            for entry in posted:
                entry.op.wait()
        except BaseException:
            keep_alive(posted)  # the others may still be in flight too
            raise
        return [entry.result for entry in posted]

    def broadcast_bytes(self, data, root):
        """Root's `data` (bytes) on every worker, bit for bit; `data` is ignored elsewhere."""
        length = np.zeros(1, dtype=np.float64)
        if self.worker.rank == root:
            length[0] = len(data)
        self.broadcast_array(self.tensor_id("syncline.bytes.length", _capi.FLOAT64, (1,), "none"), length, root)
        n = int(length[0])
        # Carried as 16-bit words in float32 elements: a sum with zeros keeps
        # every integer up to 65535 exact, where raw bytes read as floats would
        # lose NaN payloads and the sign of zero. Sizes round up to powers of
        # two so that repeated broadcasts reuse a few declared tensors.
        capacity = 64
        while capacity < n:
            capacity *= 2
        words = np.zeros(capacity // 2, dtype=np.float32)
        if self.worker.rank == root:
            raw = np.zeros(capacity, dtype=np.uint8)
            raw[:n] = np.frombuffer(data, dtype=np.uint8)
            words[:] = raw.view(np.uint16)
        tensor_id = self.tensor_id(f"syncline.bytes.{capacity}", _capi.FLOAT32, (capacity // 2,), "none")
        self.broadcast_array(tensor_id, words, root)
        return words.astype(np.uint16).view(np.uint8)[:n].tobytes()

    def average_values(self, name, values):
        """The average over the workers of `values` (a small float64 array: metrics to log), in every
        sync mode. In ssp and async the servers keep a running total of pushes, so there each
        worker's values arrive as a broadcast of its own (rounds summed whole) and are averaged here,
        in rank order; otherwise one averaging push_pull."""
        if self.sync_mode not in ("ssp", "async"):
            return self.wait_arrays([self.post_array(name, values, average=True)])[0]
        total = np.zeros_like(values)
        for root in range(self.worker.size):
            sent = np.array(values, dtype=np.float64, copy=True, order="C")
            self.broadcast_array(self.tensor_id(f"{name}.from.{root}", array_dtype(sent), sent.shape, "none"), sent,
                                 root)
            total += sent
        return total / self.worker.size

    def broadcast_array(self, tensor_id, array, root):
        """Broadcasts into `array` (contiguous); on failure the array is kept alive (see keep_alive)."""
        try:
            self.worker.broadcast(tensor_id, array.ctypes.data, root)
        except BaseException:
            keep_alive(array)
            raise


_current = None
_ended = False
_exit_hook = []  # [the pid that registered shutdown_at_exit], once registered
_kept = []  # memory a failed call may still be written into: kept until the process ends
_state_lock = threading.Lock()
_SHUTDOWN_WAIT_S = 600  # a second shutdown() waits this long for the first (each of whose waits has a deadline)


def keep_alive(*objects):
    """Keeps `objects` (the buffers of a call that failed or timed out) alive for good: the
    transport may still write into them."""
    with _state_lock:
        _kept.extend(objects)


def init():
    """Joins the job this process was launched into (idempotent)."""
    global _current, _ended
    with _state_lock:
        if _current is not None and _current.closing:
            raise NotInitializedError("Syncline is shutting down: call init() once shutdown() has returned")
        if _current is None:
            _current = Session()
            _ended = False
            if not _exit_hook:
                # Registered after the frameworks' own exit handlers (they registered theirs at
                # import), so it runs before them: torch and TensorFlow are still whole.
                atexit.register(shutdown_at_exit)
                _exit_hook.append(os.getpid())
        return _current


def current():
    session = _current  # every call asks: no lock while a session runs (one read is atomic)
    if session is not None:
        return session
    with _state_lock:
        if _current is not None:
            return _current
        if _ended:
            raise NotInitializedError("Syncline was shut down: no call may follow shutdown()")
        raise NotInitializedError("Syncline is not initialized: call init() first")


def is_initialized():
    with _state_lock:
        return _current is not None


def rank():
    return current().worker.rank


def size():
    return current().worker.size


def local_rank():
    return current().worker.local_rank


def local_size():
    return current().worker.local_size


def shutdown_at_exit():
    """Leaves the job when the script ends without calling shutdown(), as byteps and horovod do
    (their init() registers shutdown with atexit, and scripts written for them rely on it):
    without it the scheduler and servers wait for a worker that is gone, and the launcher stops
    them and fails the job. After an unhandled exception (the interpreter printed it and set
    sys.last_value) it leaves without finishing: the worker's operations may never complete, and
    the job ends naming this worker as it would for any worker that dies."""
    if _current is None or os.getpid() != _exit_hook[0]:  # a forked child does not own the worker
        return
    if getattr(sys, "last_value", None) is not None:
        return
    try:
        shutdown()
    except BaseException as e:  # at exit nobody can catch it: say it
        print(f"syncline: leaving the job at exit failed: {e}", file=sys.stderr, flush=True)


def shutdown():
    """Waits for operations in flight, then leaves the job. Later calls raise NotInitializedError."""
    global _current, _ended
    with _state_lock:
        session = _current
        if session is None:
            return
        first = not session.closing
        session.closing = True
    if not first:  # another thread is leaving: return once it has
        if not session.left.wait(timeout=_SHUTDOWN_WAIT_S):
            raise SynclineError(f"shutdown() in another thread did not end within {_SHUTDOWN_WAIT_S} s")
        return
    # The closers finish what is in flight (overlapped updates wait for their sums through the
    # session's handles), so the session stays current until they are done.
    first_error = None
    for close in session._closers:
        try:
            close()
        except BaseException as e:  # still leave the job; report the first failure afterwards
            first_error = first_error or e
    with _state_lock:
        _current = None
        _ended = True
    try:
        session.worker.shutdown()
    finally:
        session.left.set()
    if first_error is not None:
        raise first_error
