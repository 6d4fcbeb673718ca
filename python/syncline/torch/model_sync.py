"""OSP for syncline.torch: the schedule of syncline._model_sync over torch parameters.

Every `period` steps each worker averages its model change since the last
global model, without waiting, and merges the average when the next period
ends; see syncline._model_sync for the rules and what they guarantee.
"""
import torch

from syncline import _model_sync, _session
from syncline.compression import native_form
from syncline.torch import ops
from syncline.torch.broadcast import broadcast_tensor_


def declare_parameters(named_parameters, compression, prefix):
    """The trainable parameters of `named_parameters`, each once, as (prefix + name, parameter) in
    declaration order, declared to the job up front in that order on every worker (declaring is a
    collective): what the osp and ssp wrappers sum."""
    session = _session.current()
    params, seen = [], set()
    for name, p in named_parameters:
        if p.requires_grad and id(p) not in seen:
            seen.add(id(p))
            params.append((prefix + name, p))
    for name, p in params:
        session.tensor_id(name, ops.wire_dtype(compression.wire_dtype(p.dtype)), p.shape, native_form(compression))
    return params


class TorchParameters:
    """syncline._model_sync's view of torch parameters (the adapter its docstring describes)."""

    def __init__(self, params, compression, vote_name, start_prefix="osp.start."):
        self._params = params  # (name, parameter)
        self._compression = compression
        self._vote_name = vote_name
        self._start_prefix = start_prefix  # what the broadcast of worker 0's parameters is named by
        self.names = [name for name, _ in params]

    def copy(self):
        with torch.no_grad():
            return [p.detach().clone() for _, p in self._params]

    def current(self):
        return [p.detach() for _, p in self._params]

    def zeros(self):
        return [torch.zeros_like(p) for _, p in self._params]

    def broadcast_(self, values):
        for name, v in zip(self.names, values):
            broadcast_tensor_(v, 0, self._start_prefix + name)
        return values

    def load(self, values):
        with torch.no_grad():
            for (_, p), v in zip(self._params, values):
                p.copy_(v)

    def post(self, i, snapshot, global_):
        with torch.no_grad():
            return ops.post_model_change(snapshot - global_, name=self.names[i], priority=-i,
                                         compression=self._compression)

    def done(self, handle):
        return ops.poll(handle)

    def wait(self, handle):
        return ops.synchronize(handle)

    def merge_(self, i, global_, snapshot, average):
        with torch.no_grad():
            global_.add_(average)
            self._params[i][1].sub_(snapshot).add_(global_)  # exactly the global model where nothing moved since

    def post_vote(self, steps):
        return ops.post_model_change(torch.tensor([steps], dtype=torch.float64), name=self._vote_name, priority=1,
                                     compression=ops.Compression.none)

    def wait_vote(self, handle):
        return float(ops.synchronize(handle)[0])


class ModelSync(_model_sync.ModelSync):
    """The OSP synchronizations of `named_parameters` (the parameters one wrapper updates)."""

    def __init__(self, named_parameters, period, compression, prefix):
        _model_sync.check_period(period)  # before the declarations, which other workers would wait in
        params = declare_parameters(named_parameters, compression, prefix)
        # One vote tensor per wrapper: named after its first parameter, which no other wrapper has.
        vote_name = f"{params[0][0]}.period.vote" if params else prefix + "period.vote"
        super().__init__(TorchParameters(params, compression, vote_name), period)
        if self.auto:
            _session.current().tensor_id(vote_name, ops.wire_dtype(torch.float64), (1,))
