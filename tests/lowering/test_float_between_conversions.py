"""Statically quantized programs with ops that are no quantized pattern XNNPACK runs (an op whose
output is not quantized, an op XNNPACK has no quantized version of, an op reading a dequantized
and a float tensor): stock delegates them in fp32 between conversions, and so does xir now
(capability.float_between_conversions, with xnnpack.dequantize-per-float-reader giving such an op
a dequantize of its own). Before, xir left them outside: in the differential fuzzer's static
campaign it left more ops outside than stock in 62 of 137 programs both ran. Each program is
lowered both ways, run on the runtime and compared with the converted pt2e model."""

from __future__ import annotations

import functools

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from xir_tools.examples import quantize_module
from xir_tools.harness import lower, reference

VIAS = ("etal", "backend")


class GeluAfterQuantizedCat(nn.Module):
    """fuzz static seed 1077, shrunk: gelus reading dequantized tensors, their outputs float; a
    matmul with a float weight after them."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.linear3 = nn.Linear(4, 2, bias=False)
        self.linear5 = nn.Linear(4, 6)
        self.w = nn.Parameter(torch.randn(6, 4) / 2.449)

    def forward(self, x0, x1):
        v3 = self.linear3(F.gelu(x0, approximate="tanh"))
        v7 = F.gelu(torch.cat([v3, v3], dim=-5))
        return F.relu(v7), torch.matmul(F.gelu(self.linear5(torch.relu(x1)), approximate="tanh"), self.w)


class SharedByLinearAndFloatOps(nn.Module):
    """A quantized linear's output read by a second quantized linear (its dequantize folded) and by
    abs and log, which XNNPACK has no quantized version of."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.l1 = nn.Linear(8, 8)
        self.l2 = nn.Linear(8, 4)

    def forward(self, x):
        a = self.l1(x)
        return self.l2(a), torch.abs(a) - 0.5, torch.log(a.abs() + 1)


class ConvReturnedAndReadInFloat(nn.Module):
    """A quantized conv's output returned and read by abs. Without a dequantize of its own for abs,
    XNNPACK's channels-last pass moves both readers onto its NCHW copy: 'Attempted to resize a
    static tensor' at load (stock's program fails so)."""

    def __init__(self, softmax: bool = False):
        super().__init__()
        torch.manual_seed(0)
        self.conv = nn.Conv2d(3, 4, 1)
        self.softmax = softmax

    def forward(self, x):
        a = self.conv(x)
        first = torch.softmax(a, -1) if self.softmax else a
        return first, torch.rsqrt(a.abs() + 1)


@functools.lru_cache(maxsize=None)
def _program(name: str):
    torch.manual_seed(1)
    module, inputs = {
        "gelu": (GeluAfterQuantizedCat(), (torch.randn(6, 2, 6, 2, 4), torch.randn(6, 2, 6, 2, 4))),
        "shared": (SharedByLinearAndFloatOps(), (torch.randn(5, 8),)),
        "conv": (ConvReturnedAndReadInFloat(), (torch.randn(1, 3, 4, 5),)),
        "conv-softmax": (ConvReturnedAndReadInFloat(softmax=True), (torch.randn(1, 3, 4, 5),)),
    }[name]
    ep = torch.export.export(quantize_module(module.eval(), inputs, mode="static"), inputs)
    return ep, inputs, reference(ep, inputs)


def _check(result, ref):
    assert result.ran, result.error
    for out, expected in zip(result.outputs, ref):
        assert (out - expected).abs().max().item() <= 1e-3 * max(1.0, expected.abs().max().item())


@pytest.mark.parametrize("via", VIAS)
@pytest.mark.parametrize("name", ["gelu", "shared", "conv"])
def test_float_ops_on_dequantized_tensors_are_delegated(name, via):
    ep, inputs, ref = _program(name)
    ours = lower(ep, inputs, "xir", via=via)
    _check(ours, ref)
    assert not ours.outside, ours.outside
    assert ours.delegates == 1
    report = ours.partitioner.report()
    assert "reads a dequantized tensor" not in report and "no statically quantized version" not in report
    if name == "conv" and via == "etal":
        assert not lower(ep, inputs, "stock", via=via).ran  # (stock: 'Attempted to resize a static tensor')


def test_a_softmax_after_a_convolution_runs_in_a_delegate_of_its_own():
    """The softmax reads the conv's dequantized output, which is also read by abs (several users)
    and its result is a graph output. In the conv's delegate XNNPACK would normalize over the
    channels (the tensor is channels-last there): stock delegates it so and is wrong. xir puts it
    in a delegate of its own, where it reads that output contiguous (before: left outside)."""
    ep, inputs, ref = _program("conv-softmax")
    ours = lower(ep, inputs, "xir")
    _check(ours, ref)
    assert not ours.outside, ours.outside
    assert ours.delegated["aten._softmax"] == 1 and ours.delegated["aten.convolution"] == 1
    assert "aten.abs" in ours.delegated and "aten.rsqrt" in ours.delegated
    groups = [g.ops() for g in ours.partitioner.last_plan.groups]
    assert ["aten._softmax"] in groups and len(groups) == ours.delegates == 2, groups
    stock = lower(ep, inputs, "stock")
    assert stock.ran and max((o - r).abs().max().item() for o, r in zip(stock.outputs, ref)) > 0.05
