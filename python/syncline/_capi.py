"""The ctypes binding of libsyncline's C API (proxy/c_api.h).

This is the whole native part of the Python package: it loads the shared
library and passes tensors to it by their memory address, so nothing here is
compiled against a framework and one build serves every PyTorch or TensorFlow
version. Framework shims use `Worker`; they never call ctypes themselves.
"""
import ctypes
import os
import threading

from syncline.errors import SynclineError

FLOAT32, FLOAT64, FLOAT16, BFLOAT16 = 1, 2, 3, 4
DEADLINE_EXCEEDED = 5  # StatusCode::kDeadlineExceeded (common/status.h)
DTYPE_NAMES = {FLOAT32: "float32", FLOAT64: "float64", FLOAT16: "float16", BFLOAT16: "bfloat16"}
DTYPE_CODES = {name: code for code, name in DTYPE_NAMES.items()}


def unsupported_dtype(name, carried):
    """The error for a tensor whose dtype Syncline does not carry; `carried` names those it does."""
    return TypeError(f"Syncline cannot push_pull a tensor of dtype {name}; it carries " + ", ".join(carried))

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
_DONE_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p)
_NO_CALLBACK = _DONE_FN()  # a null function pointer: push_pulls are waited for through their op


def native_dir():
    """Where the bundled binaries and library are (SYNCLINE_NATIVE_DIR overrides it)."""
    return os.environ.get("SYNCLINE_NATIVE_DIR") or os.path.join(_PACKAGE_DIR, "_native")


def library_path():
    return os.path.join(native_dir(), "lib", "libsyncline.so")


_lib = None
_lib_lock = threading.Lock()


def _load():
    global _lib
    with _lib_lock:
        if _lib is not None:
            return _lib
        path = library_path()
        if not os.path.exists(path):
            raise SynclineError(
                f"libsyncline.so is not at {path}: the package was installed without its native part "
                "(pip install ./python from a Syncline checkout builds it)")
        # CDLL releases the GIL during every call. Where a library loaded earlier exports a
        # protobuf of its own (TensorFlow does), libsyncline's protobuf calls would bind to
        # that copy and crash at the first message: RTLD_DEEPBIND then makes libsyncline and
        # its libraries resolve their symbols among themselves first. Only then: under
        # Debian's torch 1.13 a deep-bound libsyncline never finished joining its job.
        mode = os.RTLD_LOCAL
        if _foreign_protobuf_loaded():
            mode |= getattr(os, "RTLD_DEEPBIND", 0)
        lib = ctypes.CDLL(path, mode=mode)
        p, i, u32, u64, i64 = ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_uint64, ctypes.c_int64
        signatures = {
            "syncline_last_error": (ctypes.c_char_p, []),
            "syncline_init": (i, [ctypes.POINTER(p)]),
            "syncline_rank": (i, [p]),
            "syncline_size": (i, [p]),
            "syncline_local_rank": (i, [p]),
            "syncline_local_size": (i, [p]),
            "syncline_cross_iteration": (i, [p]),
            "syncline_sync_mode": (ctypes.c_char_p, [p]),
            "syncline_would_compress": (i, [p, i, u64, ctypes.c_char_p, ctypes.POINTER(i)]),
            "syncline_osp_period": (i, [p]),
            "syncline_declare": (i, [p, ctypes.c_char_p, i, u64, ctypes.POINTER(u32)]),
            "syncline_declare_compressed": (i, [p, ctypes.c_char_p, i, u64, ctypes.c_char_p, ctypes.POINTER(u32)]),
            "syncline_push_pull_async": (i, [p, u32, p, i, i64, _DONE_FN, p, ctypes.POINTER(p)]),
            "syncline_push_pull_to": (i, [p, u32, p, p, i, i64, _DONE_FN, p, ctypes.POINTER(p)]),
            "syncline_push_pull_on_stream": (i, [p, u32, p, p, i, i64, p, _DONE_FN, p, ctypes.POINTER(p)]),
            "syncline_push_pull": (i, [p, u32, p, p, i, i64]),
            "syncline_poll": (i, [p]),
            "syncline_wait": (i, [p, i64]),
            "syncline_op_free": (None, [p]),
            "syncline_begin_step": (i, [p]),
            "syncline_now_us": (i64, []),
            "syncline_trace_span": (i, [p, ctypes.c_char_p, i64, i64]),
            "syncline_broadcast": (i, [p, u32, p, i]),
            "syncline_barrier": (i, [p]),
            "syncline_shutdown": (i, [p]),
        }
        for name, (restype, argtypes) in signatures.items():
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = restype, argtypes
        _lib = lib
        return lib


def _foreign_protobuf_loaded():
    try:
        return hasattr(ctypes.CDLL(None), "_ZNK6google8protobuf11MessageLite17SerializeAsStringB5cxx11Ev")
    except OSError:
        return False


def _check(lib, code, what):
    if code != 0:
        message = lib.syncline_last_error().decode(errors="replace")
        raise SynclineError(f"{what} failed: {message}", code)


class Op:
    """One push_pull in flight: poll it, wait for it; freed when waited or dropped."""

    def __init__(self, lib, handle):
        self._lib, self._handle = lib, handle

    def poll(self):
        return self._handle is not None and self._lib.syncline_poll(self._handle) == 1

    def wait(self, timeout_ms=-1):
        """Waits up to timeout_ms (< 0: the job's request timeout); raises on failure or timeout."""
        if self._handle is None:
            raise SynclineError("this operation was already waited for")
        code = self._lib.syncline_wait(self._handle, int(timeout_ms))
        if code != 0:
            # The handle stays: a wait that timed out may be waited again, and the
            # caller keeps the op (and the memory it writes into) alive after a failure.
            message = self._lib.syncline_last_error().decode(errors="replace")
            raise SynclineError(f"push_pull failed: {message}", code)
        self.free()

    def free(self):
        if self._handle is not None:
            self._lib.syncline_op_free(self._handle)
            self._handle = None

    def __del__(self):
        try:
            self.free()
        except Exception:  # interpreter shutdown
            pass


class KernelApi(ctypes.Structure):
    """What a framework's compiled op calls libsyncline through (syncline/tensorflow/kernels): the
    functions, taken from the library loaded here, and the worker (cleared at shutdown). The op
    does not link libsyncline itself, so the two never share symbols."""
    _fields_ = [("push_pull_to", ctypes.c_void_p), ("last_error", ctypes.c_void_p), ("worker", ctypes.c_void_p)]


_kernel_apis = []  # every table handed out: compiled graphs may keep their address after shutdown


class Worker:
    """A worker of a running job (joins it on construction)."""

    def __init__(self):
        self._lib = _load()
        handle = ctypes.c_void_p()
        _check(self._lib, self._lib.syncline_init(ctypes.byref(handle)), "joining the job (syncline_init)")
        self._handle = handle
        self.rank = self._lib.syncline_rank(handle)
        self.size = self._lib.syncline_size(handle)
        self.local_rank = self._lib.syncline_local_rank(handle)
        self.local_size = self._lib.syncline_local_size(handle)
        self.cross_iteration = self._lib.syncline_cross_iteration(handle) == 1
        self.sync_mode = self._lib.syncline_sync_mode(handle).decode()
        self.osp_period = self._lib.syncline_osp_period(handle)
        self._kernel_api = None

    def kernel_api(self):
        """The address of this worker's KernelApi table, for compiled ops (kept for good)."""
        if self._kernel_api is None:
            fn = lambda name: ctypes.cast(getattr(self._lib, name), ctypes.c_void_p).value
            api = KernelApi(fn("syncline_push_pull_to"), fn("syncline_last_error"), self._handle.value)
            _kernel_apis.append(api)
            self._kernel_api = api
        return ctypes.addressof(self._kernel_api)

    def declare(self, name, dtype, num_elements, compression=None):
        """Declares a tensor; `compression` names its form ("none", "int8", ...; None: the job's)."""
        tensor_id = ctypes.c_uint32()
        form = None if compression is None else compression.encode()
        code = self._lib.syncline_declare_compressed(self._handle, name.encode(), dtype, num_elements, form,
                                                     ctypes.byref(tensor_id))
        _check(self._lib, code, f"declaring tensor '{name}'")
        return tensor_id.value

    def would_compress(self, dtype, num_elements, compression=None):
        """Whether a tensor declared so would travel compressed (`compression` as in declare)."""
        out = ctypes.c_int(0)
        form = None if compression is None else compression.encode()
        _check(self._lib, self._lib.syncline_would_compress(self._handle, dtype, num_elements, form, ctypes.byref(out)),
               "would_compress")
        return out.value == 1

    def push_pull_async(self, tensor_id, address, average, priority, output=None, stream=None):
        """Sums the tensor at `address` in place, or into `output` (an address) leaving it unread.
        `stream`: device memory made by work queued on this CUDA stream (a cudaStream_t as an int;
        None or 0: the device's default stream), which the copies to the host wait for."""
        op = ctypes.c_void_p()
        code = self._lib.syncline_push_pull_on_stream(self._handle, tensor_id, address, output, int(bool(average)),
                                                      int(priority), stream or None, _NO_CALLBACK, None,
                                                      ctypes.byref(op))
        _check(self._lib, code, "push_pull")
        return Op(self._lib, op)

    def push_pull(self, tensor_id, address, average, priority, output):
        """Sums the tensor at `address` into `output` (addresses; equal: in place) and returns when
        it is there. After a failure both may still be in use (see _session.keep_alive)."""
        code = self._lib.syncline_push_pull(self._handle, tensor_id, address, output, 1 if average else 0, priority)
        if code:  # the eager shims' every call: no second Python call when it went well
            _check(self._lib, code, "push_pull")

    def broadcast(self, tensor_id, address, root):
        _check(self._lib, self._lib.syncline_broadcast(self._handle, tensor_id, address, root), "broadcast")

    def barrier(self):
        _check(self._lib, self._lib.syncline_barrier(self._handle), "barrier")

    def begin_step(self):
        _check(self._lib, self._lib.syncline_begin_step(self._handle), "begin_step")

    def now_us(self):
        return self._lib.syncline_now_us()

    def trace_span(self, name, start_us, end_us):
        self._lib.syncline_trace_span(self._handle, name.encode(), int(start_us), int(end_us))

    def shutdown(self):
        if self._kernel_api is not None:
            self._kernel_api.worker = None  # compiled ops fail from now on, rather than use a freed worker
        handle, self._handle = self._handle, None
        if handle is not None:
            _check(self._lib, self._lib.syncline_shutdown(handle), "shutdown")
