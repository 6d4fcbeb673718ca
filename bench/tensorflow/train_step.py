"""One worker of the end-to-end TensorFlow benchmark: timed training steps of a Keras model.

  --mode compute   this process alone, no communication (the floor)
  --mode syncline  syncline.tensorflow.keras's DistributedOptimizer (launched by pslaunch)
  --mode mwms      tf.distribute.MultiWorkerMirroredStrategy (TF_CONFIG in the environment)

The step is a tf.function: forward, tape, optimizer.apply_gradients (Keras 3 SGD
with momentum), as model.fit's train step does. Prints one JSON line like
bench/torch/train_step.py: the median step time over the timed steps and the
samples per second of the whole job (global batch / step time).
"""
import contextlib
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import step_timing  # noqa: E402

# Layer width and depth of the MLPs, as bench/torch/models.py.
MLPS = {"mlp5m": (1024, 5), "mlp25m": (2048, 6), "mlp100m": (4096, 6)}


def build_model(name):
    width, depth = MLPS[name]
    layers = [keras.Input((width,))]
    for _ in range(depth - 1):
        layers.append(keras.layers.Dense(width, activation="relu"))
    layers.append(keras.layers.Dense(width))
    return keras.Sequential(layers)


def main():
    a = step_timing.parse_args(MLPS, "mwms")
    if a.compute_ms or a.straggler != "none":
        raise SystemExit("--compute-ms and --straggler are measured with the torch workers only")
    tf.config.threading.set_intra_op_parallelism_threads(a.threads)
    tf.config.threading.set_inter_op_parallelism_threads(max(a.threads, 2))  # MWMS's collectives need a second
    rank, size, strategy = 0, 1, None
    if a.mode == "mwms":
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        rank, size = strategy.cluster_resolver.task_id, strategy.num_replicas_in_sync
    elif a.mode == "syncline":
        import syncline.tensorflow.keras as bps
        bps.init()
        rank, size = bps.rank(), bps.size()
    keras.utils.set_random_seed(0)
    scope = strategy.scope() if strategy else contextlib.nullcontext()
    with scope:
        model = build_model(a.model)
        optimizer = keras.optimizers.SGD(learning_rate=0.001, momentum=0.9)
        if a.mode == "syncline":
            optimizer = bps.DistributedOptimizer(optimizer)
        optimizer.build(model.trainable_variables)
    if a.mode == "syncline":
        bps.broadcast_variables(model.variables, root_rank=0)
    width = MLPS[a.model][0]
    global_batch = a.batch * size

    def step(x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.square(model(x, training=True) - y)) / global_batch
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    if strategy:
        train_step = tf.function(lambda x, y: strategy.run(step, args=(x, y)))
    else:
        train_step = tf.function(step)
    data = np.random.RandomState(rank)

    def next_batch():
        return (tf.constant(data.rand(a.batch, width).astype(np.float32)),
                tf.constant(data.rand(a.batch, width).astype(np.float32)))

    def timed_step(x, y):
        loss = train_step(x, y)
        if strategy:
            loss = strategy.experimental_local_results(loss)[0]
        float(loss)  # the step's end: its result is on the host

    times = step_timing.time_steps(a, rank, next_batch, timed_step)
    step_timing.report(a, rank, size, sum(int(np.prod(v.shape)) for v in model.trainable_variables), times)
    if a.mode == "syncline":
        bps.shutdown()


if __name__ == "__main__":
    main()
