"""Gradient compression for push_pull, as in byteps.torch / horovod.torch."""
import torch

from syncline.compression import NativeCompressor, NoneCompressor, ratio_form


class FP16Compressor:
    """Sends floating-point tensors as float16 (half the bytes) and restores their dtype on return
    (Horovod's cast, in Python, without error feedback)."""

    native = None

    @staticmethod
    def compress(tensor):
        if tensor.dtype.is_floating_point and tensor.dtype != torch.float16:
            return tensor.to(torch.float16), tensor.dtype
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor if ctx is None else tensor.to(ctx)

    @staticmethod
    def wire_dtype(dtype):
        return torch.float16 if dtype.is_floating_point else dtype


class Compression:
    """The compressors push_pull and DistributedOptimizer accept. `none` and `fp16` are
    Horovod's (fp16: a cast in Python); the others run inside libsyncline on float32
    tensors, with error feedback on workers and servers (syncline.compression.NativeCompressor)."""

    none = NoneCompressor
    fp16 = FP16Compressor
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
