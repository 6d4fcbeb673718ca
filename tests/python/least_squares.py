"""The task on which the shims' checks train every compressor (compression_checks.py, tf_checks.py):
least squares, 256 inputs to 8 outputs (2048 weights in one tensor, compressed where the job sets
SYNCLINE_MIN_COMPRESS_BYTES=0), a fresh batch per worker and step, the same true weights for all."""
import numpy as np

INPUTS, OUTPUTS, BATCH = 256, 8, 512
STEPS = 60
# The loss's curvature is 1/4, so exact gradient descent contracts the error by 0.95 a step. Not
# more: random-k sends a value about once every 1/ratio steps, with all its accumulated gradient
# (error feedback), so its step is 1/ratio times as long, and at 1/ratio x 0.25 x rate > 2 it
# overshoots and diverges (randomk:0.1 did at a rate of 1).
LEARNING_RATE = 0.2
# Every form the shims name (least_squares.compression reaches each one's member). random-k at 0.3:
# at 0.1 a value waits for the worker's draw and then the server's, and 60 steps took the loss to
# only 0.21 of its start, where every other form ends below 1/200 of it.
FORMS = ("fp16", "bf16", "int8", "onebit", "topk:0.1", "randomk:0.3")
TRUE_WEIGHTS = np.random.RandomState(7).standard_normal((OUTPUTS, INPUTS)).astype(np.float32)


def compression(forms, name):
    """The member of a shim's Compression class that `name` (one of FORMS) stands for."""
    kind, _, ratio = name.partition(":")
    return getattr(forms, kind)(float(ratio)) if ratio else getattr(forms, kind)


def batch(rank, step):
    """(inputs, targets) of one worker's step."""
    x = np.random.RandomState(1000 * step + rank).standard_normal((BATCH, INPUTS)).astype(np.float32)
    return x, x @ TRUE_WEIGHTS.T


def loss(weights):
    """The expected squared error per output of `weights` (OUTPUTS x INPUTS) over all inputs."""
    return float(np.sum((weights - TRUE_WEIGHTS) ** 2) / OUTPUTS)


def check_trained(name, losses, weights, weights_of_rank0):
    """The loss fell below a hundredth of its start (every form ends below 1/200 of it; a gradient
    half as large would end near 1/20), and this worker holds rank 0's weights, bit for bit (every
    worker decodes the same sums)."""
    print(f"{name}: loss {losses[0]:.3f} -> {losses[-1]:.3f} in {len(losses) - 1} steps", flush=True)
    assert losses[-1] < 0.01 * losses[0], f"{name} did not train: loss {losses[0]:.3f} -> {losses[-1]:.3f}"
    assert np.array_equal(weights, weights_of_rank0), f"{name}: the workers' weights differ"


def check_compressed(name, first_weights, workers):
    """The weights after the first step (from zeros) are not those of the exact averaged gradient:
    the gradient travelled compressed. Relative difference: fp32 rounding about 1e-7, fp16's cast
    about 3e-4, the others more."""
    exact = np.zeros((OUTPUTS, INPUTS))
    for rank in range(workers):  # the gradient of the mean squared error at zero: -2 Y^T X / (BATCH OUTPUTS)
        x, y = batch(rank, 0)
        exact += LEARNING_RATE * 2.0 * (y.astype(np.float64).T @ x) / (BATCH * OUTPUTS) / workers
    difference = np.linalg.norm(first_weights - exact) / np.linalg.norm(exact)
    assert difference > 1e-5, f"{name}: the first step is the uncompressed one (relative difference {difference:.1e})"
