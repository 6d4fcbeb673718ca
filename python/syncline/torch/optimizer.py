"""DistributedOptimizer: any torch optimizer, with gradients averaged across workers.

As in byteps.torch and horovod.torch, it wraps the user's optimizer in a
subclass of its own class: backward posts each gradient through the scheduling
proxy as it is produced (syncline.torch.gradient_sync), and step() waits for
the sums still missing before the update runs. With cross-iteration overlap
(SYNCLINE_CROSS_ITERATION=1, or cross_iteration=True), step() returns at once and each
parameter is updated as soon as its own sum is back, the next forward pass
waiting only for its own layer's parameters (syncline.torch.cross_iteration).
In osp mode (SYNCLINE_SYNC_MODE=osp) no gradient
is sent: step() updates with the local gradient, and every SYNCLINE_OSP_PERIOD
steps the model's change is averaged while training goes on
(syncline.torch.model_sync). In ssp mode each step() updates with the local
gradient, sends the change and takes the model back at most
SYNCLINE_SSP_STALENESS steps stale (syncline.torch.stale_sync). step() also reports the training step to
libsyncline, which drives the online tuner of partition size and credit and
the trace's step range.
"""
import contextlib
import threading

import torch

from syncline import _session
from syncline.reduce_ops import Average, Scaled, averages
from syncline.torch import ops
from syncline.torch.compression import Compression
from syncline.torch.cross_iteration import CrossIterationUpdater
from syncline.torch.gradient_sync import GradientSync
from syncline.torch.model_sync import ModelSync
from syncline.torch.stale_sync import StaleSync


class _DistributedOptimizer(torch.optim.Optimizer):
    def __init__(self, params, named_parameters, compression, backward_passes_per_step, cross_iteration,
                 average=True):
        self._own_thread_groups = threading.local()  # the updater thread's one-parameter view
        self._constructed = False
        super(self.__class__, self).__init__(params)
        all_params = [p for group in self.param_groups for p in group["params"]]
        if named_parameters is None:
            named = [(f"param.{i}", p) for i, p in enumerate(all_params)]
        else:
            named = list(named_parameters)
            if any(not isinstance(item, tuple) or len(item) != 2 for item in named):
                raise ValueError("named_parameters must be (name, parameter) pairs, such as model.named_parameters()")
            owned = {id(p) for p in all_params}
            unnamed = owned - {id(p) for _, p in named}
            if unnamed:
                raise ValueError(f"{len(unnamed)} parameter(s) of the optimizer are missing from named_parameters")
            named = [(n, p) for n, p in named if id(p) in owned]  # only what this optimizer updates
        worker = _session.current().worker
        self._model_sync = None  # osp and ssp modes: model changes are averaged instead of gradients
        self._sync = None
        if cross_iteration is None:
            cross_iteration = worker.cross_iteration  # SYNCLINE_CROSS_ITERATION, off where unset
        if worker.sync_mode in ("osp", "ssp"):
            mode = worker.sync_mode
            if not average:
                raise ValueError(f"op=Sum sums gradients, and {mode} mode (SYNCLINE_SYNC_MODE={mode}) averages the "
                                 "workers' model changes instead: use op=Average")
            if cross_iteration:
                raise ValueError(f"cross-iteration overlap (SYNCLINE_CROSS_ITERATION) overlaps gradient sums, and "
                                 f"{mode} mode (SYNCLINE_SYNC_MODE={mode}) sums none: choose one")
            cross_iteration = False
            # Gradients accumulate over backward passes as in plain torch: step() is the update.
            self._model_sync = ModelSync(named, worker.osp_period, compression, prefix="osp.") if mode == "osp" \
                else StaleSync(named, compression, prefix="ssp.")
        else:
            self._sync = GradientSync(named, compression, backward_passes_per_step, prefix="grad.", average=average)
        self._last_step_end_us = None
        self._synchronized = False  # synchronize() ran since the last step()
        self._ready = []  # with overlap: (parameter, hyperparameters, grad) whose sums synchronize() waited for
        self._should_synchronize = True
        self._updater = None
        if cross_iteration:
            self._updater = CrossIterationUpdater(self._update_one)
            self._sync.before_accumulate = lambda p: self._updater.wait([p])
            _session.current().on_shutdown(self._updater.close)
        self._constructed = True

    # The training thread always sees the real param groups; the updater thread,
    # while it updates one parameter, sees a one-parameter copy (hyperparameters
    # as they were at that step()), so nothing shared is ever narrowed.
    # (Stored under its own name in __dict__, where torch's __setstate__ writes it too.)
    @property
    def param_groups(self):
        view = getattr(self.__dict__.get("_own_thread_groups"), "groups", None)
        return view if view is not None else self.__dict__["param_groups"]

    @param_groups.setter
    def param_groups(self, groups):
        self.__dict__["param_groups"] = groups

    @property
    def cross_iteration(self):
        """True when updates overlap the next forward pass."""
        return self._updater is not None

    def synchronize(self):
        """Waits for every gradient's average, so that they may be read or changed (clipping) before
        step(); step() then does not send them again. With cross-iteration overlap it also waits for
        the updates in flight, so that parameters may be read. In osp and ssp modes gradients are local
        and there is nothing to wait for (average_models() gives every worker the global model)."""
        if self._model_sync is not None:
            return
        if self._updater is not None:
            self._updater.wait()
            if not self._synchronized and self._sync.has_pending():
                for p, handle in self._sync.take_handles():
                    ops.synchronize(handle)
                    self._ready.append(p)
                self._synchronized = True
            return
        self._sync.synchronize()
        self._synchronized = True

    def average_models(self):
        """In osp and ssp modes, brings in every worker's changes now and waits: every worker then holds
        the global model (for a checkpoint or an evaluation). A collective: every worker calls it after the same
        number of steps. Otherwise the models are equal already and it does nothing."""
        if self._model_sync is not None:
            self._model_sync.average_models()

    def _base_step(self, closure=None):
        # The wrapped optimizer's step without torch's step-hook wrapper: our own
        # step() is the one wrapped, so step hooks run once per step, on this thread.
        step = self.__class__.__mro__[1].step
        if getattr(step, "hooked", False):
            step = step.__wrapped__
        return step(self, closure)

    def state_dict(self):
        if self._updater is not None:
            self._updater.wait()  # no update may be writing into the state
        return super(self.__class__, self).state_dict()

    def load_state_dict(self, state_dict):
        if self.__dict__.get("_updater") is not None:
            self._updater.wait()
        return super(self.__class__, self).load_state_dict(state_dict)

    def add_param_group(self, param_group):
        if self.__dict__.get("_constructed"):
            raise ValueError("a DistributedOptimizer's parameters are fixed when it is built (every worker declared "
                             "their gradients then): build it again with the new parameters")
        return super(self.__class__, self).add_param_group(param_group)

    @contextlib.contextmanager
    def skip_synchronize(self):
        """Horovod's and BytePS's: step() inside this block does not synchronize (the script did)."""
        self._should_synchronize = False
        try:
            yield
        finally:
            self._should_synchronize = True

    def _update_one(self, p, hyperparameters, grad):
        # The wrapped optimizer's own step(), over this one parameter.
        self._own_thread_groups.groups = [dict(hyperparameters, params=[p])]
        try:
            self._base_step()
        finally:
            self._own_thread_groups.groups = None
        if p.grad is grad:
            p.grad = None  # consumed; the next backward starts it afresh

    def zero_grad(self, set_to_none=True):
        if self._model_sync is not None:
            return super(self.__class__, self).zero_grad(set_to_none)
        if self._updater is None:
            self._sync.finish_interrupted()
            return super(self.__class__, self).zero_grad(set_to_none)
        # A parameter whose update is still running keeps its gradient until then (the update clears it).
        for group in self.param_groups:
            for p in group["params"]:
                if not self._updater.is_pending(p) and p.grad is not None:
                    p.grad = None

    def step(self, closure=None):
        worker = _session.current().worker
        if self._last_step_end_us is not None:
            worker.trace_span("forward+backward", self._last_step_end_us, worker.now_us())
        if self._model_sync is not None:
            self._model_sync.before_update()
            loss = self._base_step(closure)
            self._model_sync.after_update()
        elif self._updater is None or closure is not None:
            if self._updater is not None:  # the closure re-evaluates the model: this step runs without overlap
                self._updater.wait()
                self._ready = []  # sums that synchronize() waited for: used in place below
            if self._should_synchronize and not self._synchronized:
                self._sync.synchronize()
            self._synchronized = False
            loss = self._base_step(closure)
        else:
            self._updater.wait()  # last step's updates: done by now unless a parameter is unused
            group_of = {}
            for group in self.param_groups:
                hyperparameters = {k: v for k, v in group.items() if k != "params"}
                for q in group["params"]:
                    group_of[id(q)] = hyperparameters
            if self._synchronized:  # the sums are back already
                ready, self._ready, self._synchronized = self._ready, [], False
                items = [(p, None, (group_of[id(p)], p.grad)) for p in ready]
            else:
                items = [(p, handle, (group_of[id(p)], p.grad)) for p, handle in self._sync.take_handles()]
            self._updater.submit(items)
            loss = None
        worker.begin_step()
        self._last_step_end_us = worker.now_us()
        return loss


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none, backward_passes_per_step=1,
                         op=Average, gradient_predivide_factor=1.0, cross_iteration=None):
    """Wraps `optimizer` so that step() uses gradients averaged over every worker.

    `named_parameters` (e.g. model.named_parameters()) names the gradients in
    logs and errors; without it they are numbered. `backward_passes_per_step`:
    gradients accumulate locally over that many backward passes, then go out.
    `op`, `gradient_predivide_factor`: Horovod's arguments. op=Sum sums the
    gradients instead (refused in osp and ssp, which average model changes).
    A predivide factor f (with op=Average, as in Horovod) divides each
    gradient by f before the sum and multiplies the average by f after it:
    the same average, summed from smaller values (float16 compression).
    `cross_iteration`: overlap each step's updates with the next forward pass
    (default: the SYNCLINE_CROSS_ITERATION setting, off where unset;
    docs/python.md says what it changes). Every worker must build
    the optimizer over the same parameters, in order."""
    average = averages(op)
    if gradient_predivide_factor != 1.0:
        if not average:
            raise ValueError("gradient_predivide_factor goes with op=Average (as in Horovod): it splits the "
                             "average's division around the sum")
        if not gradient_predivide_factor > 0:
            raise ValueError(f"gradient_predivide_factor must be positive, got {gradient_predivide_factor!r}")
        compression = Scaled(compression, 1.0 / gradient_predivide_factor, gradient_predivide_factor)
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,), dict(_DistributedOptimizer.__dict__))
    wrapped = cls(optimizer.param_groups, named_parameters, compression, backward_passes_per_step, cross_iteration,
                  average)
    wrapped.load_state_dict(optimizer.state_dict())
    return wrapped
