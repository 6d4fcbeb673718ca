"""A TensorFlow 2 training script written for byteps.tensorflow (or horovod.tensorflow) with only its
import changed, shaped like BytePS's TF2 synthetic benchmark: the step is a tf.function that wraps
the tape and broadcasts on its first call, and the script never calls shutdown()."""
import os
import timeit

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402

import syncline.tensorflow as bps  # noqa: E402

bps.init()
tf.random.set_seed(0)
model = tf.keras.Sequential([tf.keras.Input((32,)), tf.keras.layers.Dense(64, activation="relu"),
                             tf.keras.layers.Dense(10)])
optimizer = tf.keras.optimizers.SGD(0.01)
data = tf.random.uniform([16, 32])
target = tf.random.uniform([16], maxval=10, dtype=tf.int64)


@tf.function
def step(first_batch):
    with tf.GradientTape() as tape:
        logits = model(data, training=True)
        loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(target, logits, from_logits=True))
    tape = bps.DistributedGradientTape(tape)
    gradients = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(gradients, model.trainable_variables))
    if first_batch:
        bps.broadcast_variables(model.variables, root_rank=0)
        bps.broadcast_variables(optimizer.variables, root_rank=0)


step(True)
seconds = timeit.timeit(lambda: step(False), number=5)
print(f"rank {bps.rank()}: {5 * 16 / seconds:.1f} samples/s", flush=True)
