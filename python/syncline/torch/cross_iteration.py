"""Cross-iteration overlap (ByteScheduler's idea): parameter updates run as their sums return.

Without it, step() waits for every gradient's sum, updates every parameter,
and only then may the next forward pass begin. With it, step() returns at
once; a thread of this class waits for each parameter's sum, most urgent
first, and runs that parameter's update; a module's next forward waits only
for its own parameters (a module forward pre-hook). So the first layers of the
next iteration compute while the last layers' gradients are still on the
network.

A parameter read outside a module's forward (by hand, to save it) may still
be updating: call the optimizer's synchronize() first. A gradient about to be
added to a parameter whose update is still running waits for that update.
"""
import collections
import threading

import torch

from syncline.torch import ops


class CrossIterationUpdater:
    def __init__(self, update_one):
        self._update_one = update_one  # update_one(p, *context): applies p's averaged gradient to p
        self._cv = threading.Condition()
        self._queue = collections.deque()  # (parameter, push_pull handle), most urgent first
        self._pending = set()  # ids of parameters whose update has not run yet
        self._error = None
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="syncline-updates", daemon=True)
        self._thread.start()
        self._hook = torch.nn.modules.module.register_module_forward_pre_hook(self._before_forward)

    def submit(self, items):
        """Queues the updates of `items` ((parameter, handle, context), most urgent first);
        update_one(parameter, *context) runs once the handle's sum is back."""
        with self._cv:
            self._raise_error()
            for p, handle, context in items:
                self._pending.add(id(p))
                self._queue.append((p, handle, context))
            self._cv.notify_all()

    def is_pending(self, p):
        with self._cv:
            return id(p) in self._pending

    def wait(self, params=None):
        """Returns once the updates of `params` (default: all) have run; raises an update's error."""
        keys = None if params is None else {id(p) for p in params}
        with self._cv:
            while self._error is None and (self._pending if keys is None else self._pending & keys):
                self._cv.wait(timeout=1.0)  # each update is bounded by its push_pull's deadline
            self._raise_error()

    def close(self):
        """Waits for the updates in flight (raising an update's error), then stops the thread."""
        try:
            self.wait()
        finally:
            with self._cv:
                self._closed = True
                self._cv.notify_all()
            self._thread.join(timeout=60)
            self._hook.remove()

    def _raise_error(self):
        if self._error is not None:
            raise self._error

    def _before_forward(self, module, args):
        mine = list(module.parameters(recurse=False))
        if mine and self._pending:
            self.wait(mine)

    def _run(self):
        while True:
            with self._cv:
                while not self._queue and not self._closed:
                    self._cv.wait()
                if not self._queue:
                    return
                p, handle, context = self._queue.popleft()
            try:
                if handle is not None:  # None: the sum is already back (the optimizer's synchronize())
                    ops.synchronize(handle)
                self._update_one(p, *context)
            except BaseException as e:  # handed to the training thread at its next wait
                with self._cv:
                    self._error = e
                    # The sums still queued are left to the runtime (their buffers stay
                    # referenced by syncline.torch.ops until shutdown).
                    self._queue.clear()
                    self._pending.clear()
                    self._cv.notify_all()
                continue
            with self._cv:
                self._pending.discard(id(p))
                self._cv.notify_all()
