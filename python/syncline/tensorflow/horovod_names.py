"""horovod.tensorflow's allreduce under its name, so that a Horovod script moves over by its import.

byteps.tensorflow calls a sum across workers push_pull; Horovod calls it allreduce, with a reduction op
(Average, Sum) and scale factors. This is that call over push_pull, eagerly and inside tf.function,
for push_pull's floating-point dtypes. Adasum (Horovod's adaptive summation) has no counterpart on a
parameter server and is refused with that reason, as allreduce is in osp, ssp and async modes.
"""
from syncline.reduce_ops import Adasum, Average, Sum, allreduce_averages, scaled  # noqa: F401 (Horovod's names)
from syncline.tensorflow.ops import Compression, graph_builder, push_pull


@graph_builder
def allreduce(tensor, average=None, device_dense="", device_sparse="", compression=Compression.none, op=None,
              prescale_factor=1.0, postscale_factor=1.0, name=None):
    """The average (op=Average, the default) or sum (op=Sum) of `tensor` over the workers; differentiable.
    `prescale_factor` multiplies the tensor before the sum, `postscale_factor` the result after it.
    `device_dense` and `device_sparse` (where Horovod places its ops) have no meaning here: the sum
    runs in libsyncline, on host memory."""
    mean = allreduce_averages(op, average)
    return push_pull(tensor, mean, name, scaled(compression, prescale_factor, postscale_factor))


@graph_builder
def keras_allreduce(value, name=None, average=None, prescale_factor=1.0, postscale_factor=1.0, op=None,
                    compression=Compression.none):
    """horovod.tensorflow.keras's allreduce: the same, with that module's argument order (the name second)."""
    return allreduce(value, average=average, compression=compression, op=op, prescale_factor=prescale_factor,
                     postscale_factor=postscale_factor, name=name)
