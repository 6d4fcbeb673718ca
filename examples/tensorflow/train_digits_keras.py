"""Trains a small Keras CNN on scikit-learn's handwritten digits with model.fit, through Syncline.

    pslaunch --workers 2 --servers 1 -- python examples/tensorflow/train_digits_keras.py

Written as a Horovod or BytePS Keras script would be; only the import names
Syncline. DistributedOptimizer averages the gradients of every step through
the servers, BroadcastGlobalVariablesCallback starts every worker from rank 0's
weights, MetricAverageCallback reports the loss and accuracy averaged over the
workers. Rank 0 prints them every epoch; every worker prints its final
accuracy on held-out digits. `--single` trains the same model in one process,
over the same global batches, without Syncline.
"""
import time

import keras

from digits import parse_args, report_and_save, setup, worker_batches


class EpochPrinter(keras.callbacks.Callback):
    def __init__(self, epochs):
        super().__init__()
        self.epochs = epochs

    def on_epoch_begin(self, epoch, logs=None):
        self.start = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        print(f"epoch {epoch + 1}/{self.epochs}: loss {logs['loss']:.4f} accuracy {logs['accuracy']:.4f} "
              f"({time.perf_counter() - self.start:.2f} s)", flush=True)


def main():
    p = parse_args(__doc__.splitlines()[0])
    p.add_argument("--warmup-epochs", type=int, default=0,
                   help="ramp the learning rate up from lr/size over this many epochs (LearningRateWarmupCallback)")
    args = p.parse_args()
    if args.single:
        rank, size, bps = 0, 1, None
    else:
        import syncline.tensorflow.keras as bps  # a Horovod script has: import horovod.tensorflow.keras as hvd

        bps.init()
        rank, size = bps.rank(), bps.size()
    (train_x, train_y), test, model, optimizer = setup(args, rank)
    callbacks = []
    if bps is not None:
        compression = bps.Compression.fp16 if args.fp16 else bps.Compression.none
        optimizer = bps.DistributedOptimizer(optimizer, compression=compression)
        callbacks += [bps.BroadcastGlobalVariablesCallback(root_rank=0), bps.MetricAverageCallback()]
        if args.warmup_epochs:
            callbacks.append(bps.LearningRateWarmupCallback(args.lr, warmup_epochs=args.warmup_epochs,
                                                            momentum_correction=False))
    if rank == 0:
        callbacks.append(EpochPrinter(args.epochs))
        print(f"training on {len(train_y)} digits, testing on {len(test[1])}; {size} worker(s), "
              f"global batch {args.batch_size}, {args.epochs} epochs (model.fit)", flush=True)
    # jit_compile=False: Syncline's collectives run outside the compiled graph (Keras
    # already picks that on a machine without a GPU).
    model.compile(optimizer=optimizer, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"], jit_compile=False)
    data = worker_batches(train_x, train_y, args.batch_size, rank, size, args.seed)
    model.fit(data, epochs=args.epochs, callbacks=callbacks, shuffle=False, verbose=0)  # data: shuffled above
    if bps is not None:
        # In osp and ssp modes (SYNCLINE_SYNC_MODE) every worker takes the global model; else a no-op.
        optimizer.average_models()
    report_and_save(model, test, args, rank)
    if bps is not None:
        bps.shutdown()


if __name__ == "__main__":
    main()
