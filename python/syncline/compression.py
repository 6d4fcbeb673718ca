"""What the frameworks' compressors share: sending a tensor as it is, and the
compressions libsyncline applies itself (on the workers and on the servers,
with error feedback on both), which a tensor's declaration names."""


class NoneCompressor:
    """Sends tensors as they are (or as the job's SYNCLINE_COMPRESSION says, for fp32 tensors)."""

    native = None  # the job's setting

    @staticmethod
    def compress(tensor):
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor

    @staticmethod
    def wire_dtype(dtype):
        return dtype


class NativeCompressor(NoneCompressor):
    """A compression libsyncline applies to a float32 tensor's chunks: each worker
    pushes them compressed, with error feedback (what one step loses is added to
    the next), the servers decode and sum them and send the sum back compressed,
    with error feedback of their own. The tensor itself stays float32 in Python
    (compress, decompress and wire_dtype pass it through); tensors below
    SYNCLINE_MIN_COMPRESS_BYTES travel uncompressed. `form`: "fp16", "bf16",
    "int8", "onebit", "topk:R" or "randomk:R" (R below 0.5)."""

    def __init__(self, form):
        self.native = form

    def __repr__(self):
        return f"Compression({self.native!r})"

    def __eq__(self, other):
        return isinstance(other, NativeCompressor) and other.native == self.native

    def __hash__(self):
        return hash(self.native)


def ratio_form(kind, ratio):
    """"topk:R" / "randomk:R" for a fraction R of the values, checked here for a clear error."""
    ratio = float(ratio)
    if not 0.0 < ratio < 0.5:
        raise ValueError(f"{kind} sends a fraction of the values, between 0 and 0.5 (exclusive), not {ratio}: "
                         "above that it sends more bytes than the tensor")
    return NativeCompressor(f"{kind}:{ratio!r}")


class NativeForms:
    """The compressions libsyncline applies, as the frameworks' Compression classes offer them."""

    bf16 = NativeCompressor("bf16")
    int8 = NativeCompressor("int8")
    onebit = NativeCompressor("onebit")

    @staticmethod
    def topk(ratio):
        """The fraction `ratio` of each chunk's values largest in magnitude, with their indices."""
        return ratio_form("topk", ratio)

    @staticmethod
    def randomk(ratio):
        """The fraction `ratio` of each chunk's values, at indices drawn afresh every step."""
        return ratio_form("randomk", ratio)


def native_form(compression):
    """The form libsyncline compresses a tensor in, from a compressor (None: the job's setting)."""
    return getattr(compression, "native", None)
