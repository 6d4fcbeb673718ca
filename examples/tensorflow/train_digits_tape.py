"""Trains the digits CNN with a custom TensorFlow training loop and DistributedGradientTape.

    pslaunch --workers 2 --servers 1 -- python examples/tensorflow/train_digits_tape.py

Written as a Horovod or BytePS TF2 script would be: the train step is a
tf.function whose tape is wrapped in DistributedGradientTape, so the
gradients are averaged through the servers, each sent as soon as backward
computes it. Before training, broadcast_variables gives every worker rank
0's weights and optimizer state. Rank 0 prints the loss of every epoch;
every worker prints its final accuracy. `--single` trains without Syncline.
"""
import time

import keras
import tensorflow as tf

from digits import parse_args, report_and_save, setup, worker_batches


def main():
    args = parse_args(__doc__.splitlines()[0]).parse_args()
    if args.single:
        rank, size, bps = 0, 1, None
    else:
        import syncline.tensorflow as bps  # a Horovod script has: import horovod.tensorflow as hvd

        bps.init()
        rank, size = bps.rank(), bps.size()
    (train_x, train_y), test, model, optimizer = setup(args, rank)
    optimizer.build(model.trainable_variables)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    if bps is not None:
        compression = bps.Compression.fp16 if args.fp16 else bps.Compression.none
        bps.broadcast_variables(model.variables + optimizer.variables, root_rank=0)

    @tf.function
    def train_step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        if bps is not None:
            tape = bps.DistributedGradientTape(tape, compression=compression)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    if rank == 0:
        print(f"training on {len(train_y)} digits, testing on {len(test[1])}; {size} worker(s), "
              f"global batch {args.batch_size}, {args.epochs} epochs (custom loop)", flush=True)
    data = worker_batches(train_x, train_y, args.batch_size, rank, size, args.seed)
    for epoch in range(1, args.epochs + 1):
        start = time.perf_counter()
        losses = [float(train_step(x, y)) for x, y in data]
        if rank == 0:
            print(f"epoch {epoch}/{args.epochs}: loss {sum(losses) / len(losses):.4f} "
                  f"({time.perf_counter() - start:.2f} s)", flush=True)
    report_and_save(model, test, args, rank)
    if bps is not None:
        bps.shutdown()


if __name__ == "__main__":
    main()
