"""The exceptions Syncline raises to Python code."""


class SynclineError(RuntimeError):
    """A Syncline call failed; the message says why (and names the peer or tensor where one is at fault).

    `code` is the status code of the C API (0 when the error arose in Python)."""

    def __init__(self, message, code=0):
        super().__init__(message)
        self.code = code


class NotInitializedError(SynclineError, ValueError):
    """A call needs a running Syncline worker: init() was not called, or shutdown() already was."""
