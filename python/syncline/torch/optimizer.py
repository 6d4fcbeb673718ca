"""DistributedOptimizer: any torch optimizer, with gradients averaged across workers.

As in byteps.torch and horovod.torch, it wraps the user's optimizer in a
subclass of its own class: backward posts each gradient through the scheduling
proxy as it is produced (syncline.torch.gradient_sync), and step() waits for
the sums still missing before the update runs. With cross-iteration overlap
(SYNCLINE_CROSS_ITERATION, or cross_iteration=True), step() returns at once and
each parameter is updated as soon as its own sum is back
(syncline.torch.cross_iteration). step() also reports the training step to
libsyncline, which drives the online tuner of partition size and credit and
the trace's step range.
"""
import threading

import torch

from syncline import _session
from syncline.torch.compression import Compression
from syncline.torch.cross_iteration import CrossIterationUpdater
from syncline.torch.gradient_sync import GradientSync


class _DistributedOptimizer(torch.optim.Optimizer):
    def __init__(self, params, named_parameters, compression, backward_passes_per_step, cross_iteration):
        super(self.__class__, self).__init__(params)
        all_params = [p for group in self.param_groups for p in group["params"]]
        if named_parameters is None:
            named = [(f"param.{i}", p) for i, p in enumerate(all_params)]
        else:
            named = list(named_parameters)
            if any(not isinstance(item, tuple) or len(item) != 2 for item in named):
                raise ValueError("named_parameters must be (name, parameter) pairs, such as model.named_parameters()")
            unnamed = {id(p) for p in all_params} - {id(p) for _, p in named}
            if unnamed:
                raise ValueError(f"{len(unnamed)} parameter(s) of the optimizer are missing from named_parameters")
        worker = _session.current().worker
        self._sync = GradientSync(named, compression, backward_passes_per_step, prefix="grad.")
        self._last_step_end_us = None
        if cross_iteration is None:
            cross_iteration = worker.cross_iteration
        self._groups_lock = threading.Lock()
        self._updater = CrossIterationUpdater(self._update_one) if cross_iteration else None

    @property
    def cross_iteration(self):
        """True when updates overlap the next forward pass."""
        return self._updater is not None

    def synchronize(self):
        """Waits for every gradient's sum (step() does this itself); with cross-iteration overlap, for
        every parameter update in flight, so that parameters may be read."""
        if self._updater is not None:
            self._updater.wait()
        else:
            self._sync.synchronize()

    def _update_one(self, p):
        # The wrapped optimizer's own step(), over this one parameter.
        with self._groups_lock:
            saved = [group["params"] for group in self.param_groups]
            try:
                for group in self.param_groups:
                    group["params"] = [q for q in group["params"] if q is p]
                super(self.__class__, self).step()
            finally:
                for group, params in zip(self.param_groups, saved):
                    group["params"] = params
        p.grad = None  # consumed; the next backward starts it afresh

    def zero_grad(self, set_to_none=True):
        if self._updater is None:
            return super(self.__class__, self).zero_grad(set_to_none)
        # A parameter whose update is still running keeps its gradient until then (the update clears it).
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None and not self._updater.is_pending(p):
                    p.grad = None

    def step(self, closure=None):
        worker = _session.current().worker
        if self._last_step_end_us is not None:
            worker.trace_span("forward+backward", self._last_step_end_us, worker.now_us())
        if self._updater is None:
            self._sync.synchronize()
            loss = super(self.__class__, self).step(closure)
        else:
            if closure is not None:
                raise ValueError("step(closure) cannot overlap iterations: turn cross-iteration overlap off "
                                 "(SYNCLINE_CROSS_ITERATION) for optimizers that re-evaluate the model")
            self._updater.wait()  # last step's updates: done by now unless a parameter is unused
            self._updater.submit(self._sync.take_handles())
            loss = None
        worker.begin_step()
        self._last_step_end_us = worker.now_us()
        return loss


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none, backward_passes_per_step=1,
                         cross_iteration=None):
    """Wraps `optimizer` so that step() uses gradients averaged over every worker.

    `named_parameters` (e.g. model.named_parameters()) names the gradients in
    logs and errors; without it they are numbered. `backward_passes_per_step`:
    gradients accumulate locally over that many backward passes, then go out.
    `cross_iteration`: overlap each step's updates with the next forward pass
    (default: the SYNCLINE_CROSS_ITERATION setting). Every worker must build
    the optimizer over the same parameters, in order."""
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,), dict(_DistributedOptimizer.__dict__))
    wrapped = cls(optimizer.param_groups, named_parameters, compression, backward_passes_per_step, cross_iteration)
    wrapped.load_state_dict(optimizer.state_dict())
    return wrapped
