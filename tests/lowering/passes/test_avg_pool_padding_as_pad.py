"""``xnnpack.avg-pool-padding-as-pad``: an average pool that counts its zero padding becomes a zero
pad and an unpadded pool (a quantized one's pad on its dequantize's grid), at the graph
boundaries; what it declines. End to end: a float model's padded pools inside XNNPACK, eager's
numbers (the quantized case: tests/lowering/test_quantized_cnn.py)."""

from __future__ import annotations

import pytest
import torch

from passes.testing import case, check_declined, check_pipeline
from xir_tools.harness import lower, reference

POOLS = [
    case(
        "a-graph-input-to-a-graph-output-read-twice",
        """
    graph @g {
      input %x: f32[1,4,8,8]
      %p: f32[1,4,8,8] = aten.avg_pool2d(%x) {kernel_size=[3, 3], stride=[1, 1], padding=[1, 1]}
      %y: f32[1,4,8,8] = aten.mul.Tensor(%p, %p)
      return %y, %p
    }""",
        """
    graph @g {
      input %x: f32[1,4,8,8]
      %0: f32[1,4,10,10] = aten.constant_pad_nd(%x) {pad=[1, 1, 1, 1], value=0.0}
      %p: f32[1,4,8,8] = aten.avg_pool2d(%0) {kernel_size=[3, 3], stride=[1, 1], padding=[0, 0]}
      %y: f32[1,4,8,8] = aten.mul.Tensor(%p, %p)
      return %y, %p
    }""",
    ),
    case(
        "quantized-its-pad-on-the-dequantize-grid",
        """
    graph @g {
      input %q: i8[1,2,4,4]
      %x: f32[1,2,4,4] = quantized_decomposed.dequantize_per_tensor(%q) {scale=0.5, zero_point=3, quant_min=-128, quant_max=127, dtype=i8}
      %p: f32[1,2,2,2] = aten.avg_pool2d(%x) {kernel_size=[3, 2], stride=[2, 2], padding=[1, 0]}
      return %p
    }""",
        """
    graph @g {
      input %q: i8[1,2,4,4]
      %x: f32[1,2,4,4] = quantized_decomposed.dequantize_per_tensor(%q) {scale=0.5, zero_point=3, quant_min=-128, quant_max=127, dtype=i8}
      %0: f32[1,2,6,4] = aten.constant_pad_nd(%x) {pad=[0, 0, 1, 1], value=0.0}
      %1: i8[1,2,6,4] = quantized_decomposed.quantize_per_tensor(%0) {scale=0.5, zero_point=3, quant_min=-128, quant_max=127, dtype=i8}
      %2: f32[1,2,6,4] = quantized_decomposed.dequantize_per_tensor(%1) {scale=0.5, zero_point=3, quant_min=-128, quant_max=127, dtype=i8}
      %p: f32[1,2,2,2] = aten.avg_pool2d(%2) {kernel_size=[3, 2], stride=[2, 2], padding=[0, 0]}
      return %p
    }""",
    ),
    case(
        "of-a-constant",
        """
    graph @g {
      param %w: f32[1,2,4,4]
      %p: f32[1,2,4,4] = aten.avg_pool2d(%w) {kernel_size=[3, 3], stride=[1, 1], padding=[1, 1]}
      return %p
    }""",
        """
    graph @g {
      param %w: f32[1,2,4,4]
      %0: f32[1,2,6,6] = aten.constant_pad_nd(%w) {pad=[1, 1, 1, 1], value=0.0}
      %p: f32[1,2,4,4] = aten.avg_pool2d(%0) {kernel_size=[3, 3], stride=[1, 1], padding=[0, 0]}
      return %p
    }""",
    ),
    case(
        "declined-count-include-pad-false",
        """
    graph @g {
      input %x: f32[1,4,8,8]
      %p: f32[1,4,8,8] = aten.avg_pool2d(%x) {kernel_size=[3, 3], stride=[1, 1], padding=[1, 1], count_include_pad=false}
      return %p
    }""",
    ),
    case(
        "declined-ceil-mode",
        """
    graph @g {
      input %x: f32[1,4,8,8]
      %p: f32[1,4,5,5] = aten.avg_pool2d(%x) {kernel_size=[3, 3], stride=[2, 2], padding=[1, 1], ceil_mode=true}
      return %p
    }""",
    ),
    case(
        "declined-no-padding",
        """
    graph @g {
      input %x: f32[1,4,8,8]
      %p: f32[1,4,6,6] = aten.avg_pool2d(%x) {kernel_size=[3, 3], stride=[1, 1]}
      return %p
    }""",
    ),
]


@pytest.mark.parametrize("before, expected, changed", POOLS)
def test_avg_pool_padding_as_pad(before, expected, changed):
    check_pipeline(before, "xnnpack.avg-pool-padding-as-pad", expected, changed=changed)


class PaddedPools(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)

    def forward(self, x):
        y = torch.nn.functional.avg_pool2d(self.conv(x), 3, 1, 1)
        return y + torch.nn.functional.avg_pool2d(y, (3, 2), 2, (1, 0))[..., :1, :1]


def test_padded_pools_run_in_xnnpack_as_eager():
    torch.manual_seed(0)
    inputs = (torch.randn(1, 3, 10, 10),)
    ep = torch.export.export(PaddedPools().eval(), inputs)
    expected, ours = reference(ep, inputs), lower(ep, inputs, "xir")
    assert ours.outputs is not None, ours.error
    assert ours.err(expected) < 1e-5
    assert ours.delegates == 1 and not ours.outside, ours.partitioner.report()
    assert ours.delegated["aten.avg_pool2d"] == 2 and ours.delegated["aten.constant_pad_nd"] == 2


def test_a_bf16_pool_without_enable_bf16_is_declined():
    """It stays outside XNNPACK: rewritten it would be two portable ops for one (fuzz fp32 10666)."""
    before = """
    graph @g {
      input %x: bf16[2,2,11,11]
      %p: bf16[2,2,6,6] = aten.avg_pool2d(%x) {kernel_size=[2, 2], stride=[2, 2], padding=[1, 1]}
      return %p
    }"""
    check_declined(
        before, "xnnpack.avg-pool-padding-as-pad{enable_bf16=false}", "avg_pool_padding_as_pad", "bf16 is not enabled"
    )
