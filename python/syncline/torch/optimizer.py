"""DistributedOptimizer: any torch optimizer, with gradients averaged across workers.

As in byteps.torch and horovod.torch, it wraps the user's optimizer in a
subclass of its own class: backward posts each gradient through the scheduling
proxy as it is produced (syncline.torch.gradient_sync), and step() waits for
the sums still missing before the update runs. step() also reports the
training step to libsyncline, which drives the online tuner of partition size
and credit and the trace's step range.
"""
import torch

from syncline import _session
from syncline.torch.compression import Compression
from syncline.torch.gradient_sync import GradientSync


class _DistributedOptimizer(torch.optim.Optimizer):
    def __init__(self, params, named_parameters, compression, backward_passes_per_step):
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
        self._sync = GradientSync(named, compression, backward_passes_per_step, prefix="grad.")
        self._last_step_end_us = None

    def synchronize(self):
        """Waits for every gradient's sum (step() does this itself)."""
        self._sync.synchronize()

    def step(self, closure=None):
        worker = _session.current().worker
        if self._last_step_end_us is not None:
            worker.trace_span("forward+backward", self._last_step_end_us, worker.now_us())
        self._sync.synchronize()
        loss = super(self.__class__, self).step(closure)
        worker.begin_step()
        self._last_step_end_us = worker.now_us()
        return loss


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none, backward_passes_per_step=1):
    """Wraps `optimizer` so that step() uses gradients averaged over every worker.

    `named_parameters` (e.g. model.named_parameters()) names the gradients in
    logs and errors; without it they are numbered. `backward_passes_per_step`:
    gradients accumulate locally over that many backward passes, then go out.
    Every worker must build the optimizer over the same parameters, in order."""
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,), dict(_DistributedOptimizer.__dict__))
    wrapped = cls(optimizer.param_groups, named_parameters, compression, backward_passes_per_step)
    wrapped.load_state_dict(optimizer.state_dict())
    return wrapped
