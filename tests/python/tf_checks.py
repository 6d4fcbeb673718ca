"""Checks that run inside every worker of a job: python tf_checks.py CHECK (as torch_checks.py)."""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import least_squares as ls  # noqa: E402
import syncline.tensorflow as bps  # noqa: E402
from expect import expect_error, run_check  # noqa: E402
from syncline import _session  # noqa: E402
from syncline.tensorflow import ops  # noqa: E402


def exact_sums():
    """push_pull returns exact sums and averages per dtype, eagerly (through dlpack; bfloat16, which
    dlpack does not carry, through a host copy) and inside tf.function (through the compiled op,
    which the install step must have built here), and through the fallback where there is no op."""
    assert ops.native_op() is not None, "the SynclinePushPull op was not built at install time"
    _exact_sums("op")
    _ops_of_a_list_are_not_chained()
    _unknown_shape_takes_the_fallback()
    ops._op_state[:] = [None]  # as where the op could not be built
    _exact_sums("fallback")
    _after_context_reset()


def _ops_of_a_list_are_not_chained():
    """Inside tf.function each tensor's op may start once its input exists: TensorFlow's automatic
    control dependencies would otherwise chain the ops in program order (one tensor in flight:
    issue 30). The sums stay exact."""
    rank, size = bps.rank(), bps.size()

    @tf.function
    def step(a, b, c):
        return ops.push_pull_list([a * 1.0, b * 2.0, c * 3.0], ["chain.a", "chain.b", "chain.c"], average=False)

    mine = tf.fill((1000,), float(rank + 1))
    graph = step.get_concrete_function(mine, mine, mine).graph
    pushes = [op for op in graph.get_operations() if op.type == "SynclinePushPull"]
    assert len(pushes) == 3, [op.type for op in graph.get_operations()]
    for op in pushes:
        assert not [c.name for c in op.control_inputs if c.type == "SynclinePushPull"], (op.name, op.control_inputs)
    got = step(mine, mine, mine)
    for k, out in enumerate(got, start=1):
        assert np.all(out.numpy() == k * sum(range(1, size + 1))), (k, out[:4])


def _unknown_shape_takes_the_fallback():
    """A shape unknown when traced cannot be declared then: the graph path posts that tensor through
    tf.numpy_function, declared when it runs."""
    rank, size = bps.rank(), bps.size()

    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32)])
    def step(x):
        return bps.push_pull(x, average=False, name="unknown.shape")

    graph = step.get_concrete_function().graph
    types = [op.type for op in graph.get_operations()]
    assert "SynclinePushPull" not in types and "PyFunc" in types, types
    got = step(tf.fill((700,), float(rank + 1)))
    assert got.shape == (700,) and np.all(got.numpy() == sum(range(1, size + 1))), got[:4]


def _after_context_reset():
    """An eager tensor outlives a reset of TensorFlow's eager context (TensorFlow's own tests and
    strategy set-ups reset it): its push_pull still sums, starting the new context."""
    from tensorflow.python.eager import context

    rank, size = bps.rank(), bps.size()
    mine = tf.fill((1000,), float(rank + 1))
    context._reset_context()
    got = bps.push_pull(mine, average=False, name="after.reset")
    assert np.all(got.numpy() == sum(range(1, size + 1))), got[:4]


def _exact_sums(path):
    rank, size = bps.rank(), bps.size()
    base = np.arange(1000) % 8  # small integers: sums exact even in bfloat16
    total = sum(base * (r + 1) for r in range(size)).astype(np.float64)

    @tf.function
    def traced(x, average):
        return bps.push_pull(x, average=average, name=f"{path}.traced.{x.dtype.name}.{average}")

    for dtype in (tf.float32, tf.float64, tf.float16, tf.bfloat16):
        mine = tf.constant(base * (rank + 1), dtype=dtype)
        got = bps.push_pull(mine, average=False, name=f"{path}.eager.{dtype.name}")
        assert np.array_equal(tf.cast(got, tf.float64).numpy(), total), (dtype, got[:8])
        for _ in range(2):  # a traced function runs its push_pull each call
            got = traced(tf.constant(base * (rank + 1) * size, dtype=dtype), True)
            assert np.array_equal(tf.cast(got, tf.float64).numpy(), total), (dtype, "traced average")
    # Eagerly, a float tensor goes through dlpack (not the op) into one of the session's pooled
    # buffers, which the result then holds; a result summed again gets another buffer and keeps
    # its own values.
    session = _session.current()
    mine = tf.constant(base * (rank + 1), dtype=tf.float32)
    got = ops._push_pull_eager(session, [mine], [f"{path}.direct"], False, [0])[0]
    assert session.outputs.holds(np.from_dlpack(got).ctypes.data), "the eager sum is not in a pooled buffer"
    again = bps.push_pull(got, average=False, name=f"{path}.again")
    assert not np.shares_memory(np.from_dlpack(again), np.from_dlpack(got))
    assert np.array_equal(got.numpy(), total) and np.array_equal(again.numpy(), total * size)
    # Sums come back in buffers that are reused once TensorFlow lets go of them, never before:
    # results still held keep their values.
    n, total_weight = 300000, sum(range(1, size + 1))
    held = [bps.push_pull(tf.fill((n,), float(k * (rank + 1))), average=False, name="reused") for k in range(1, 7)]
    for k, got in enumerate(held, start=1):
        assert np.all(got.numpy() == k * total_weight), (k, got[:4])
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
    _horovod_names(rank, size)


def _horovod_names(rank, size):
    """horovod.tensorflow's allreduce: its ops and scale factors, eagerly and in tf.function; Adasum and op=Sum
    where gradients are averaged are refused, named."""
    mine = tf.range(6, dtype=tf.float32) * float(rank + 1)
    total = np.arange(6, dtype=np.float32) * sum(r + 1 for r in range(size))
    assert np.array_equal(bps.allreduce(mine * size, name="hvd.avg").numpy(), total), "allreduce averages by default"
    assert np.array_equal(bps.allreduce(mine, op=bps.Sum, name="hvd.sum").numpy(), total)
    in_graph = tf.function(lambda x: bps.allreduce(x, op=bps.Sum, prescale_factor=4.0, postscale_factor=0.5,
                                                   name="hvd.scaled"))
    assert np.array_equal(in_graph(mine).numpy(), total * 2)
    # The factors on either side of the sum: float16 values whose sum overflows float16 average exactly.
    halves = tf.fill((4,), tf.constant(40960.0, tf.float16))
    got = bps.allreduce(halves, prescale_factor=0.25, postscale_factor=4.0, name="hvd.fp16.factors")
    assert np.array_equal(got.numpy(), halves.numpy()), got
    # Integer tensors sum exactly (int64 wrapping on overflow) eagerly and in a tf.function; their average is
    # rounded toward zero in their dtype, as horovod.tensorflow's.
    longs = tf.constant([2**62 + rank, -(2**40) * (rank + 1), -1], tf.int64)
    wrapped = (2**62 * size + size * (size - 1) // 2 + 2**63) % 2**64 - 2**63
    expected = [wrapped, -(2**40) * sum(r + 1 for r in range(size)), -size]
    got = bps.allreduce(longs, op=bps.Sum, name="hvd.int64")
    assert got.dtype == tf.int64 and got.numpy().tolist() == expected, got
    traced = tf.function(lambda x: bps.allreduce(x, op=bps.Sum, name="hvd.int64.traced"))
    assert traced(longs).numpy().tolist() == expected
    mean = bps.allreduce(tf.constant([rank, 1, -int(rank == 0)], tf.int32), name="hvd.int32.mean")
    assert mean.dtype == tf.int32 and mean.numpy().tolist() == [(size - 1) // 2, 1, 0], mean
    expect_error(ValueError, lambda: bps.allreduce(longs, op=bps.Sum, postscale_factor=2.0), ["int64", "exactly"],
                 "a scale factor on an integer tensor was accepted")
    expect_error(TypeError, lambda: bps.allreduce(tf.constant([True])), ["dtype bool", "int64"],
                 "a bool tensor was allreduced")
    # Unnamed eager calls in a loop reuse one tensor per dtype and shape (a graph's keep a name each).
    def unnamed_calls(rounds):
        for i in range(rounds):
            got = bps.allreduce(tf.constant([float(i + rank)] * 2), op=bps.Sum).numpy()
            assert np.array_equal(got, [i * size + size * (size - 1) / 2] * 2), (i, got)
            assert bps.broadcast(tf.constant([i + rank]), root_rank=size - 1).numpy().tolist() == [i + size - 1]
            assert bps.broadcast(tf.constant(float(i + rank)), root_rank=0).numpy() == i
        return sorted(_session.current()._declared)

    assert unnamed_calls(1) == unnamed_calls(20), "unnamed calls of the same tensors declared new ones"
    import syncline.tensorflow.keras as keras_hvd  # horovod.tensorflow.keras's order: the name second
    assert np.array_equal(keras_hvd.allreduce(mine * size, "hvd.keras").numpy(), total)
    expect_error(TypeError, lambda: bps.allreduce(mine, "hvd.misplaced"), ["average=", "name="],
                 "a name in average= was taken for True")
    expect_error(ValueError, lambda: bps.allreduce(mine, op=bps.Adasum), ["Adasum"], "op=Adasum was accepted")
    expect_error(ValueError, lambda: bps.DistributedGradientTape(tf.GradientTape(), op=bps.Sum),
                 ["DistributedGradientTape averages", "op=Sum"], "a summing tape was accepted")
    import keras
    expect_error(ValueError, lambda: bps.DistributedOptimizer(keras.optimizers.SGD(0.1), op=bps.Adasum),
                 ["Adasum"], "an Adasum optimizer was accepted")


def compressed_gradients():
    """DistributedGradientTape with Compression.onebit, eagerly and in a tf.function, and push_pull
    with it (eagerly, traced, and its gradient): the averaged gradient comes back as onebit (every
    value the same magnitude, the signs kept), the same on every worker; a float64 gradient under an explicit form is refused with the reason. The job runs with
    SYNCLINE_MIN_COMPRESS_BYTES=0."""
    rank = bps.rank()
    w = tf.Variable(tf.zeros((3000,)), name="onebit_w")
    signs = np.where(np.arange(3000) % 3 == 0, -1.0, 1.0).astype(np.float32)
    x = tf.constant(signs * (1.0 + np.arange(3000, dtype=np.float32) / 3000) * (rank + 1))

    def grad_of():
        with bps.DistributedGradientTape(tf.GradientTape(), compression=bps.Compression.onebit) as tape:
            loss = tf.reduce_sum(w * x)
        return tape.gradient(loss, [w])[0]

    for grad in (grad_of(), tf.function(grad_of)()):
        values = grad.numpy()
        assert len(np.unique(np.abs(values))) == 1, "the gradient did not come back as onebit"
        assert np.array_equal(np.sign(values), signs), "onebit lost the signs"
        same = bps.broadcast(tf.constant(values), root_rank=0, name=f"check.onebit.{len(values)}")
        assert np.array_equal(same.numpy(), values), "workers decoded different gradients"
    # push_pull takes a form per call, eagerly and traced, and its gradient travels in it too.
    mine = tf.constant(signs * (1.0 + np.arange(3000, dtype=np.float32) / 3000) * (rank + 1))
    traced = tf.function(lambda t: bps.push_pull(t, name="onebit.traced", compression=bps.Compression.onebit))
    with tf.GradientTape() as tape:
        tape.watch(mine)
        eager = bps.push_pull(mine, name="onebit.eager", compression=bps.Compression.onebit)
        loss = tf.reduce_sum(eager * mine)
    for values in (eager.numpy(), traced(mine).numpy(), tape.gradient(loss, mine).numpy()):
        assert len(np.unique(np.abs(values))) == 1, "a push_pull's compression was not applied"
        assert np.array_equal(np.sign(values), signs), "onebit lost the signs"
    w64 = tf.Variable(tf.zeros((3000,), dtype=tf.float64), name="onebit_w64")
    with bps.DistributedGradientTape(tf.GradientTape(), compression=bps.Compression.onebit) as tape:
        loss = tf.reduce_sum(w64 * 2.0)
    expect_error(bps.SynclineError, lambda: tape.gradient(loss, [w64]), ["onebit takes fp32 values, not fp64"],
                 "onebit of a float64 gradient was accepted")


def every_form_trains():
    """Each compressor trains the least-squares task of least_squares.py through
    DistributedGradientTape(compression=...), eagerly and inside tf.function (the compiled op): its
    first step is not the exact one, the loss falls below a hundredth of its start, and every worker
    ends with the same weights. The job runs with SYNCLINE_MIN_COMPRESS_BYTES=0."""
    for name in ls.FORMS:
        form = ls.compression(bps.Compression, name)
        for mode in ("eager", "traced"):
            w = tf.Variable(tf.zeros((ls.OUTPUTS, ls.INPUTS)), name=f"least_squares_{mode}_{name.replace(':', '_')}")

            def step(x, y, w=w, form=form):
                with bps.DistributedGradientTape(tf.GradientTape(), compression=form) as tape:
                    loss = tf.reduce_mean(tf.square(tf.matmul(x, w, transpose_b=True) - y))
                w.assign_sub(ls.LEARNING_RATE * tape.gradient(loss, [w])[0])

            run = tf.function(step) if mode == "traced" else step
            losses = [ls.loss(w.numpy())]
            for i in range(ls.STEPS):
                run(*(tf.constant(a) for a in ls.batch(bps.rank(), i)))
                losses.append(ls.loss(w.numpy()))
                if i == 0:
                    ls.check_compressed(f"{name} ({mode})", w.numpy(), bps.size())
            rank0 = bps.broadcast(tf.constant(w.numpy()), root_rank=0, name=f"least_squares.{mode}.{name}.rank0")
            ls.check_trained(f"{name} ({mode})", losses, w.numpy(), rank0.numpy())


def errors():
    """Bad calls raise clear errors."""
    expect_error(TypeError, lambda: bps.push_pull(tf.ones(3, dtype=tf.int32)), ["int32", "float32", "bfloat16"],
                 "an int32 push_pull was accepted")
    bps.push_pull(tf.ones(4), name="shape")
    expect_error((ValueError, tf.errors.UnknownError), lambda: bps.push_pull(tf.ones(5), name="shape"),
                 ["'shape'", "[4]"], "a name reused with another shape was accepted")
    # A function traced before shutdown and run after it fails saying so (the op holds no freed worker).
    traced = tf.function(lambda x: bps.push_pull(x, name="traced.before.shutdown"))
    assert np.array_equal(traced(tf.ones(3)).numpy(), np.ones(3))
    bps.shutdown()
    expect_error((tf.errors.FailedPreconditionError, tf.errors.UnknownError), lambda: traced(tf.ones(3)),
                 ["shut down"], "a traced push_pull ran after shutdown")


def keras_api():
    """syncline.tensorflow.keras: the optimizer wrapper, the callbacks and model.fit together."""
    import tempfile

    import keras

    import syncline.tensorflow.keras as kbps

    rank, size = kbps.rank(), kbps.size()
    mean = sum(r + 1.0 for r in range(size)) / size
    expect_error(TypeError, lambda: kbps.DistributedOptimizer(keras.optimizers.SGD(0.1), backward_passes_per_step=2),
                 ["backward_passes_per_step", "gradient_accumulation_steps"], "backward_passes_per_step was accepted")
    # A built optimizer keeps its state; a schedule Keras could not serialize is kept as it is.
    built = keras.optimizers.SGD(0.1, momentum=0.9)
    u = keras.Variable(np.zeros(2, np.float32), name="u")
    built.build([u])
    built.apply([tf.ones(2)], [u])
    momentum = [np.array(v) for v in built.variables]
    assert kbps.DistributedOptimizer(built) is built and built.iterations.numpy() == 1
    assert all(np.array_equal(a, np.array(b)) for a, b in zip(momentum, built.variables))

    class Halving(keras.optimizers.schedules.LearningRateSchedule):  # no get_config
        def __call__(self, step):
            return 0.5 ** tf.cast(step, tf.float32)

    scheduled = kbps.DistributedOptimizer(keras.optimizers.SGD(Halving()))
    z = keras.Variable(np.zeros(2, np.float32), name="z")
    for _ in range(2):
        scheduled.apply([tf.fill((2,), float(rank + 1))], [z])
    assert np.allclose(z.numpy(), -1.5 * mean), z.numpy()  # steps of lr 1 and 0.5 with the mean gradient
    # Scalars keep their shape.
    scalar = kbps.push_pull(tf.constant(float(rank + 1)), average=False, name="scalar")
    assert scalar.shape == () and float(scalar) == sum(range(1, size + 1)), scalar
    adam = kbps.DistributedOptimizer(keras.optimizers.Adam(0.01))
    assert isinstance(adam, keras.optimizers.Adam) and type(adam).__name__ == "Adam", type(adam)
    expect_error(ValueError, lambda: kbps.DistributedOptimizer(adam), ["already"], "an optimizer was wrapped twice")

    # apply() averages the gradients: SGD with lr 1 moves every worker by the mean gradient.
    v = keras.Variable(np.ones(3, np.float32), name="v")
    sgd = kbps.DistributedOptimizer(keras.optimizers.SGD(1.0))
    sgd.apply([tf.fill((3,), float(rank + 1))], [v])
    assert np.array_equal(v.numpy(), np.full(3, 1.0 - mean, np.float32)), v.numpy()
    # Keras's own gradient accumulation: two applies, one update by the average of both.
    w = keras.Variable(np.zeros(2, np.float32), name="w")
    accumulating = kbps.DistributedOptimizer(keras.optimizers.SGD(1.0, gradient_accumulation_steps=2))
    accumulating.apply([tf.fill((2,), float(rank + 1))], [w])
    assert np.array_equal(w.numpy(), np.zeros(2)), "updated before the accumulation was complete"
    accumulating.apply([tf.fill((2,), 3.0 * (rank + 1))], [w])
    assert np.array_equal(w.numpy(), np.full(2, -2.0 * mean, np.float32)), w.numpy()

    # Under XLA the collectives cannot run: said clearly, with the fix.
    @tf.function(jit_compile=True)
    def compiled(x):
        return kbps.push_pull(x, name="xla")
    expect_error(kbps.SynclineError, lambda: compiled(tf.ones(2)), ["jit_compile=False"], "push_pull ran under XLA")

    # MetricAverageCallback: every worker's logs end up holding the average.
    logs = {"loss": float(rank + 1), "accuracy": 2.0 * (rank + 1)}
    kbps.MetricAverageCallback().on_epoch_end(0, logs)
    assert logs == {"loss": mean, "accuracy": 2 * mean}, logs

    # model.fit with differently seeded workers: the broadcast makes them equal, the
    # warmup ramps the rate batch by batch, and the workers end with equal weights.
    keras.utils.set_random_seed(rank)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3), keras.layers.Dense(1)])
    model.compile(optimizer=kbps.DistributedOptimizer(keras.optimizers.SGD(0.1, momentum=0.5)), loss="mse",
                  jit_compile=False)
    rates = []

    class RecordRate(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            rates.append(float(self.model.optimizer.learning_rate.numpy()))

    x = np.random.RandomState(rank).rand(16, 4).astype(np.float32)
    history = model.fit(x, x.sum(1, keepdims=True), batch_size=4, epochs=3, verbose=0, shuffle=False,
                        callbacks=[kbps.BroadcastGlobalVariablesCallback(0), kbps.MetricAverageCallback(),
                                   kbps.LearningRateWarmupCallback(0.1, warmup_epochs=2, momentum_correction=False),
                                   RecordRate()])
    expected = [0.1 / size * ((e + b / 4) * (size - 1) / 2 + 1) if e + b / 4 <= 2 else 0.1
                for e in range(3) for b in range(4)]
    assert np.allclose(rates, expected, rtol=1e-6), (rates, expected)
    losses = history.history["loss"]
    same = kbps.broadcast(tf.constant(losses, dtype=tf.float64), root_rank=0, name="check.losses")
    assert np.array_equal(same.numpy(), losses), "the averaged losses differ between the workers"
    for i, weight in enumerate(model.variables + model.optimizer.variables):
        root = kbps.broadcast(tf.convert_to_tensor(weight), root_rank=0, name=f"check.weight.{i}")
        assert np.array_equal(root.numpy(), np.asarray(weight)), f"{weight.path} differs between the workers"
    expect_error(ValueError, lambda: kbps.broadcast_global_variables(0), ["pass the model"],
                 "broadcast_global_variables without a model was accepted in eager mode")
    kbps.broadcast_global_variables(0, model)

    # A saved model loads as a plain Keras model: the wrapper's class is named like the wrapped one.
    with tempfile.TemporaryDirectory() as directory:
        model.save(f"{directory}/model.keras")
        loaded = keras.models.load_model(f"{directory}/model.keras")
    assert type(loaded.optimizer) is keras.optimizers.SGD, type(loaded.optimizer)


def dead_peer():
    """A worker that leaves mid-job without shutting down: the other's push_pull fails, naming it."""
    bps.push_pull(tf.ones(10), name="before")
    if bps.rank() == 1:
        os._exit(0)  # gone, without telling the scheduler
    expect_error((bps.SynclineError, tf.errors.UnknownError), lambda: bps.push_pull(tf.ones(10), name="after"),
                 ["worker 1"], "a push_pull with a dead peer succeeded")
    print("dead_peer ok", flush=True)
    os._exit(0)


def gradient_sums_refused():
    """In osp and ssp modes (the job's SYNCLINE_SYNC_MODE) syncline.tensorflow refuses to sum gradients,
    saying why: the DistributedOptimizer sums model changes there."""
    mode = os.environ["SYNCLINE_SYNC_MODE"]
    expect_error(bps.SynclineError, lambda: bps.push_pull(tf.ones(3), name="raw"),
                 [f"{mode} mode", "SYNCLINE_SYNC_MODE", "DistributedOptimizer"], f"a push_pull ran in {mode} mode")
    model = tf.keras.Sequential([tf.keras.Input((2,)), tf.keras.layers.Dense(1)])
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(model(tf.ones((1, 2))))
    expect_error(bps.SynclineError, lambda: bps.DistributedGradientTape(tape).gradient(loss, model.trainable_variables),
                 [f"{mode} mode", "DistributedOptimizer"], f"a DistributedGradientTape averaged gradients in {mode} mode")
    # Metrics are averaged in every mode (in ssp as broadcasts: a push_pull there returns a running total).
    import syncline.tensorflow.keras as kbps
    for epoch in range(3):
        logs = {"loss": float(bps.rank() + 1 + epoch)}
        kbps.MetricAverageCallback().on_epoch_end(epoch, logs)
        assert logs == {"loss": (bps.size() + 1) / 2 + epoch}, (epoch, logs)


def tuner_steps():
    """With nothing set the online tuner runs here as in syncline.torch: each averaging of gradients
    ends a step (inside tf.function and eagerly), worker 0 times the steps, and its decisions reach
    every worker between the same two push_pulls, switching partitions and credit. Every step's
    average stays exact across the switches (the test reads the decisions from worker 0's log)."""
    rank, size = bps.rank(), bps.size()
    weights = tf.Variable(tf.zeros((300_000,)), name="weights")  # 1.2 MB: 5 chunks of the default 256 KiB

    def gradient(k):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(weights * float(rank + 1) * k)
        return bps.DistributedGradientTape(tape).gradient(loss, [weights])[0]

    other = tf.Variable(tf.zeros((200_000,)), name="other")

    @tf.function
    def two_tapes(k):
        """Two averagings (two steps to the tuner) in one call, the second independent of the first."""
        with tf.GradientTape() as first:
            a = tf.reduce_sum(weights * float(rank + 1) * k)
        with tf.GradientTape() as second:
            b = tf.reduce_sum(other * float(rank + 1) * 2 * k)
        return (bps.DistributedGradientTape(first).gradient(a, [weights])[0],
                bps.DistributedGradientTape(second).gradient(b, [other])[0])

    traced = tf.function(gradient)
    for k in range(1, 33):
        want = k * (size + 1) / 2  # the average of (rank + 1) * k
        if k % 4 == 2:
            g, h = two_tapes(tf.constant(float(k)))
            assert np.all(h.numpy() == 2 * want), (k, h.numpy()[:3], 2 * want)
        else:
            g = gradient(tf.constant(float(k))) if k % 4 == 0 else traced(tf.constant(float(k)))
        assert np.all(g.numpy() == want), (k, g.numpy()[:3], want)
    graph = two_tapes.get_concrete_function(tf.constant(1.0)).graph
    pushes = [op for op in graph.get_operations() if op.type == "SynclinePushPull"]
    ends = [op for op in graph.get_operations() if op.name.startswith("SynclineStepEnd")]
    assert len(pushes) == 2 and len(ends) == 2, [op.type for op in graph.get_operations()]
    assert any(c in ends for c in pushes[1].control_inputs), "the second averaging must wait for the first's step end"


CHECKS = {f.__name__: f for f in (exact_sums, tape_and_broadcast, compressed_gradients, every_form_trains, errors,
                                  keras_api, dead_peer, gradient_sums_refused, tuner_steps)}

if __name__ == "__main__":
    run_check(CHECKS, bps)
