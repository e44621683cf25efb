"""Statically quantized CNNs whole: no more delegates than stock's.

A quantized inception block (four branches, one of them through an average pool that stays
outside, and a concatenation) used to become a delegate per conv with xir: the convex merger
checked a concatenation's unit, whose dequantizes lie right after each branch, before it had seen
the later branches' ancestors, merged it with the stem's group across the pool branch, and the
cycle that made split every group into its units (``lowering/partition.py``,
``_ConvexMerger.record_ancestors``). The pools count their zero padding, which XNNPACK's pooling
does not: both partitioners left them outside, until xnnpack.avg-pool-padding-as-pad wrote each as
a quantized zero pad and an unpadded pool. Now the block is one delegate."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from lowering.fx.quantizer import quantize_pt2e
from xir_tools.harness import lower, reference


class Inception(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.one = nn.Conv2d(channels, 4, 1)
        self.three = nn.Sequential(nn.Conv2d(channels, 4, 1), nn.ReLU(), nn.Conv2d(4, 4, 3, padding=1), nn.ReLU())
        self.five = nn.Sequential(nn.Conv2d(channels, 4, 1), nn.ReLU(), nn.Conv2d(4, 4, 5, padding=2), nn.ReLU())
        self.pool = nn.Conv2d(channels, 4, 1)

    def forward(self, x):
        pooled = nn.functional.avg_pool2d(x, 3, 1, 1)
        return torch.cat([torch.relu(self.one(x)), self.three(x), self.five(x), torch.relu(self.pool(pooled))], 1)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.a, self.b = Inception(8), Inception(16)

    def forward(self, x):
        return self.b(self.a(torch.relu(self.stem(x))))


@pytest.fixture(scope="module")
def inception():
    import executorch.kernels.quantized  # noqa: F401  (the quantize/dequantize around the pools, outside)

    torch.manual_seed(0)
    inputs = (torch.randn(1, 3, 16, 16),)
    quantized = quantize_pt2e(Net().eval(), inputs, is_per_channel=True)
    ep = torch.export.export(quantized, inputs)
    return reference(ep, inputs), lower(ep, inputs, "xir"), lower(ep, inputs, "stock"), ep


def test_a_quantized_inception_block_is_one_delegate(inception):
    expected, ours, stock, _ = inception
    assert ours.outputs is not None, ours.error
    assert ours.err(expected) <= max(stock.err(expected), 1e-6) * 1.01
    assert stock.delegates == 3 and stock.outside == {"aten.avg_pool2d": 2}, (stock.delegates, stock.outside)
    assert ours.delegates == 1 and not ours.outside, ours.partitioner.report()
    assert ours.delegated["aten.convolution"] == 13 and ours.delegated["aten.cat"] == 2
    assert ours.delegated["aten.avg_pool2d"] == 2 and ours.delegated["aten.constant_pad_nd"] == 2


def test_the_merger_alone_gives_stock_s_three_delegates(inception):
    """Without the pool rewrite (the pools outside), the convex merger keeps the branches of each
    block together: stock's three delegates, not one per conv (21 before the merger's fix)."""
    from executorch.exir import to_edge

    import xir
    from lowering.capability import Options
    from lowering.partition import plan_partition

    plan = plan_partition(xir.from_exported_program(to_edge(inception[3]).exported_program()), Options())
    assert len(plan.groups) == 3, plan.report()
    assert sorted(r.node.op for r in plan.rejected) == ["aten.avg_pool2d", "aten.avg_pool2d"]


class ScaleBesideConv(nn.Module):
    """A per-channel scale of the input beside a conv of it: the scale's mul reads the input that
    XNNPACK's channels-last pass converts for the (dynamically quantized) conv."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 4, 3, padding=1)
        self.scale = nn.Parameter(torch.randn(1, 4, 1, 1))

    def forward(self, x):
        return x * self.scale + self.conv(x)


class SwishBetweenConvs(nn.Module):
    """conv -> h * sigmoid(h) -> a dynamically quantized conv: the second conv's activation is
    computed channels-last in the delegate, by a mul of two channels-last values."""

    def __init__(self):
        super().__init__()
        self.first, self.second = nn.Conv2d(4, 8, 3, padding=1), nn.Conv2d(8, 4, 1)

    def forward(self, x):
        h = self.first(x)
        return self.second(h * torch.sigmoid(h))


class HalfBetweenConvs(SwishBetweenConvs):
    """conv -> h * 0.5 -> a dynamically quantized conv: a constant operand ends the channels-last
    chain (fuzz dynamic seed 46043: one delegate fails on every call), so the second conv's unit
    keeps a delegate of its own."""

    def forward(self, x):
        return self.second(self.first(x) * 0.5)


@pytest.mark.parametrize("model, delegates", [(ScaleBesideConv, 1), (SwishBetweenConvs, 1), (HalfBetweenConvs, 2)])
def test_dynamically_quantized_conv_graphs_are_as_few_delegates_as_stock(model, delegates):
    from xir_tools.harness import load_method, run_method

    torch.manual_seed(0)
    inputs = (torch.randn(1, 4, 8, 8),)
    quantized = quantize_pt2e(model().eval(), inputs, is_per_channel=True, is_dynamic=True)
    ep = torch.export.export(quantized, inputs)
    ours = lower(ep, inputs, "xir")
    assert ours.buffer is not None, ours.error
    assert ours.delegates == delegates and not ours.outside, ours.partitioner.report()
    _, method = load_method(ours.buffer)
    for _ in range(3):
        x = torch.randn(1, 4, 8, 8)
        (y,) = run_method(method, [x])
        expected = reference(None, (x,), quantized)[0]
        assert (y - expected).abs().max().item() <= 0.02 * expected.abs().max().item()
