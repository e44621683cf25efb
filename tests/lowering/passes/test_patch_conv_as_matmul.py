"""IR-text tests of ``xnnpack.patch-conv-as-matmul``: a convolution whose stride is its kernel as
view -> permute -> view -> mm with the flattened weight (+ bias) -> view -> permute. At the
boundaries: the input a graph input, the result a graph output read again, no bias, a weight also
read by another op (an unread weight stays in the IR; the write-back deletes it); declined: a stride that is not the kernel, padding, a symbolic
input, a kernel the input does not divide, a weight that is not a constant, a quantized input.
The rewritten graph computes what the convolution does (checked with torch on the data)."""

from __future__ import annotations

import re

import pytest
import torch

from passes.testing import check_declined, check_pipeline, graph_with_data

PASS = "xnnpack.patch-conv-as-matmul,dead-code-elimination"

torch.manual_seed(0)
W = torch.randn(5, 3, 2, 2)
B = torch.randn(5)


def test_input_output_bias_and_a_result_read_twice():
    before = graph_with_data(
        """
    graph @g {
      input %x: f32[2,3,4,6]
      param %w: f32[5,3,2,2]
      param %b: f32[5]
      %y: f32[2,5,2,3] = aten.convolution(%x, %w, %b) {stride=[2, 2], padding=[0], dilation=[1, 1], transposed=false, output_padding=[0], groups=1}
      %r: f32[2,5,2,3] = aten.relu(%y)
      return %y, %r
    }""",
        w=W,
        b=B,
    )
    graph = check_pipeline(
        before,
        PASS,
        """
    graph @g {
      input %x: f32[2,3,4,6]
      param %w: f32[5,3,2,2]
      param %b: f32[5]
      param %w_as_matrix: f32[12,5]
      %0: f32[2,3,2,2,3,2] = aten.view_copy(%x) {size=[2, 3, 2, 2, 3, 2]}
      %1: f32[2,2,3,3,2,2] = aten.permute_copy(%0) {dims=[0, 2, 4, 1, 3, 5]}
      %2: f32[12,12] = aten.view_copy(%1) {size=[12, 12]}
      %3: f32[12,5] = aten.mm(%2, %w_as_matrix)
      %4: f32[12,5] = aten.add.Tensor(%3, %b)
      %5: f32[2,2,3,5] = aten.view_copy(%4) {size=[2, 2, 3, 5]}
      %y: f32[2,5,2,3] = aten.permute_copy(%5) {dims=[0, 3, 1, 2]}
      %r: f32[2,5,2,3] = aten.relu(%y)
      return %y, %r
    }""",
        changed=True,
    )
    # the same numbers: the rewritten ops, done by torch on the constant, against the convolution
    x = torch.randn(2, 3, 4, 6)
    matrix = graph.input_named("w_as_matrix").data
    patches = x.view(2, 3, 2, 2, 3, 2).permute(0, 2, 4, 1, 3, 5).reshape(12, 12)
    y = (patches @ matrix + B).view(2, 2, 3, 5).permute(0, 3, 1, 2)
    assert torch.allclose(y, torch.nn.functional.conv2d(x, W, B, stride=2), atol=1e-5)


def test_no_bias_and_a_weight_read_elsewhere():
    before = graph_with_data(
        """
    graph @g {
      input %x: f32[1,3,2,2]
      param %w: f32[5,3,2,2]
      %y: f32[1,5,1,1] = aten.convolution(%x, %w) {stride=[2, 2], padding=[0, 0], dilation=[1, 1], transposed=false, output_padding=[0, 0], groups=1}
      %n: f32[5,3,2,2] = aten.neg(%w)
      return %y, %n
    }""",
        w=W,
    )
    check_pipeline(
        before,
        PASS,
        """
    graph @g {
      input %x: f32[1,3,2,2]
      param %w: f32[5,3,2,2]
      param %w_as_matrix: f32[12,5]
      %0: f32[1,3,1,2,1,2] = aten.view_copy(%x) {size=[1, 3, 1, 2, 1, 2]}
      %1: f32[1,1,1,3,2,2] = aten.permute_copy(%0) {dims=[0, 2, 4, 1, 3, 5]}
      %2: f32[1,12] = aten.view_copy(%1) {size=[1, 12]}
      %3: f32[1,5] = aten.mm(%2, %w_as_matrix)
      %4: f32[1,1,1,5] = aten.view_copy(%3) {size=[1, 1, 1, 5]}
      %y: f32[1,5,1,1] = aten.permute_copy(%4) {dims=[0, 3, 1, 2]}
      %n: f32[5,3,2,2] = aten.neg(%w)
      return %y, %n
    }""",
        changed=True,
    )


CONV = """
    graph @g {{
      input %x: f32[{x}]
      param %w: f32[5,3,2,2]
      {extra}%y: f32[{y}] = aten.convolution({source}, %w) {{stride={stride}, padding={padding}, dilation=[1, 1], transposed=false, output_padding=[0, 0], groups=1}}
      return %y
    }}"""


@pytest.mark.parametrize(
    "case, reason",
    [
        (dict(x="1,3,4,4", y="1,5,3,3", stride="[1, 1]", padding="[0, 0]"), "is not the kernel"),
        (dict(x="1,3,4,4", y="1,5,3,3", stride="[2, 2]", padding="[1, 1]"), "padded"),
        (dict(x="1,3,s0,4", y="1,5,s1,2", stride="[2, 2]", padding="[0, 0]"), "symbolic"),
        (dict(x="1,3,5,4", y="1,5,2,2", stride="[2, 2]", padding="[0, 0]"), "does not divide"),
    ],
    ids=["stride", "padding", "symbolic", "remainder"],
)
def test_declined(case, reason):
    text = CONV.format(source="%x", extra="", **case)
    check_declined(
        graph_with_data(text, w=W), "xnnpack.patch-conv-as-matmul", "patch_conv_as_matmul", re.escape(reason)
    )


def test_declined_without_constant_weights_or_when_quantized():
    text = CONV.format(x="1,3,4,4", y="1,5,2,2", stride="[2, 2]", padding="[0, 0]", source="%x", extra="")
    check_pipeline(text, "xnnpack.patch-conv-as-matmul", text, changed=False)  # (no data for %w)
    quantized = CONV.format(
        x="1,3,4,4",
        y="1,5,2,2",
        stride="[2, 2]",
        padding="[0, 0]",
        source="%d",
        extra="%q: i8[1,3,4,4] = quantized_decomposed.quantize_per_tensor(%x) {scale=0.1, zero_point=0, quant_min=-128, quant_max=127, dtype=i8}\n"
        "      %d: f32[1,3,4,4] = quantized_decomposed.dequantize_per_tensor(%q) {scale=0.1, zero_point=0, quant_min=-128, quant_max=127, dtype=i8}\n      ",
    )
    check_pipeline(graph_with_data(quantized, w=W), "xnnpack.patch-conv-as-matmul", quantized, changed=False)
