"""horovod.tensorflow's allreduce under its name, so that a Horovod script moves over by its import.

byteps.tensorflow calls a sum across workers push_pull; Horovod calls it allreduce, with a reduction op
(Average, Sum) and scale factors. This is that call over push_pull, eagerly and inside tf.function.
Adasum (Horovod's adaptive summation) has no counterpart on a parameter server and is refused with
that reason.
"""
import tensorflow as tf

from syncline.reduce_ops import Adasum, Average, Sum, allreduce_averages  # noqa: F401 (Horovod's names)
from syncline.tensorflow.ops import Compression, push_pull


def allreduce(tensor, average=None, device_dense="", device_sparse="", compression=Compression.none, op=None,
              prescale_factor=1.0, postscale_factor=1.0, name=None):
    """The average (op=Average, the default) or sum (op=Sum) of `tensor` over the workers; differentiable.
    `device_dense` and `device_sparse` (where Horovod places its ops) have no meaning here: the sum runs
    in libsyncline, on host memory."""
    mean = allreduce_averages(op, average)
    factor = prescale_factor * postscale_factor
    if factor != 1.0:  # the sum is linear: both factors apply before it
        tensor = tf.convert_to_tensor(tensor)
        tensor = tensor * tf.cast(factor, tensor.dtype)
    return push_pull(tensor, mean, name, compression)
