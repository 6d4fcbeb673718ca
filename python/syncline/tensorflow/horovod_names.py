"""horovod.tensorflow's allreduce under its name, so that a Horovod script moves over by its import.

byteps.tensorflow calls a sum across workers push_pull; Horovod calls it allreduce, with a reduction op
(Average, Sum) and scale factors. This is that call over push_pull, eagerly and inside tf.function,
for push_pull's floating-point dtypes and for integers (summed exactly). Adasum (Horovod's adaptive summation) has no counterpart on a
parameter server and is refused with that reason, as allreduce is in osp, ssp and async modes.
"""
import tensorflow as tf

from syncline import _session
from syncline.reduce_ops import (Adasum, Average, Sum, allreduce_averages, check_exact_integers,  # noqa: F401
                                 scaled, unsupported_allreduce_dtype)
from syncline.tensorflow.ops import SUPPORTED_DTYPES, Compression, graph_builder, push_pull

INTEGER_DTYPES = (tf.uint8, tf.int8, tf.int16, tf.int32, tf.int64)


@graph_builder
def allreduce(tensor, average=None, device_dense="", device_sparse="", compression=Compression.none, op=None,
              prescale_factor=1.0, postscale_factor=1.0, name=None):
    """The average (op=Average, the default) or sum (op=Sum) of `tensor` over the workers; differentiable.
    `prescale_factor` multiplies the tensor before the sum, `postscale_factor` the result after it.
    `device_dense` and `device_sparse` (where Horovod places its ops) have no meaning here: the sum
    runs in libsyncline, on host memory."""
    mean = allreduce_averages(op, average)
    tensor = tf.convert_to_tensor(tensor)
    if not tensor.dtype.is_floating and tensor.dtype not in INTEGER_DTYPES:
        raise unsupported_allreduce_dtype(tensor.dtype.name, [d.name for d in SUPPORTED_DTYPES],
                                          [d.name for d in INTEGER_DTYPES])
    if tensor.dtype in INTEGER_DTYPES:
        check_exact_integers(tensor.dtype.name, prescale_factor, postscale_factor, compression is not Compression.none)
        total = exact_integer_sum(tensor, name)
        if mean:  # as horovod.tensorflow's: rounded toward zero, in the tensor's dtype
            total = tf.truncatediv(total, tf.constant(_session.current().worker.size, tf.int64))
        return tf.cast(total, tensor.dtype)
    return push_pull(tensor, mean, name, scaled(compression, prescale_factor, postscale_factor))


def exact_integer_sum(tensor, name):
    """The sum over the workers of an integer `tensor`, as int64, exact: through a float64 push_pull of
    each value (int64: of its high 32 bits, signed, and its low 32 bits, as two values), whose sums
    stay below 2^53 with up to 2^20 workers. An int64 sum wraps on overflow, as integer arithmetic does."""
    if tensor.dtype == tf.int64:
        low = tf.bitwise.bitwise_and(tensor, tf.constant(0xFFFFFFFF, tf.int64))
        summed = push_pull(tf.cast(tf.stack([tf.bitwise.right_shift(tensor, 32), low]), tf.float64), False, name)
        return tf.bitwise.left_shift(tf.cast(summed[0], tf.int64), 32) + tf.cast(summed[1], tf.int64)
    return tf.cast(push_pull(tf.cast(tensor, tf.float64), False, name), tf.int64)


@graph_builder
def keras_allreduce(value, name=None, average=None, prescale_factor=1.0, postscale_factor=1.0, op=None,
                    compression=Compression.none):
    """horovod.tensorflow.keras's allreduce: the same, with that module's argument order (the name second)."""
    return allreduce(value, average=average, compression=compression, op=op, prescale_factor=prescale_factor,
                     postscale_factor=postscale_factor, name=name)
