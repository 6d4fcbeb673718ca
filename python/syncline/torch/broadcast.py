"""Making workers equal: parameters, optimizer state and any picklable object from one root.

Floating-point tensors travel as themselves; integer and boolean tensors and
objects travel as bytes, exactly (syncline._session.Session.broadcast_bytes).
Works on CPU-only torch and on every Python version torch supports.
"""
import io
import pickle

import torch

from syncline import _session
from syncline.torch import ops


def broadcast_tensor_(tensor, root_rank, name):
    """Overwrites `tensor` with root_rank's `tensor`, in place."""
    session = _session.current()
    with torch.no_grad():
        if tensor.dtype in ops.SUPPORTED_DTYPES:
            direct = not tensor.is_cuda and tensor.is_contiguous()
            buffer = tensor.detach() if direct else tensor.detach().cpu().contiguous()
            tensor_id = session.tensor_id(name, ops.wire_dtype(buffer.dtype), buffer.shape, "none")  # exact
            session.worker.broadcast(tensor_id, buffer.data_ptr(), root_rank)
            if not direct:
                tensor.copy_(buffer)
        else:
            cpu = tensor.detach().cpu().contiguous()
            data = session.broadcast_bytes(cpu.numpy().tobytes() if session.worker.rank == root_rank else b"",
                                           root_rank)
            received = torch.frombuffer(bytearray(data), dtype=cpu.dtype).reshape(cpu.shape) if data else cpu
            tensor.copy_(received)


def check_root(root_rank):
    """Raises ValueError unless `root_rank` is a worker rank of this job."""
    size = _session.current().worker.size
    if not isinstance(root_rank, int) or not 0 <= root_rank < size:
        raise ValueError(f"root_rank {root_rank!r} is not a worker rank (0..{size - 1})")


def broadcast_parameters(params, root_rank):
    """Copies root_rank's parameters to every worker, in place.

    `params`: a state_dict, a dict of tensors, or (name, tensor) pairs such as
    model.named_parameters(). Every worker passes the same names."""
    check_root(root_rank)
    items = sorted(params.items()) if isinstance(params, dict) else list(params)
    for name, tensor in items:
        if tensor is None:
            continue
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"broadcast_parameters: '{name}' is a {type(tensor).__name__}, not a tensor")
        broadcast_tensor_(tensor, root_rank, "broadcast." + name)


def broadcast_object(obj, root_rank=0, name=None):
    """Returns root_rank's `obj` on every worker (pickled; `obj` is ignored elsewhere)."""
    check_root(root_rank)
    session = _session.current()
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL) if session.worker.rank == root_rank else b""
    return pickle.loads(session.broadcast_bytes(data, root_rank))


def broadcast_optimizer_state(optimizer, root_rank):
    """Makes every worker's optimizer state (hyperparameters, momenta, step counts) root_rank's.

    The state goes as one serialized state_dict, so it works whether or not a
    worker's optimizer has taken a step yet; load_state_dict then puts each
    tensor on its parameter's device."""
    check_root(root_rank)
    session = _session.current()
    data = b""
    if session.worker.rank == root_rank:
        buffer = io.BytesIO()
        torch.save(optimizer.state_dict(), buffer)
        data = buffer.getvalue()
    data = session.broadcast_bytes(data, root_rank)
    if session.worker.rank != root_rank:
        try:
            state = torch.load(io.BytesIO(data), map_location="cpu", weights_only=False)
        except TypeError:  # torch before 1.13 has no weights_only
            state = torch.load(io.BytesIO(data), map_location="cpu")
        optimizer.load_state_dict(state)
