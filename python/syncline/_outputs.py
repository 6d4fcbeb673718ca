"""The arrays sums are written into, pooled per dtype and shape.

A shim whose tensors are immutable (syncline.tensorflow) has each sum written
into one of these and hands it to the framework, whose tensor takes the memory
over (dlpack). Once every such holder has let go, the array is reused: fresh
memory costs a page fault per 4 KiB when the sum is first written (about 0.1 ms
per MiB here), as much as moving the bytes. Gradients of a step are freed
before the next step's come back, so a few per shape suffice.
"""
import sys
import threading

import numpy as np


def aligned_empty(shape, dtype, alignment=64):
    """An uninitialized C-contiguous array whose data starts on an `alignment`-byte boundary (what
    TensorFlow needs to take the memory over without a copy)."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = np.empty(nbytes + alignment, dtype=np.uint8)
    start = -raw.ctypes.data % alignment
    return raw[start:start + nbytes].view(dtype).reshape(shape)


def _refs_of_a_free_pooled_array():
    """What sys.getrefcount reports for an array held only by a pool list, inside a loop over
    that list (as OutputPool.take looks at it): 3 up to CPython 3.13, where the argument counts,
    and less where the interpreter borrows it."""
    pool = [np.empty(1)]
    for array in pool:
        return sys.getrefcount(array)


FREE_REFS = _refs_of_a_free_pooled_array()


class OutputPool:
    PER_SHAPE = 4

    def __init__(self):
        self._lock = threading.Lock()
        self._pools = {}  # (dtype, shape) -> arrays

    def take(self, shape, dtype):
        """An aligned array to sum into: a pooled one whose every other holder (a tensor that took
        it over) has let go, or a new one."""
        key = (np.dtype(dtype), tuple(shape))  # not dtype.str: ~1 us a call
        with self._lock:
            pool = self._pools.setdefault(key, [])
            for array in pool:
                if sys.getrefcount(array) <= FREE_REFS:  # held only by the pool (and this loop): free
                    return array
            array = aligned_empty(shape, dtype)
            if len(pool) < self.PER_SHAPE:
                pool.append(array)
            return array

    def forget(self, array):
        """Takes `array` out of the pool for good (a failed call's: the transport may still write
        into it); its place goes to a new array."""
        with self._lock:
            for pool in self._pools.values():
                for i, pooled in enumerate(pool):
                    if pooled is array:
                        del pool[i]
                        return

    def holds(self, address):
        """Whether a pooled array's data starts at `address` (for tests)."""
        with self._lock:
            return any(a.ctypes.data == address for pool in self._pools.values() for a in pool)

    def visit_free(self, visit):
        """Calls visit(array) on each pooled array no other holder has (for benches that poison
        them); returns how many there were, and how many arrays the pool has."""
        free = 0
        with self._lock:
            for pool in self._pools.values():
                for array in pool:
                    if sys.getrefcount(array) <= FREE_REFS:
                        visit(array)
                        free += 1
            return free, sum(len(pool) for pool in self._pools.values())
