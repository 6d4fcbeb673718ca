"""Gradients through the scheduling proxy: one push_pull per parameter, posted
the moment backward has accumulated its gradient, ranked by the forward pass.

Priorities follow the order in which the forward pass first uses each
parameter (first used = most urgent: the next forward needs it first),
recorded by a module forward pre-hook during the first forward after
construction. Parameters forward never reached, and every parameter until a
forward has run, rank after those, in declaration order. BytePS's PyTorch
plugin ranks by name instead, which is alphabetical, not the model's order.
"""
import weakref

import torch

from syncline import _session
from syncline.compression import native_form
from syncline.torch import ops


class ForwardOrder:
    """Records which of `params` the forward pass uses first (module pre-hooks, one forward)."""

    def __init__(self, params):
        self._ids = {id(p) for p in params}
        self.order = []  # ids of parameters in the order forward first used them
        self._seen = set()
        self._hook = torch.nn.modules.module.register_module_forward_pre_hook(self._on_forward)

    def _on_forward(self, module, args):
        for p in module.parameters(recurse=False):
            key = id(p)
            if key in self._ids and key not in self._seen:
                self._seen.add(key)
                self.order.append(key)

    @property
    def recording(self):
        return self._hook is not None

    def stop(self):
        if self._hook is not None:
            self._hook.remove()
            self._hook = None


# Which GradientSync averages a parameter's gradient, by id(parameter); kept
# here rather than on the parameter, which torch.save would pickle. A wrapper
# lives as long as its parameters' hooks, so the entry goes with the
# parameter (values are weak: an id reused by a new tensor is free again).
_owners = weakref.WeakValueDictionary()


class GradientSync:
    """Pushes and pulls the gradients of `named_parameters` (each averaged over workers, or summed)."""

    def __init__(self, named_parameters, compression, backward_passes_per_step, prefix, on_first_hook=None,
                 average=True):
        if backward_passes_per_step < 1:
            raise ValueError(f"backward_passes_per_step must be at least 1, got {backward_passes_per_step}")
        session = _session.current()
        self._compression = compression
        self._average = average  # False: summed (Horovod's op=Sum)
        self._passes = backward_passes_per_step
        self._on_first_hook = on_first_hook
        self._params = []  # (name, parameter), declaration order
        seen = set()
        for name, p in named_parameters:
            if not isinstance(p, torch.Tensor):
                raise TypeError(f"parameter '{name}' is a {type(p).__name__}, not a tensor")
            if p.requires_grad and id(p) not in seen:
                seen.add(id(p))
                self._params.append((prefix + name, p))
        names = [name for name, _ in self._params]
        if len(set(names)) != len(names):
            raise ValueError("named_parameters has repeated names: each parameter needs its own")
        for name, p in self._params:
            if id(p) in _owners:
                raise ValueError(
                    f"parameter '{name}' already has its gradient averaged by another DistributedOptimizer or "
                    "DistributedDataParallel: wrap each parameter once (two wrappers would sum it twice)")
        # Declared up front, in the same order on every worker (declaring is a collective).
        for name, p in self._params:
            dtype = compression.wire_dtype(p.dtype)
            session.tensor_id(name, ops.wire_dtype(dtype), p.shape, native_form(compression))
        self._name_of = {id(p): name for name, p in self._params}
        self._priority = {id(p): -(len(self._params) + i) for i, (_, p) in enumerate(self._params)}
        self._forward = ForwardOrder([p for _, p in self._params])
        self._handles = {}  # id(p) -> handle of its push_pull in flight
        self._countdown = {id(p): self._passes for _, p in self._params}
        self.posting = True  # off: gradients accumulate locally (DDP's no_sync)
        self.before_accumulate = None  # called with p before backward adds to p.grad (cross-iteration)
        for _, p in self._params:
            self._register(p)
            _owners[id(p)] = self
        self._in_backward = False

    def _register(self, p):
        # The hooks live as long as the parameter (a wrapper is never unhooked).
        # Before accumulation: a gradient must not be added into a p.grad that is still in flight.
        p.register_hook(lambda grad, p=p: self._check_before_accumulate(p))
        if hasattr(p, "register_post_accumulate_grad_hook"):  # torch >= 2.1
            p.register_post_accumulate_grad_hook(self._on_gradient)
            return
        # Older torch: a hook on the parameter's gradient accumulator (kept alive here).
        accumulator = p.expand_as(p).grad_fn.next_functions[0][0]
        self._accumulators = getattr(self, "_accumulators", []) + [accumulator]
        accumulator.register_hook(lambda *unused, p=p: self._on_gradient(p))

    def _check_before_accumulate(self, p):
        key = id(p)
        if key in self._handles:
            raise RuntimeError(
                f"the gradient of '{self._name_of[key]}' was produced again before its push_pull was "
                f"synchronized: call step() after every {self._passes} backward pass(es) "
                "(backward_passes_per_step)")
        if self.before_accumulate is not None:
            self.before_accumulate(p)

    def _learn_priorities(self):
        if self._forward.recording and self._forward.order:
            self._forward.stop()
            for i, key in enumerate(self._forward.order):
                self._priority[key] = -i

    def _on_gradient(self, p):
        if not self.posting:
            return
        if not self._in_backward:
            self._in_backward = True
            self._learn_priorities()
            if self._on_first_hook is not None:
                self._on_first_hook()
        key = id(p)
        self._countdown[key] -= 1
        if self._countdown[key] == 0:
            self._post(p)

    def _post(self, p):
        key = id(p)
        if p.grad is None:
            p.grad = torch.zeros_like(p)
        self._handles[key] = ops.push_pull_async_inplace(
            p.grad, average=self._average, name=self._name_of[key], priority=self._priority[key],
            compression=self._compression)

    def take_handles(self):
        """Posts the gradients backward did not produce (unused parameters push zeros, so that every
        worker sums the same tensors each step) and hands over every (parameter, handle) of this step,
        most urgent first."""
        self._learn_priorities()
        for _, p in self._params:
            if id(p) not in self._handles:
                self._post(p)
        ranked = sorted(self._params, key=lambda item: -self._priority[id(item[1])])
        items = [(p, self._handles.pop(id(p))) for _, p in ranked]
        for key in self._countdown:
            self._countdown[key] = self._passes
        self._in_backward = False
        return items

    def has_pending(self):
        """Whether this step's backward has begun (some gradient posted or counted)."""
        return bool(self._handles) or self._in_backward

    def finish_interrupted(self):
        """After a backward that raised partway (caught by the script), finishes that step's
        push_pulls (the gradients it did not reach push zeros, as the other workers expect them),
        so that the next backward starts clean."""
        if self._handles or self._in_backward:
            self.synchronize()

    def synchronize(self):
        """Waits for every gradient's sum of this step, most urgent first."""
        for _, handle in self.take_handles():
            ops.synchronize(handle)
