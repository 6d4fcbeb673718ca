"""Checks that run inside every worker of a job: python tf_checks.py CHECK (as torch_checks.py)."""
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import syncline.tensorflow as bps  # noqa: E402
from expect import expect_error  # noqa: E402


def exact_sums():
    """push_pull returns exact sums and averages per dtype, eagerly and inside tf.function."""
    rank, size = bps.rank(), bps.size()
    base = np.arange(1000) % 8  # small integers: sums exact even in bfloat16
    total = sum(base * (r + 1) for r in range(size)).astype(np.float64)

    @tf.function
    def traced(x, average):
        return bps.push_pull(x, average=average, name=f"traced.{x.dtype.name}.{average}")

    for dtype in (tf.float32, tf.float64, tf.float16, tf.bfloat16):
        mine = tf.constant(base * (rank + 1), dtype=dtype)
        got = bps.push_pull(mine, average=False, name=f"eager.{dtype.name}")
        assert np.array_equal(tf.cast(got, tf.float64).numpy(), total), (dtype, got[:8])
        for _ in range(2):  # a traced function runs its push_pull each call
            got = traced(tf.constant(base * (rank + 1) * size, dtype=dtype), True)
            assert np.array_equal(tf.cast(got, tf.float64).numpy(), total), (dtype, "traced average")
    values = tf.linspace(-3.0, 3.0, 5000) * (rank + 1)
    expected = sum(np.linspace(-3, 3, 5000) * (r + 1) for r in range(size)) / size
    got = bps.push_pull(values, average=True, name="fp16", compression=bps.Compression.fp16)
    assert got.dtype == tf.float32 and np.allclose(got.numpy(), expected, rtol=2e-3, atol=2e-3)
    # Differentiable: the gradient of a summed tensor is summed too.
    x = tf.Variable(tf.ones(10))
    with tf.GradientTape() as tape:
        y = bps.push_pull(x, average=False, name="differentiable") * (rank + 1)
    grad = tape.gradient(y, x)
    assert np.array_equal(grad.numpy(), np.full(10, float(sum(range(1, size + 1)))))


def tape_and_broadcast():
    """broadcast_variables makes differently seeded workers equal; DistributedGradientTape averages."""
    rank, size = bps.rank(), bps.size()
    tf.random.set_seed(10 + rank)
    w = tf.Variable(tf.random.normal((5, 3)))
    step = tf.Variable(rank * 7, dtype=tf.int64)  # an integer variable travels as bytes
    bps.broadcast_variables([w, step], root_rank=0)
    root = bps.broadcast(w, root_rank=1, name="check.root1")  # every worker now holds root 0's value
    assert np.array_equal(root.numpy(), w.numpy()) and int(step.numpy()) == 0

    @tf.function
    def train_step(x):
        with bps.DistributedGradientTape(tf.GradientTape()) as tape:
            loss = tf.reduce_sum(tf.matmul(x, w))
        grad = tape.gradient(loss, [w])[0]
        w.assign_sub(0.1 * grad)
        return grad

    x = tf.fill((2, 5), float(rank + 1))
    grad = train_step(x)
    mean = sum(2.0 * (r + 1) for r in range(size)) / size  # d(sum(x @ w))/dw = column sums of x
    assert np.allclose(grad.numpy(), np.full((5, 3), mean)), grad
    values = bps.broadcast(w, root_rank=0, name="check.after")
    assert np.array_equal(values.numpy(), w.numpy()), "workers differ after a step"

    @tf.function
    def rebroadcast():
        bps.broadcast_variables([w], root_rank=1)
    w.assign(w + float(rank))
    rebroadcast()
    assert np.array_equal(bps.broadcast(w, root_rank=0, name="check.graph").numpy(), w.numpy())


def errors():
    """Bad calls raise clear errors."""
    expect_error(TypeError, lambda: bps.push_pull(tf.ones(3, dtype=tf.int32)), ["int32", "float32", "bfloat16"],
                 "an int32 push_pull was accepted")
    bps.push_pull(tf.ones(4), name="shape")
    expect_error((ValueError, tf.errors.UnknownError), lambda: bps.push_pull(tf.ones(5), name="shape"),
                 ["'shape'", "[4]"], "a name reused with another shape was accepted")


CHECKS = {f.__name__: f for f in (exact_sums, tape_and_broadcast, errors)}

if __name__ == "__main__":
    check = CHECKS[sys.argv[1]]
    bps.init()
    check()
    print(f"{check.__name__} ok", flush=True)
    bps.shutdown()
