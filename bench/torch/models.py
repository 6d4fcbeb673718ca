"""Models of the end-to-end PyTorch benchmark, by name.

mlp5m / mlp25m / mlp100m: stacks of square Linear layers with about 5M, 25M
and 100M parameters (the gradient volume is what matters for communication).
resnet18: ResNet-18 (basic blocks 2-2-2-2, 11.7M parameters), laid out as
torchvision's; defined here because the torchvision wheel of the newest torch
is not always on PyPI when torch is.
"""
import torch
import torch.nn as nn

MLPS = {"mlp5m": (1024, 5), "mlp25m": (2048, 6), "mlp100m": (4096, 6)}
NAMES = [*MLPS, "resnet18"]


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
    """(model, make_batch(batch_size, generator) -> (inputs, targets), loss_fn). `learnable` (the MLPs):
    labels from a fixed random linear teacher instead of at random, so that the loss can fall."""
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
        return model, batch, nn.functional.cross_entropy
    if name == "resnet18":
        model = ResNet18()

        def batch(n, g):  # a small input: the step stays communication-bound
            return torch.randn(n, 3, 64, 64, generator=g), torch.randint(0, 1000, (n,), generator=g)
        return model, batch, nn.functional.cross_entropy
    raise ValueError(f"unknown model {name}; one of {NAMES}")
