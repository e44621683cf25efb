"""torchvision-free replicas of the CNNs in ExecuTorch's example list (mv2, mv3, resnet18, ic3),
written here from the papers' layer tables (torchvision does not load beside torch 2.13 in this
environment). Same layer structure as the torchvision models they are named after; random weights,
with batch-norm statistics randomized so that eval-mode activations are not the identity.
``width`` scales the channels (1.0 is the architecture's)."""

from __future__ import annotations

import torch
from torch import nn


def randomize_batch_norms(module: nn.Module, seed: int = 0) -> nn.Module:
    """Give every batch norm random running statistics and affine parameters (a trained network's
    are not 0/1), so that folding them into convs is exercised."""
    generator = torch.Generator().manual_seed(seed)
    for m in module.modules():
        if isinstance(m, nn.BatchNorm2d):
            c = m.num_features
            m.running_mean.copy_(torch.randn(c, generator=generator) * 0.1)
            m.running_var.copy_(torch.rand(c, generator=generator) * 0.5 + 0.75)
            m.weight.data.copy_(torch.rand(c, generator=generator) * 0.5 + 0.75)
            m.bias.data.copy_(torch.randn(c, generator=generator) * 0.1)
    return module


def _channels(c: float, divisor: int = 8) -> int:
    return max(divisor, int(c + divisor / 2) // divisor * divisor)


def conv_bn(cin, cout, kernel, stride=1, groups=1, activation=nn.ReLU6):
    layers = [nn.Conv2d(cin, cout, kernel, stride, kernel // 2, groups=groups, bias=False), nn.BatchNorm2d(cout)]
    if activation is not None:
        layers.append(activation())
    return nn.Sequential(*layers)


# ------------------------------------------------------------------------------------ MobileNetV2


class InvertedResidual(nn.Module):
    def __init__(self, cin, cout, stride, expand):
        super().__init__()
        hidden = cin * expand
        layers = [] if expand == 1 else [conv_bn(cin, hidden, 1)]
        layers += [conv_bn(hidden, hidden, 3, stride, groups=hidden), conv_bn(hidden, cout, 1, activation=None)]
        self.block = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        return x + self.block(x) if self.residual else self.block(x)


class MobileNetV2Replica(nn.Module):
    """MobileNetV2 (Sandler et al. 2018, table 2): t, c, n, s per stage; last conv 1280."""

    SETTINGS = (
        (1, 16, 1, 1),
        (6, 24, 2, 2),
        (6, 32, 3, 2),
        (6, 64, 4, 2),
        (6, 96, 3, 1),
        (6, 160, 3, 2),
        (6, 320, 1, 1),
    )

    def __init__(self, width=1.0, classes=1000):
        super().__init__()
        cin = _channels(32 * width)
        last = _channels(1280 * max(1.0, width))
        layers = [conv_bn(3, cin, 3, 2)]
        for t, c, n, s in self.SETTINGS:
            cout = _channels(c * width)
            for i in range(n):
                layers.append(InvertedResidual(cin, cout, s if i == 0 else 1, t))
                cin = cout
        layers.append(conv_bn(cin, last, 1))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(last, classes))

    def forward(self, x):
        x = nn.functional.adaptive_avg_pool2d(self.features(x), 1)
        return self.classifier(torch.flatten(x, 1))


# ------------------------------------------------------------------------------------ MobileNetV3


class SqueezeExcite(nn.Module):
    def __init__(self, channels):
        super().__init__()
        squeezed = _channels(channels // 4)
        self.fc1, self.fc2 = nn.Conv2d(channels, squeezed, 1), nn.Conv2d(squeezed, channels, 1)

    def forward(self, x):
        s = nn.functional.adaptive_avg_pool2d(x, 1)
        s = nn.functional.hardsigmoid(self.fc2(torch.relu(self.fc1(s))))
        return x * s


class V3Block(nn.Module):
    def __init__(self, cin, kernel, expanded, cout, se, activation, stride):
        super().__init__()
        layers = [] if expanded == cin else [conv_bn(cin, expanded, 1, activation=activation)]
        layers.append(conv_bn(expanded, expanded, kernel, stride, groups=expanded, activation=activation))
        if se:
            layers.append(SqueezeExcite(expanded))
        layers.append(conv_bn(expanded, cout, 1, activation=None))
        self.block = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        return x + self.block(x) if self.residual else self.block(x)


class MobileNetV3SmallReplica(nn.Module):
    """MobileNetV3-Small (Howard et al. 2019, table 2): kernel, expanded, out, SE, activation, stride."""

    HS, RE = nn.Hardswish, nn.ReLU
    SETTINGS = (
        (3, 16, 16, True, RE, 2),
        (3, 72, 24, False, RE, 2),
        (3, 88, 24, False, RE, 1),
        (5, 96, 40, True, HS, 2),
        (5, 240, 40, True, HS, 1),
        (5, 240, 40, True, HS, 1),
        (5, 120, 48, True, HS, 1),
        (5, 144, 48, True, HS, 1),
        (5, 288, 96, True, HS, 2),
        (5, 576, 96, True, HS, 1),
        (5, 576, 96, True, HS, 1),
    )

    def __init__(self, classes=1000):
        super().__init__()
        layers, cin = [conv_bn(3, 16, 3, 2, activation=nn.Hardswish)], 16
        for kernel, expanded, cout, se, activation, stride in self.SETTINGS:
            layers.append(V3Block(cin, kernel, expanded, cout, se, activation, stride))
            cin = cout
        layers.append(conv_bn(cin, 576, 1, activation=nn.Hardswish))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Linear(576, 1024), nn.Hardswish(), nn.Dropout(0.2), nn.Linear(1024, classes))

    def forward(self, x):
        x = nn.functional.adaptive_avg_pool2d(self.features(x), 1)
        return self.classifier(torch.flatten(x, 1))


# ------------------------------------------------------------------------------------ ResNet18


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout)
        self.conv2, self.bn2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return torch.relu(y + (x if self.down is None else self.down(x)))


class ResNet18Replica(nn.Module):
    """ResNet-18 (He et al. 2016): 7x7 stem, max pool, four stages of two basic blocks."""

    def __init__(self, width=1.0, classes=1000):
        super().__init__()
        widths = [int(c * width) for c in (64, 128, 256, 512)]
        self.stem = nn.Sequential(
            nn.Conv2d(3, widths[0], 7, 2, 3, bias=False), nn.BatchNorm2d(widths[0]), nn.ReLU(), nn.MaxPool2d(3, 2, 1)
        )
        blocks, cin = [], widths[0]
        for i, cout in enumerate(widths):
            blocks += [BasicBlock(cin, cout, 1 if i == 0 else 2), BasicBlock(cout, cout, 1)]
            cin = cout
        self.layers = nn.Sequential(*blocks)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x):
        x = nn.functional.adaptive_avg_pool2d(self.layers(self.stem(x)), 1)
        return self.fc(torch.flatten(x, 1))


# ------------------------------------------------------------------------------------ Inception


class InceptionA(nn.Module):
    """Inception v3's 35x35 block: 1x1; 1x1 -> 5x5; 1x1 -> 3x3 -> 3x3; 3x3 average pool (padded,
    counting its padding) -> 1x1; concatenated."""

    def __init__(self, cin, pool_features):
        super().__init__()
        relu = nn.ReLU
        self.b1 = conv_bn(cin, 64, 1, activation=relu)
        self.b5 = nn.Sequential(conv_bn(cin, 48, 1, activation=relu), conv_bn(48, 64, 5, activation=relu))
        self.b3 = nn.Sequential(
            conv_bn(cin, 64, 1, activation=relu),
            conv_bn(64, 96, 3, activation=relu),
            conv_bn(96, 96, 3, activation=relu),
        )
        self.pool = conv_bn(cin, pool_features, 1, activation=relu)

    def forward(self, x):
        pooled = nn.functional.avg_pool2d(x, 3, 1, 1)
        return torch.cat([self.b1(x), self.b5(x), self.b3(x), self.pool(pooled)], 1)


class InceptionReplica(nn.Module):
    """Inception v3's stem (to 192 channels) and its three InceptionA blocks, then the classifier."""

    def __init__(self, classes=1000):
        super().__init__()
        relu = nn.ReLU
        self.stem = nn.Sequential(
            conv_bn(3, 32, 3, 2, activation=relu),
            conv_bn(32, 64, 3, activation=relu),
            nn.MaxPool2d(3, 2),
            conv_bn(64, 80, 1, activation=relu),
            conv_bn(80, 192, 3, activation=relu),
            nn.MaxPool2d(3, 2),
        )
        self.blocks = nn.Sequential(InceptionA(192, 32), InceptionA(256, 64), InceptionA(288, 64))
        self.fc = nn.Linear(288, classes)

    def forward(self, x):
        x = nn.functional.adaptive_avg_pool2d(self.blocks(self.stem(x)), 1)
        return self.fc(torch.flatten(x, 1))


REPLICAS = {
    "mv2-replica": lambda: MobileNetV2Replica(),
    "mv3-replica": lambda: MobileNetV3SmallReplica(),
    "resnet18-replica": lambda: ResNet18Replica(),
    "ic3-replica": lambda: InceptionReplica(),
}


def replica(name: str, seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return randomize_batch_norms(REPLICAS[name]().eval(), seed)
