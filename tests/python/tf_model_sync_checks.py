"""Checks of osp and ssp modes through syncline.tensorflow's Keras DistributedOptimizer that run inside
every worker of a job: python tf_model_sync_checks.py CHECK (as osp_checks.py and ssp_checks.py do for
torch).

The job runs with SYNCLINE_SYNC_MODE=osp or ssp. As in osp_checks.py, the models
are linear in their parameters with constant gradients (loss = sum(w * c)), so
every value stays a dyadic rational and the averaged model must equal BSP's bit
for bit.
"""
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import syncline.tensorflow.keras as bps  # noqa: E402
from expect import expect_error, run_check  # noqa: E402

LR = 0.5
START = np.array([1.0, 2.0, -3.0, 0.5], np.float32)


def constant_gradient(rank):
    """This worker's gradient: the same every step, different on every worker."""
    return np.array([1.0, -2.0, 0.25, 4.0], np.float32) * (rank + 1)


MODE = os.environ["SYNCLINE_SYNC_MODE"]


def exchanges(optimizer):
    """How many times the optimizer's variables went to the servers: synchronizations in osp, rounds in ssp."""
    sync = optimizer._syncline_model_sync
    return sync.synchronizations if MODE == "osp" else sync.rounds


def bsp_result(steps):
    """Where BSP takes START in `steps` steps: each step subtracts LR x the workers' mean gradient."""
    mean = sum(constant_gradient(r) for r in range(bps.size())) / bps.size()
    return START - steps * LR * mean


def merged_model_equals_bsp():
    """Steps traced into a tf.function and then eager steps, the synchronizations of the job's period
    in between: after average_models() every worker holds BSP's parameters exactly, whichever worker
    started where (worker 0's start wins)."""
    import keras

    w = keras.Variable(START if bps.rank() == 0 else np.zeros(4, np.float32), name="w")
    c = tf.constant(constant_gradient(bps.rank()))
    optimizer = bps.DistributedOptimizer(keras.optimizers.SGD(LR))

    def step():
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(w * c)
        optimizer.apply_gradients(zip(tape.gradient(loss, [w]), [w]))

    traced = tf.function(step)
    for _ in range(5):
        traced()
    for _ in range(2):
        step()
    assert exchanges(optimizer) >= 1
    optimizer.average_models()
    assert np.array_equal(w.numpy(), bsp_result(7)), (w.numpy(), bsp_result(7))
    # Gradients are never summed in osp or ssp: a push_pull is refused, saying why.
    expect_error(bps.SynclineError, lambda: bps.push_pull(tf.ones(3), name="raw"), [f"{MODE} mode"],
                 f"a push_pull ran in {MODE} mode")


def fit_trains_as_local():
    """model.fit (one worker; in osp, period 2) moves the parameters as the plain optimizer does (up to
    the rounding of the graph's and the merge's arithmetic)."""
    import keras

    x = np.round(np.random.default_rng(3).normal(size=(8, 4)) * 8) / 8
    y = np.round(np.random.default_rng(4).normal(size=(8, 1)) * 8) / 8

    def model():
        keras.utils.set_random_seed(5)
        m = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
        for v in m.trainable_variables:  # dyadic: the merge's subtractions and additions are exact
            v.assign(np.round(v.numpy() * 64) / 64)
        return m

    local, distributed = model(), model()
    local.compile(optimizer=keras.optimizers.SGD(0.25), loss="mse", jit_compile=False)
    optimizer = bps.DistributedOptimizer(keras.optimizers.SGD(0.25))
    distributed.compile(optimizer=optimizer, loss="mse", jit_compile=False)
    for m in (local, distributed):
        m.fit(x, y, batch_size=8, epochs=6, verbose=0, shuffle=False)
    optimizer.average_models()
    # osp: 3 periods and average_models(); ssp: 6 steps and average_models()
    assert exchanges(optimizer) == (4 if MODE == "osp" else 7), exchanges(optimizer)
    for a, b in zip(local.trainable_variables, distributed.trainable_variables):
        assert np.allclose(a.numpy(), b.numpy(), rtol=0, atol=1e-6), (a.path, a.numpy(), b.numpy())


def traced_steps_equal_eager_steps():
    """Two workers, gradients that depend on the weights, weight decay, a scalar variable, and three
    steps in one tf.function: the same model as eager steps of the same schedule. The update must
    read what the start's broadcast and each merge wrote, and the next step's forward what the
    merge after the update wrote, inside one function as across calls."""
    import keras

    rank = bps.rank()
    x = tf.constant(np.array([0.5, -1.0, 2.0, 0.25], np.float32) * (rank + 1))

    def trainer():
        w = keras.Variable(np.full(4, 0.5 + rank, np.float32), name="w")  # worker 0's start wins
        b = keras.Variable(np.float32(rank - 1.0), name="b")
        optimizer = bps.DistributedOptimizer(keras.optimizers.SGD(0.05, weight_decay=0.1))

        def step():
            with tf.GradientTape() as tape:
                loss = tf.square(tf.reduce_sum(w * x) + b - 1.0)
            optimizer.apply_gradients(zip(tape.gradient(loss, [w, b]), [w, b]))

        return w, b, optimizer, step

    w_eager, b_eager, eager_optimizer, eager_step = trainer()
    for _ in range(6):
        eager_step()
    w_traced, b_traced, traced_optimizer, traced_step = trainer()

    @tf.function
    def three_steps():
        for _ in range(3):
            traced_step()

    three_steps()
    three_steps()
    for optimizer in (eager_optimizer, traced_optimizer):
        assert exchanges(optimizer) == 3, exchanges(optimizer)
        optimizer.average_models()
    for eager, traced in ((w_eager, w_traced), (b_eager, b_traced)):
        assert np.allclose(eager.numpy(), traced.numpy(), rtol=1e-6, atol=1e-7), (eager.numpy(), traced.numpy())
    assert not np.array_equal(w_eager.numpy(), np.full(4, 0.5, np.float32))  # it trained
    # The variables are fixed at the first update: another set is refused, saying why.
    expect_error(bps.SynclineError, lambda: traced_optimizer.apply([tf.ones(4)], [w_eager]),
                 ["other variables", "its own DistributedOptimizer"], "an osp optimizer updated other variables")


def no_worker_reads_more_than_k_steps_ahead():
    """ssp, worker 0 a straggler (it sleeps before every call). Each worker's step adds 1 to its own
    element of a shared counter, so the variable a worker holds after its step t counts the steps of
    every worker it has seen: its own t + 1 (no update lost to the merge, eagerly or inside a
    tf.function of three steps, where each step's merge must land before the next step's update),
    never fewer than t - k + 1 of the others, and the fast workers do run ahead."""
    import keras

    k = int(os.environ["SYNCLINE_SSP_STALENESS"])
    rank, size = bps.rank(), bps.size()
    counts = keras.Variable(np.zeros(size, np.float32), name="counts")
    mine = np.zeros(size, np.float32)
    mine[rank] = -float(size)  # the step adds size to my element; the servers average it to 1
    optimizer = bps.DistributedOptimizer(keras.optimizers.SGD(1.0))

    def step():
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(counts * tf.constant(mine))
        optimizer.apply_gradients(zip(tape.gradient(loss, [counts]), [counts]))

    @tf.function
    def three_steps():
        for _ in range(3):
            step()

    steps, largest_lead = 0, 0
    for call, steps_per_call in [(step, 1)] * 8 + [(three_steps, 3)] * 4:
        if rank == 0:
            time.sleep(0.03)
        call()
        steps += steps_per_call
        seen = counts.numpy()
        assert seen[rank] == steps, (steps, seen)
        assert all(c >= steps - k for c in seen), f"step {steps}: read {seen.tolist()}, k = {k}"
        largest_lead = max(largest_lead, steps - int(seen.min()))
    lead = int(bps.broadcast(tf.constant([largest_lead], tf.float32), root_rank=1, name="lead").numpy()[0])
    if rank == 1:
        assert 0 < lead <= k, f"worker 1 ran {lead} steps ahead of the slowest (k = {k})"
    assert optimizer._syncline_model_sync.rounds == steps
    optimizer.average_models()
    assert counts.numpy().tolist() == [float(steps)] * size, counts.numpy()
    print(f"worker {rank}: the largest lead read was {largest_lead} steps", flush=True)


CHECKS = {f.__name__: f for f in (merged_model_equals_bsp, fit_trains_as_local, traced_steps_equal_eager_steps,
                                  no_worker_reads_more_than_k_steps_ahead)}

if __name__ == "__main__":
    run_check(CHECKS, bps)
