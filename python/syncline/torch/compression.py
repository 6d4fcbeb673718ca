"""Gradient compression for push_pull, as in byteps.torch / horovod.torch."""
import torch

from syncline.compression import NativeForms, NoneCompressor


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


class Compression(NativeForms):
    """The compressors push_pull and DistributedOptimizer accept. `none` and `fp16` are
    Horovod's (fp16: a cast in Python); the others run inside libsyncline on float32
    tensors, with error feedback on workers and servers (syncline.compression.NativeCompressor)."""

    none = NoneCompressor
    fp16 = FP16Compressor
