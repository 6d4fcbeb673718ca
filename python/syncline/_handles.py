"""Operations in flight, by the integer handle a caller holds until it waits for them.

One registry per session serves every shim: syncline.torch's push_pull_async hands
its handles to the user, syncline.tensorflow's graph posts pass theirs from one op to
the next. An entry is whatever the shim needs to finish the operation; it has an `op`
(the libsyncline operation, with wait() and poll()).
"""
import itertools
import threading

# Handle numbers, unique in the process: one left over from a session that ended
# (held by an old optimizer) can never name an operation of the next session.
_numbers = itertools.count(1)


class Handles:
    def __init__(self):
        self._lock = threading.Lock()
        self._pending = {}

    def add(self, entry):
        """Keeps `entry` until it is taken back; returns its handle (a positive int)."""
        with self._lock:
            handle = next(_numbers)
            self._pending[handle] = entry
            return handle

    def get(self, handle):
        """The entry of `handle`, left in place."""
        with self._lock:
            entry = self._pending.get(int(handle))
        if entry is None:
            raise _unknown(handle)
        return entry

    def pop(self, handles, kind=None):
        """The entries of `handles`, in their order, taken out; none is taken if one is unknown (or,
        with `kind`, is not an instance of it: another shim's)."""
        keys = [int(h) for h in handles]
        with self._lock:
            for key in keys:
                if key not in self._pending:
                    raise _unknown(key)
                if kind is not None and not isinstance(self._pending[key], kind):
                    raise ValueError(f"handle {key} is not an operation of this kind ({kind.__name__})")
            if len(set(keys)) != len(keys):
                raise ValueError("the same handle was given twice: an operation is waited for once")
            return [self._pending.pop(key) for key in keys]

    def discard(self, handles):
        """The entries of those `handles` still here, taken out (unknown ones are skipped)."""
        with self._lock:
            return [self._pending.pop(int(h)) for h in handles if int(h) in self._pending]


def _unknown(handle):
    return ValueError(f"handle {handle} is not an operation in flight (already waited for, or never made)")
