"""Regression tests made from the differential fuzzer's shrunk repros (issue 12). Each lowers
with xir and with stock, runs on the runtime and compares with eager (or the converted pt2e
model); the comment says what xir did before its fix."""

import torch
import torch.nn.functional as F

from lowering.compare import lower, reference
from lowering.examples import quantize_module

BF16 = torch.bfloat16


class QuantizedElementwise8d(torch.nn.Module):
    """Statically quantized log/sub/add on an 8-D input: the scalars become 0-D quantized
    constants whose dequantize xir delegated alone, and a delegate cannot return a 0-D tensor."""

    def forward(self, x):
        return (torch.log(x.abs() + 1) - 0.5) + 2.0


def test_quantized_8d_elementwise_chain_with_scalar_constants_runs():
    inputs = (torch.rand(2, 1, 2, 1, 2, 1, 2, 3) + 0.1,)
    ep = torch.export.export(quantize_module(QuantizedElementwise8d().eval(), inputs, mode="static"), inputs)
    ours, stock = lower(ep, inputs, "xir"), lower(ep, inputs, "stock")
    assert ours.ran, ours.error  # before: loaded, then "Failed to retrieve dim order from tensor!" at execute
    assert ours.err(reference(ep, inputs)) <= 0.05
    assert ours.delegated == {}  # everything is 8-D or a 0-D dequantize whose result would leave a delegate
    assert not stock.ran and "load failed" in stock.error  # stock delegates the 8-D ops


class ZeroDOutput(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.tensor(-1.5))

    def forward(self, x):
        return torch.log(x.abs() + 1).reshape(2, 1, 2, 1, 2, 1, 2, 3) + self.w.abs()


def test_a_0d_result_never_leaves_a_delegate():
    inputs = (torch.rand(2, 1, 2, 1, 2, 1, 2, 3),)
    ep = torch.export.export(ZeroDOutput().eval(), inputs)
    ours, stock = lower(ep, inputs, "xir"), lower(ep, inputs, "stock")
    assert ours.ran, ours.error  # before: abs(w) alone in a delegate, "Size needs to be equal to the number of dimensions"
    assert ours.err(reference(ep, inputs)) <= 1e-6
    assert "aten.abs" not in ours.delegated
    assert "its 0-D result would leave the delegate" in ours.partitioner.report()
    assert not stock.ran and "load failed" in stock.error


class ZeroDInside(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.tensor(-1.5))

    def forward(self, x):
        return torch.relu(x) * self.w.abs()


def test_a_0d_value_inside_a_delegate_stays_inside():
    inputs = (torch.randn(2, 3),)
    ep = torch.export.export(ZeroDInside().eval(), inputs)
    ours = lower(ep, inputs, "xir")
    assert ours.ran and ours.err(reference(ep, inputs)) <= 1e-6
    assert ours.delegated == {"aten.relu": 1, "aten.abs": 1, "aten.mul.Tensor": 1} and ours.delegates == 1


class Bf16Conv3dBlock(torch.nn.Module):
    """A bf16 Conv3d beside cat, tanh GELU, a padded max pool, matmul and a cast to half."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv3d(2, 3, 2)

    def forward(self, x, y):
        a = self.conv(x)
        b = F.gelu(torch.cat([a, a], 1), approximate="tanh")
        return F.max_pool2d(b.reshape(1, 18, 3, 3), 2, padding=1), torch.matmul(y, y.transpose(-1, -2)).to(torch.half)


def test_bf16_conv3d_is_decomposed_and_runs():
    torch.manual_seed(0)
    inputs = (torch.randn(1, 2, 4, 4, 4, dtype=BF16), torch.randn(2, 3, 4, dtype=BF16))
    ep = torch.export.export(Bf16Conv3dBlock().eval().to(BF16), inputs)
    ours, stock = lower(ep, inputs, "xir", enable_bf16=True), lower(ep, inputs, "stock", enable_bf16=True)
    # before: the bf16 Conv3d stayed on the portable kernels, which have no 3-D convolution (error 0x12)
    assert ours.ran, ours.error
    ref = reference(ep, inputs)
    for out, expected in zip(ours.outputs, ref):
        assert (out.float() - expected.float()).abs().max().item() <= 2 ** -5 * max(1.0, expected.float().abs().max().item())
    assert ours.delegated["aten.convolution"] == 2 and "aten.convolution" not in ours.outside  # two depth taps, in fp32
    assert not stock.ran and "load failed" in stock.error  # stock: bf16 max pooling
