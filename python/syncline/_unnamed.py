"""Names for the calls that gave none (push_pull, allreduce, broadcast without `name=`).

A name is a tensor on the servers: its keys, a sum buffer per key, its placement. One name per
call would hold a tensor for every call a script ever made without a name (a metric averaged
every step); one name per kind of call and tensor makes a loop of such calls the successive
rounds of one tensor, which the servers keep apart."""
import threading

import numpy as np

from syncline import _capi
from syncline.errors import SynclineError


class UnnamedCalls:
    """Hands out the names of one worker's unnamed calls, the same on every worker that makes the
    same calls in the same order. Thread-safe."""

    def __init__(self, worker):
        self._worker = worker
        self._lock = threading.Lock()
        self._counted = 0
        self._compressed = {}  # (dtype name, shape, form) -> whether it would travel compressed

    def name(self, kind, dtype=None, shape=(), form=None):
        """With the tensor's `dtype` (its name), `shape` and `form` (how it travels; None: the job's):
        one name per kind of call and tensor. A new name for every call, counted, where the order of
        calls is not given or a tensor must not be reused: without `dtype` (graph ops, whose run order
        may differ from worker to worker), push_pulls in async mode (the servers keep each tensor's
        running total), and a tensor that travels compressed, whose error feedback carries what one
        push left out into that tensor's next push."""
        reusable = dtype is not None and not (kind == "push_pull" and self._worker.sync_mode == "async")
        if reusable and not self._travels_compressed(dtype, shape, form):
            return f"syncline.noname.{kind}.{dtype}{list(shape)}" + (f".{form}" if form else "")
        with self._lock:
            self._counted += 1
            return f"syncline.noname.{kind}.{self._counted}"

    def _travels_compressed(self, dtype, shape, form):
        """Whether libsyncline would compress the tensor (the form, the job's SYNCLINE_COMPRESSION and
        SYNCLINE_MIN_COMPRESS_BYTES decide); asked once per dtype, shape and form."""
        if form == "none":
            return False
        key = (dtype, tuple(shape), form)
        known = self._compressed.get(key)
        if known is None:
            code = _capi.DTYPE_CODES.get(dtype)
            try:
                known = code is None or self._worker.would_compress(code, int(np.prod(shape, dtype=np.int64)), form)
            except SynclineError:
                known = True  # a form the tensor cannot take: its declaration says why
            with self._lock:
                self._compressed[key] = known
        return known
