"""Cross-iteration overlap (ByteScheduler's idea): parameter updates run as their sums return.

Without it, step() waits for every gradient's sum, updates every parameter,
and only then may the next forward pass begin. With it, step() returns at
once; a thread of this class waits for each parameter's sum, most urgent
first, and runs that parameter's update; a module's next forward waits only
for its own parameters (a module forward pre-hook). So the first layers
of the next iteration compute while the last layers' gradients are still on
the network.

Anything else that reads or writes a parameter whose update is still to run
waits for the updates first: until its update has run, the parameter's class
is a subclass of torch.nn.Parameter whose __torch_function__ waits before
any operation on its data (state_dict(), .data, .numpy(), an in-place clamp)
on any thread but the updater's. Reading its metadata (shape, dtype, grad,
hash) does not wait. Parameters of another class (a user's subclass) are not
guarded that way: read them after the optimizer's synchronize().
"""
import collections
import sys
import threading
import weakref

import torch

from syncline.torch import ops

# Operations on a tensor that read only its metadata: they need not wait for an update.
_METADATA_METHODS = frozenset({"__hash__", "size", "dim", "ndimension", "numel", "nelement", "element_size",
                               "stride", "storage_offset", "is_contiguous", "is_floating_point", "is_complex",
                               "get_device"})


def _reads_data(func):
    name = getattr(func, "__name__", None)
    if name in ("__get__", "__set__"):  # an attribute: only .data is the parameter's values
        return getattr(getattr(func, "__self__", None), "__name__", None) == "data"
    return name not in _METADATA_METHODS


class CrossIterationUpdater:
    def __init__(self, update_one):
        self._update_one = update_one  # update_one(p, *context): applies p's averaged gradient to p
        self._cv = threading.Condition()
        self._queue = collections.deque()  # (parameter, push_pull handle, context), most urgent first
        self._pending = set()  # ids of parameters whose update has not run yet
        self._error = None
        self._closed = False
        self._pending_class = _pending_parameter_class(self)
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
                if type(p) is torch.nn.Parameter:
                    p.__class__ = self._pending_class  # reads and writes of it now wait (module docstring)
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

    def on_updater_thread(self):
        return threading.get_ident() == self._thread.ident

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
        if not self._pending:
            return
        if _is_compiled(module):
            self.wait()  # its graph reads every parameter at once, and must not see the waiting class
            return
        mine = list(module.parameters(recurse=False))
        if mine:
            self.wait(mine)

    def _done(self, params):
        # Called holding self._cv: the parameters are theirs again.
        for p in params:
            if type(p) is self._pending_class:
                p.__class__ = torch.nn.Parameter
            self._pending.discard(id(p))
        self._cv.notify_all()

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
                    self._done([p] + [item[0] for item in self._queue])
                    self._queue.clear()
                    self._pending.clear()
                continue
            with self._cv:
                self._done([p])


def _is_compiled(module):
    # torch.compile's wrapper (torch._dynamo is imported once anything was compiled).
    eval_frame = sys.modules.get("torch._dynamo.eval_frame")
    compiled = getattr(eval_frame, "OptimizedModule", None)
    return compiled is not None and isinstance(module, compiled)


def _pending_parameter_class(updater):
    """The class a parameter has while its update is queued: an operation on its data, on any
    thread but the updater's, first waits for every queued update (then the parameter's class is
    torch.nn.Parameter again)."""
    updater_ref = weakref.ref(updater)

    def __torch_function__(cls, func, types, args=(), kwargs=None):
        u = updater_ref()
        if u is not None and _reads_data(func) and not u.on_updater_thread():
            u.wait()
        with torch._C.DisableTorchFunctionSubclass():
            return func(*args, **(kwargs or {}))

    return type("ParameterWithUpdatePending", (torch.nn.Parameter,),
                {"__torch_function__": classmethod(__torch_function__), "__module__": __name__})
