"""Models of the end-to-end PyTorch benchmark, by name.

mlp5m / mlp25m / mlp100m: stacks of square Linear layers with about 5M, 25M
and 100M parameters (the gradient volume is what matters for communication).
resnet18: ResNet-18 (basic blocks 2-2-2-2, 11.7M parameters), laid out as
torchvision's; defined here because the torchvision wheel of the newest torch
is not always on PyPI when torch is.
digits: examples/torch/train_digits.py's CNN (38K parameters) on scikit-learn's
handwritten digits, batches drawn from its training split; a real task, whose
accuracy on the held-out split is the figure.

build() gives a Task; its accuracy(model) is the fraction right on a held-out set
(the digits' test split, or for a learnable MLP 4096 inputs of the teacher), None
where the task has none.
"""
import sys
from pathlib import Path
from typing import Callable, NamedTuple, Optional

import torch
import torch.nn as nn

MLPS = {"mlp5m": (1024, 5), "mlp25m": (2048, 6), "mlp100m": (4096, 6)}
NAMES = [*MLPS, "resnet18", "digits"]
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "torch"


class Task(NamedTuple):
    model: nn.Module
    batch: Callable  # (batch size, torch.Generator) -> (inputs, targets)
    loss: Callable
    accuracy: Optional[Callable] = None  # model -> fraction of a held-out set classified right


def _fraction_right(model, inputs, targets):
    was_training = model.training
    model.eval()
    with torch.no_grad():
        right = (model(inputs).argmax(1) == targets).float().mean().item()
    model.train(was_training)
    return right


class _Basic(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = nn.Sequential()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(y)) + self.shortcut(x))


class ResNet18(nn.Module):
    def __init__(self, classes=1000):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
                                  nn.MaxPool2d(3, 2, 1))
        blocks, cin = [], 64
        for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            blocks += [_Basic(cin, cout, stride), _Basic(cout, cout, 1)]
            cin = cout
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(512, classes)

    def forward(self, x):
        x = self.blocks(self.stem(x))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


# The learnable task's classes: the label of an input is the largest of these
# many fixed random projections of it (a teacher every worker shares).
TEACHER_CLASSES = 16


def build(name, learnable=False):
    """The Task of model `name`. `learnable` (the MLPs): labels from a fixed random linear teacher
    instead of at random, so that the loss can fall (and accuracy can be measured)."""
    if name in MLPS:
        width, depth = MLPS[name]
        layers = []
        for _ in range(depth - 1):
            layers += [nn.Linear(width, width), nn.ReLU()]
        layers.append(nn.Linear(width, width))
        model = nn.Sequential(*layers)
        teacher = torch.randn(width, TEACHER_CLASSES, generator=torch.Generator().manual_seed(1234))

        def batch(n, g):
            x = torch.randn(n, width, generator=g)
            return x, (x @ teacher).argmax(1) if learnable else torch.randint(0, width, (n,), generator=g)
        if not learnable:
            return Task(model, batch, nn.functional.cross_entropy)
        held_out = torch.randn(4096, width, generator=torch.Generator().manual_seed(4321))
        labels = (held_out @ teacher).argmax(1)
        return Task(model, batch, nn.functional.cross_entropy, lambda m: _fraction_right(m, held_out, labels))
    if name == "resnet18":
        model = ResNet18()

        def batch(n, g):  # a small input: the step stays communication-bound
            return torch.randn(n, 3, 64, 64, generator=g), torch.randint(0, 1000, (n,), generator=g)
        return Task(model, batch, nn.functional.cross_entropy)
    if name == "digits":
        sys.path.insert(0, str(EXAMPLES))
        import train_digits  # noqa: E402  (the example's model and data split)
        (train_x, train_y), (test_x, test_y) = train_digits.load_data(seed=0)

        def batch(n, g):  # each worker draws its own (its generator is seeded by its rank)
            pick = torch.randint(0, len(train_y), (n,), generator=g)
            return train_x[pick], train_y[pick]
        return Task(train_digits.DigitsNet(), batch, nn.functional.cross_entropy,
                    lambda m: _fraction_right(m, test_x, test_y))
    raise ValueError(f"unknown model {name}; one of {NAMES}")
