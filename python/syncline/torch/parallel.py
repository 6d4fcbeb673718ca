"""DistributedDataParallel: torch DDP's usage, over Syncline's servers.

Wrap the model, train with any optimizer: the wrapper copies worker 0's
parameters and buffers everywhere at construction, posts each gradient through
the scheduling proxy as backward produces it, and waits for the averaged
gradients when backward ends, so optimizer.step() sees them as with DDP. In osp
mode (SYNCLINE_SYNC_MODE=osp) no gradient is sent: each training forward counts
the step before it, and every SYNCLINE_OSP_PERIOD of them the model's change
is averaged while training goes on (syncline.torch.model_sync), and buffers
stay local; average_models() makes every worker hold the global model. In ssp
mode each training forward sends the change of the update before it and
takes the model back, at most SYNCLINE_SSP_STALENESS steps stale
(syncline.torch.stale_sync).
"""
import contextlib

import torch

from syncline import _session
from syncline.torch.broadcast import broadcast_parameters
from syncline.torch.compression import Compression
from syncline.torch.gradient_sync import GradientSync
from syncline.torch.model_sync import ModelSync
from syncline.torch.stale_sync import StaleSync


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
        self._worker = _session.current().worker
        self._sync = self._model_sync = None
        if self._worker.sync_mode == "osp":
            self._model_sync = ModelSync(module.named_parameters(), self._worker.osp_period, compression,
                                         prefix=f"{name}.osp.")
            self._forwards = 0
        elif self._worker.sync_mode == "ssp":
            self._model_sync = StaleSync(module.named_parameters(), compression, prefix=f"{name}.ssp.")
            self._forwards = 0
        else:
            self._sync = GradientSync(module.named_parameters(), compression, 1, prefix=f"{name}.grad.",
                                      on_first_hook=self._wait_at_backward_end)

    @contextlib.contextmanager
    def no_sync(self):
        """As torch DDP's: gradients of backward passes inside accumulate locally; the first backward
        after the block sends the accumulated gradients. (In osp mode nothing is sent per backward.)"""
        if self._sync is None:
            yield
            return
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
            if self._model_sync is not None:
                # A training forward follows the previous step's update: in osp mode the period
                # counts training forwards; in ssp each sends the update before it.
                if self._forwards:
                    self._model_sync.after_update()
                self._model_sync.before_update()
                self._forwards += 1
            else:
                self._sync.finish_interrupted()  # a backward that raised partway left its step open
                if self.broadcast_buffers:  # not in osp: no step waits there (average_models copies them)
                    self._broadcast_buffers()
            self._worker.begin_step()
        return self.module(*args, **kwargs)

    def _broadcast_buffers(self):
        buffers = [(f"{self._name}.buffer.{n}", b) for n, b in self.module.named_buffers()]
        if buffers:
            broadcast_parameters(buffers, self._root)

    def synchronize(self):
        """Nothing to wait for: gradients are averaged when backward ends (in osp mode, not at all)."""

    def average_models(self):
        """In osp and ssp modes, brings in every worker's model changes now and waits, and copies the
        root's buffers:
        every worker then holds the global model (for a checkpoint or an evaluation). A collective:
        every worker calls it after the same number of training forwards. Otherwise the models are
        equal already and it does nothing."""
        if self._model_sync is not None:
            self._model_sync.average_models()
            if self.broadcast_buffers:
                self._broadcast_buffers()
