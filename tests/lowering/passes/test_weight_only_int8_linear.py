"""IR-text tests of ``xnnpack.weight-only-int8-linear``: ``linear(x, cast(w_int8)) * scales``
becomes ``linear(x, dequantize_per_channel(w_int8, scales, 0))`` in ATen's spelling (``to.dtype``,
what ops_to_not_decompose plans on) and the edge dialect's (``_to_copy``), with the scales first
or second, bf16 scales and a weight read twice; and the cases it declines: the linear's result
also returned or read elsewhere, scales that are not constant, not one per output channel, or
include a zero, a bias, a weight that is not int8."""

from __future__ import annotations

import textwrap

import pytest
import torch

from passes.testing import check_pipeline
from xir import parse_graph

PASS = "xnnpack.weight-only-int8-linear"
SCALES = torch.tensor([0.5, 0.25, 2.0])


def graph_of(text: str, scales: torch.Tensor = SCALES, scale_dtype=torch.float32):
    graph = parse_graph(textwrap.dedent(text))
    graph.input_named("w").data = torch.randint(-128, 128, (3, 4), dtype=torch.int8)
    if graph.input_named("s").is_constant:
        graph.input_named("s").data = scales.to(scale_dtype).reshape(graph.input_named("s").type.shape)
    return graph


REWRITTEN = """
    graph @g {
      input %x: f32[2,4]
      buffer %w: i8[3,4]
      buffer %s: f32[3]
      param %weight_scales: f32[3]
      param %weight_zero_points: i64[3]
      %0: f32[3,4] = quantized_decomposed.dequantize_per_channel(%w, %weight_scales, %weight_zero_points) {axis=0, quant_min=-128, quant_max=127, dtype=i8}
      %y: f32[2,3] = aten.linear(%x, %0)
      return %y
    }"""


def test_aten_spelling():
    before = graph_of("""
    graph @g {
      input %x: f32[2,4]
      buffer %w: i8[3,4]
      buffer %s: f32[3]
      %c: f32[3,4] = aten.to.dtype(%w) {dtype=f32}
      %y: f32[2,3] = aten.linear(%x, %c)
      %o: f32[2,3] = aten.mul.Tensor(%y, %s)
      return %o
    }""")
    graph = check_pipeline(before, f"{PASS},dead-code-elimination", REWRITTEN, changed=True)
    assert torch.equal(graph.input_named("weight_scales").data, SCALES)
    assert not graph.input_named("weight_zero_points").data.any()


def test_edge_spelling_bf16_scales_first_symbolic_rows():
    before = graph_of(
        """
    graph @g {
      input %x: f32[1,s0,4]
      buffer %w: i8[3,4]
      buffer %s: bf16[3]
      %c: f32[3,4] = aten._to_copy(%w) {dtype=f32}
      %sf: f32[3] = aten._to_copy(%s) {dtype=f32}
      %y: f32[1,s0,3] = aten.linear(%x, %c)
      %o: f32[1,s0,3] = aten.mul.Tensor(%sf, %y)
      return %o
    }""",
        scale_dtype=torch.bfloat16,
    )
    check_pipeline(
        before,
        f"{PASS},dead-code-elimination",
        """
    graph @g {
      input %x: f32[1,s0,4]
      buffer %w: i8[3,4]
      buffer %s: bf16[3]
      param %weight_scales: f32[3]
      param %weight_zero_points: i64[3]
      %0: f32[3,4] = quantized_decomposed.dequantize_per_channel(%w, %weight_scales, %weight_zero_points) {axis=0, quant_min=-128, quant_max=127, dtype=i8}
      %y: f32[1,s0,3] = aten.linear(%x, %0)
      return %y
    }""",
        changed=True,
    )


def test_weight_and_scales_read_by_two_linears():
    before = graph_of("""
    graph @g {
      input %x: f32[2,4]
      buffer %w: i8[3,4]
      buffer %s: f32[3]
      %c: f32[3,4] = aten._to_copy(%w) {dtype=f32}
      %y: f32[2,3] = aten.linear(%x, %c)
      %o: f32[2,3] = aten.mul.Tensor(%y, %s)
      %y2: f32[2,3] = aten.linear(%x, %c)
      %o2: f32[2,3] = aten.mul.Tensor(%y2, %s)
      %sum: f32[2,3] = aten.add.Tensor(%o, %o2)
      return %sum
    }""")
    check_pipeline(
        before,
        f"{PASS},dead-code-elimination",
        """
    graph @g {
      input %x: f32[2,4]
      buffer %w: i8[3,4]
      buffer %s: f32[3]
      param %weight_scales: f32[3]
      param %weight_zero_points: i64[3]
      param %weight_scales_1: f32[3]
      param %weight_zero_points_1: i64[3]
      %0: f32[3,4] = quantized_decomposed.dequantize_per_channel(%w, %weight_scales, %weight_zero_points) {axis=0, quant_min=-128, quant_max=127, dtype=i8}
      %y: f32[2,3] = aten.linear(%x, %0)
      %1: f32[3,4] = quantized_decomposed.dequantize_per_channel(%w, %weight_scales_1, %weight_zero_points_1) {axis=0, quant_min=-128, quant_max=127, dtype=i8}
      %y2: f32[2,3] = aten.linear(%x, %1)
      %sum: f32[2,3] = aten.add.Tensor(%y, %y2)
      return %sum
    }""",
        changed=True,
    )


DECLINED = {
    "linear-result-also-returned": """
      %c: f32[3,4] = aten._to_copy(%w) {dtype=f32}
      %y: f32[2,3] = aten.linear(%x, %c)
      %o: f32[2,3] = aten.mul.Tensor(%y, %s)
      return %o, %y""",
    "linear-result-read-twice": """
      %c: f32[3,4] = aten._to_copy(%w) {dtype=f32}
      %y: f32[2,3] = aten.linear(%x, %c)
      %o: f32[2,3] = aten.mul.Tensor(%y, %s)
      %r: f32[2,3] = aten.relu(%y)
      return %o, %r""",
    "scales-per-row-not-per-channel": """
      %c: f32[3,4] = aten._to_copy(%w) {dtype=f32}
      %y: f32[2,3] = aten.linear(%x, %c)
      %o: f32[2,3] = aten.mul.Tensor(%y, %x2)
      return %o""",
    "a-bias": """
      %c: f32[3,4] = aten._to_copy(%w) {dtype=f32}
      %y: f32[2,3] = aten.linear(%x, %c, %s)
      %o: f32[2,3] = aten.mul.Tensor(%y, %s)
      return %o""",
    "a-multiply-by-a-python-scalar": """
      %c: f32[3,4] = aten._to_copy(%w) {dtype=f32}
      %y: f32[2,3] = aten.linear(%x, %c)
      %o: f32[2,3] = aten.mul.Tensor(%y) {other=2.0}
      return %o""",
    "fp32-weight-not-cast": """
      %y: f32[2,3] = aten.linear(%x, %f)
      %o: f32[2,3] = aten.mul.Tensor(%y, %s)
      return %o""",
}


@pytest.mark.parametrize("body", DECLINED.values(), ids=DECLINED.keys())
def test_declined(body):
    text = f"""
    graph @g {{
      input %x: f32[2,4]
      input %x2: f32[2,1]
      buffer %w: i8[3,4]
      buffer %s: f32[3]
      param %f: f32[3,4]
      {textwrap.dedent(body).strip()}
    }}"""
    check_pipeline(graph_of(text), PASS, text, changed=False)


def test_scales_from_an_input_are_declined():
    text = """
    graph @g {
      input %x: f32[2,4]
      input %s: f32[3]
      buffer %w: i8[3,4]
      %c: f32[3,4] = aten._to_copy(%w) {dtype=f32}
      %y: f32[2,3] = aten.linear(%x, %c)
      %o: f32[2,3] = aten.mul.Tensor(%y, %s)
      return %o
    }"""
    check_pipeline(graph_of(text), PASS, text, changed=False)


@pytest.mark.parametrize(
    "bad", [0.0, -1.0, float("inf"), float("nan"), 1e-40], ids=["zero", "negative", "inf", "nan", "subnormal"]
)
def test_scales_xnnpack_refuses_are_declined(bad):
    text = """
    graph @g {
      input %x: f32[2,4]
      buffer %w: i8[3,4]
      buffer %s: f32[3]
      %c: f32[3,4] = aten._to_copy(%w) {dtype=f32}
      %y: f32[2,3] = aten.linear(%x, %c)
      %o: f32[2,3] = aten.mul.Tensor(%y, %s)
      return %o
    }"""
    check_pipeline(graph_of(text, scales=torch.tensor([0.5, bad, 1.0])), PASS, text, changed=False)
