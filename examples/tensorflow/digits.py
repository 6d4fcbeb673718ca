"""What the two TensorFlow examples share: the digits data, the model, the options, the batches.

Each worker takes its share of every global batch: all workers shuffle with the
same seed, cut the same global batches and keep their own slice of each, so N
workers averaging their gradients train like one process on the whole batch.
"""
import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402


def parse_args(description):
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--epochs", type=int, default=15)
    p.add_argument("--batch-size", type=int, default=64, help="global batch size (split across workers)")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--seed", type=int, default=0, help="data split and shuffling (the same on every worker)")
    p.add_argument("--init-seed", type=int, default=None,
                   help="seed of the model's initial weights (default: --seed plus the rank, so that workers "
                        "start apart and the broadcast must make them equal)")
    p.add_argument("--fp16", action="store_true", help="push_pull gradients as float16")
    p.add_argument("--single", action="store_true", help="train in this process alone, without Syncline")
    p.add_argument("--save", default=None, help="write the final weights here as .npz ({rank} is replaced)")
    return p


def load_data(seed):
    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32)[..., None]
    y = digits.target.astype(np.int64)
    order = np.random.RandomState(seed).permutation(len(y))
    x, y = x[order], y[order]
    held_out = len(y) // 5
    return (x[held_out:], y[held_out:]), (x[:held_out], y[:held_out])


def make_model():
    return keras.Sequential([
        keras.Input((8, 8, 1)),
        keras.layers.Conv2D(16, 3, padding="same", activation="relu"),
        keras.layers.Conv2D(32, 3, padding="same", activation="relu"),
        keras.layers.MaxPooling2D(2),
        keras.layers.Flatten(),
        keras.layers.Dense(64, activation="relu"),
        keras.layers.Dense(10),
    ])


def worker_batches(x, y, global_batch, rank, size, seed):
    """This worker's slice of each global batch, reshuffled every epoch the same way on every worker."""
    if global_batch % size:
        raise SystemExit(f"--batch-size {global_batch} does not split evenly over {size} workers")
    per_worker = global_batch // size
    return (tf.data.Dataset.from_tensor_slices((x, y))
            .shuffle(len(y), seed=seed, reshuffle_each_iteration=True)
            .batch(global_batch, drop_remainder=True)
            .map(lambda bx, by: (bx[rank * per_worker:(rank + 1) * per_worker],
                                 by[rank * per_worker:(rank + 1) * per_worker])))


def setup(args, rank):
    """The data split, and the model and optimizer as this worker starts them: weights seeded by
    --init-seed, else by --seed plus the rank (so that only a broadcast makes workers equal)."""
    train, test = load_data(args.seed)
    keras.utils.set_random_seed(args.init_seed if args.init_seed is not None else args.seed + rank)
    model = make_model()
    return train, test, model, keras.optimizers.SGD(learning_rate=args.lr, momentum=args.momentum)


def report_and_save(model, test, args, rank):
    """Prints this worker's accuracy on the held-out digits and writes its weights if --save."""
    test_x, test_y = test
    accuracy = float(np.mean(np.argmax(model.predict(test_x, verbose=0), axis=1) == test_y))
    print(f"rank {rank}: final accuracy {accuracy:.4f} on {len(test_y)} held-out digits", flush=True)
    if args.save:
        np.savez(args.save.replace("{rank}", str(rank)), *model.get_weights())
