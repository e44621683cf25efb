"""IR-text tests of ``xnnpack.bf16-linear-as-f16``: a bf16 linear with constant weights becomes
convert -> fp16 linear -> convert, with fp16 twins of its weight and bias. At the boundaries: the
input is a graph input, the result a graph output read again, a weight read by two linears (one
twin) and by another op (the bf16 original stays; one no longer read stays in the IR, and
the write-back deletes it), a symbolic row count; declined: a weight that is
not a constant, one beyond fp16's range or not finite, an fp32 linear; off without enable_bf16."""

from __future__ import annotations

import pytest
import torch

from passes.testing import check_pipeline, graph_with_data

PASS = "xnnpack.bf16-linear-as-f16{enable_bf16=true},dead-code-elimination"


W = torch.tensor([[1.0, -2.0, 0.5, 3.0], [0.25, 1e-6, -7.0, 59904.0], [100.0, 0.0, -0.125, 2.0]], dtype=torch.bfloat16)
B = torch.tensor([0.5, -1.0, 2.0], dtype=torch.bfloat16)


def test_input_output_bias_and_a_result_read_twice():
    before = graph_with_data(
        """
    graph @g {
      input %x: bf16[2,4]
      param %w: bf16[3,4]
      param %b: bf16[3]
      %y: bf16[2,3] = aten.linear(%x, %w, %b)
      %r: bf16[2,3] = aten.relu(%y)
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
      input %x: bf16[2,4]
      param %w: bf16[3,4]
      param %b: bf16[3]
      param %w_f16: f16[3,4]
      param %b_f16: f16[3]
      %0: f16[2,4] = xir.convert(%x) {dtype=f16}
      %1: f16[2,3] = aten.linear(%0, %w_f16, %b_f16)
      %y: bf16[2,3] = xir.convert(%1) {dtype=bf16}
      %r: bf16[2,3] = aten.relu(%y)
      return %y, %r
    }""",
        changed=True,
    )
    # every bf16 number within fp16's range is an fp16 number (1e-6 becomes an fp16 subnormal)
    assert torch.equal(graph.input_named("w_f16").data, W.to(torch.float16))
    assert graph.input_named("w_f16").data.dtype is torch.float16
    assert (graph.input_named("w_f16").data.float() - W.float()).abs().max().item() <= 2**-25
    assert torch.equal(graph.input_named("b_f16").data.float(), B.float())


def test_a_weight_read_by_two_linears_and_an_embedding_symbolic_rows():
    before = graph_with_data(
        """
    graph @g {
      input %t: i64[s0]
      input %x: bf16[s0,4]
      param %w: bf16[3,4]
      %e: bf16[s0,4] = aten.embedding(%w, %t)
      %a: bf16[s0,3] = aten.linear(%x, %w)
      %b: bf16[s0,3] = aten.linear(%e, %w)
      %o: bf16[s0,3] = aten.add.Tensor(%a, %b)
      return %o
    }""",
        w=W,
    )
    check_pipeline(
        before,
        PASS,
        """
    graph @g {
      input %t: i64[s0]
      input %x: bf16[s0,4]
      param %w: bf16[3,4]
      param %w_f16: f16[3,4]
      %e: bf16[s0,4] = aten.embedding(%w, %t)
      %0: f16[s0,4] = xir.convert(%x) {dtype=f16}
      %1: f16[s0,3] = aten.linear(%0, %w_f16)
      %a: bf16[s0,3] = xir.convert(%1) {dtype=bf16}
      %2: f16[s0,4] = xir.convert(%e) {dtype=f16}
      %3: f16[s0,3] = aten.linear(%2, %w_f16)
      %b: bf16[s0,3] = xir.convert(%3) {dtype=bf16}
      %o: bf16[s0,3] = aten.add.Tensor(%a, %b)
      return %o
    }""",
        changed=True,
    )


BEYOND = W.clone()
BEYOND[1, 3] = 65536.0  # a bf16 number, beyond fp16's largest (65504)
NOT_FINITE = W.clone()
NOT_FINITE[0, 0] = float("inf")
PARAM_LINEAR = """
    graph @g {
      input %x: bf16[2,4]
      param %w: bf16[3,4]
      %y: bf16[2,3] = aten.linear(%x, %w)
      return %y
    }"""


@pytest.mark.parametrize(
    "text, data, reason",
    [
        (
            """
    graph @g {
      input %x: bf16[2,4]
      input %w: bf16[3,4]
      %y: bf16[2,3] = aten.linear(%x, %w)
      return %y
    }""",
            {},
            "the weight is not a constant",
        ),
        (PARAM_LINEAR, {"w": BEYOND}, "beyond fp16's range"),
        (PARAM_LINEAR, {"w": NOT_FINITE}, "not finite"),
        (
            """
    graph @g {
      input %x: bf16[2,4]
      param %w: bf16[3,4]
      input %b: bf16[3]
      %y: bf16[2,3] = aten.linear(%x, %w, %b)
      return %y
    }""",
            {"w": W},
            "the bias is not a constant",
        ),
        (
            """
    graph @g {
      input %x: f32[2,4]
      param %w: f32[3,4]
      %y: f32[2,3] = aten.linear(%x, %w)
      return %y
    }""",
            {"w": W.float()},
            "not a bf16 linear",
        ),
    ],
)
def test_declined_with_the_reason(text, data, reason):
    from passes import parse_pipeline

    pipeline = parse_pipeline(PASS)
    check_pipeline(graph_with_data(text, **data), pipeline, text, changed=False)
    declined = pipeline[0].last_stats.declined
    assert any(reason in r for reasons in declined.values() for r in reasons), declined


def test_off_without_enable_bf16():
    check_pipeline(graph_with_data(PARAM_LINEAR, w=W), "xnnpack.bf16-linear-as-f16", PARAM_LINEAR, changed=False)
