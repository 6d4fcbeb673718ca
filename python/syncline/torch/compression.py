"""Gradient compression for push_pull, as in byteps.torch / horovod.torch."""
import torch

from syncline.compression import NoneCompressor


class FP16Compressor:
    """Sends floating-point tensors as float16 (half the bytes) and restores their dtype on return."""

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
    """The compressors push_pull and DistributedOptimizer accept."""

    none = NoneCompressor
    fp16 = FP16Compressor
