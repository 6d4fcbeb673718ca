"""The loss-curve report of bench/torch/run.py --curve (bench/torch/curves.py) and the digits task
it trains (bench/torch/models.py): the figures docs/benchmarks.md quotes come from these."""
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "torch"
sys.path.insert(0, str(BENCH))
import curves  # noqa: E402


def falling(steps, step_s, start=2.0, rate=0.9):
    """A curve whose loss falls geometrically, one step every step_s seconds."""
    return [(round((i + 1) * step_s, 6), start * rate ** i) for i in range(steps)]


def test_the_moving_average_takes_the_window_it_is_given():
    curve = [(i, float(i)) for i in range(1, 7)]
    assert curves.smooth(curve, 2)[-1] == (6, 5.5)
    assert curves.smooth(curve, 3)[-1] == (6, 5.0)
    assert curves.smooth(curve, 3)[0] == (1, 1.0)  # fewer points at the start


def test_a_fixed_target_times_every_configuration_to_the_same_loss():
    slow, fast = falling(60, 0.2), falling(60, 0.1)
    lines = curves.report({"bsp": slow, "osp": fast}, "bsp", global_batch=32, window=1, target=0.1)
    assert "target: loss 0.1000" in lines[0]
    bsp, osp = lines[2].split(), lines[3].split()
    step = next(i for i, (_, loss) in enumerate(slow) if loss <= 0.1)
    assert int(bsp[3]) == (step + 1) * 32 and int(osp[3]) == (step + 1) * 32  # the same samples
    assert float(osp[4]) == pytest.approx(0.5)  # in half the time


def test_the_accuracy_column_shows_each_configurations_own_figure():
    lines = curves.report({"bsp": falling(30, 0.2), "osp": falling(30, 0.1)}, "bsp", 8,
                          accuracy={"bsp": 0.9861, "osp": 0.9916})
    assert lines[2].split()[-1] == "98.61" and lines[3].split()[-1] == "99.16"


def test_a_target_the_reference_never_reaches_is_said_not_divided_by():
    lines = curves.report({"bsp": falling(10, 0.2)}, "bsp", 8, target=1e-9)
    assert lines == ["  target: loss 0.0000 (mean of 10 steps), which bsp did not reach"]


# In a process of its own, as the suite's other torch checks run: torch.optim imports triton, which
# aborts the process where TensorFlow was imported first (this suite's process).
DIGITS_CHECK = """
import sys
import torch
sys.path.insert(0, sys.argv[1])
import models
task = models.build("digits")
x, y = task.batch(16, torch.Generator().manual_seed(0))
assert x.shape == (16, 1, 8, 8) and y.shape == (16,) and 0 <= int(y.min()) and int(y.max()) <= 9
untrained = task.accuracy(task.model)
assert 0.0 <= untrained <= 0.3, untrained  # ten classes: about one in ten right before training
optimizer = torch.optim.SGD(task.model.parameters(), lr=0.05, momentum=0.9)
g = torch.Generator().manual_seed(1)
for _ in range(150):
    x, y = task.batch(32, g)
    optimizer.zero_grad()
    task.loss(task.model(x), y).backward()
    optimizer.step()
trained = task.accuracy(task.model)
assert trained > 0.8, trained
assert task.model.training  # scoring leaves the model as it found it
print("digits ok", untrained, trained)
"""


def test_the_digits_task_draws_real_digits_and_scores_the_held_out_split():
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed")
    done = subprocess.run([sys.executable, "-c", DIGITS_CHECK, str(BENCH)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0 and "digits ok" in done.stdout, done.stdout + done.stderr
