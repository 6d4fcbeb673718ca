"""Syncline: a parameter-server service for data-parallel training.

Framework shims live in `syncline.torch` (PyTorch) and, where installed,
`syncline.tensorflow`; both reach the C++ runtime through `syncline._capi`.
Jobs are started with `pslaunch` (installed with this package).
"""
from syncline.errors import NotInitializedError, SynclineError

__version__ = "0.1.0"
__all__ = ["NotInitializedError", "SynclineError", "__version__"]
