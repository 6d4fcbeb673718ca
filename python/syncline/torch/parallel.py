"""DistributedDataParallel: torch DDP's usage, over Syncline's servers.

Wrap the model, train with any optimizer: the wrapper copies worker 0's
parameters and buffers everywhere at construction, posts each gradient through
the scheduling proxy as backward produces it, and waits for the averaged
gradients when backward ends, so optimizer.step() sees them as with DDP.
"""
import contextlib

import torch

from syncline import _session
from syncline.torch.broadcast import broadcast_parameters
from syncline.torch.compression import Compression
from syncline.torch.gradient_sync import GradientSync


class DistributedDataParallel(torch.nn.Module):
    """`device_ids`, `output_device` and `find_unused_parameters` are accepted as torch's DDP takes
    them and need nothing here: tensors stay where the module puts them, and gradients backward
    did not produce are sent as zeros."""

    def __init__(self, module, device_ids=None, output_device=None, broadcast_buffers=True,
                 find_unused_parameters=False, compression=Compression.none, root_rank=0, name="ddp"):
        super().__init__()
        self.module = module
        self.broadcast_buffers = broadcast_buffers
        self._root = root_rank
        self._name = name
        broadcast_parameters(module.state_dict(), root_rank)
        self._sync = GradientSync(module.named_parameters(), compression, 1, prefix=f"{name}.grad.",
                                  on_first_hook=self._wait_at_backward_end)
        self._worker = _session.current().worker

    @contextlib.contextmanager
    def no_sync(self):
        """As torch DDP's: gradients of backward passes inside accumulate locally; the first backward
        after the block sends the accumulated gradients."""
        self._sync.posting = False
        try:
            yield
        finally:
            self._sync.posting = True

    def _wait_at_backward_end(self):
        torch.autograd.Variable._execution_engine.queue_callback(self._sync.synchronize)

    def forward(self, *args, **kwargs):
        # A training forward is a step on every worker; evaluation (often on
        # one rank only) must not take part in collectives.
        if self.training and torch.is_grad_enabled():
            self._sync.finish_interrupted()  # a backward that raised partway left its step open
            if self.broadcast_buffers:
                buffers = [(f"{self._name}.buffer.{n}", b) for n, b in self.module.named_buffers()]
                if buffers:
                    broadcast_parameters(buffers, self._root)
            self._worker.begin_step()
        return self.module(*args, **kwargs)
