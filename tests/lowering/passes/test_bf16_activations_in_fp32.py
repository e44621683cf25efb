"""IR-text tests of ``xnnpack.bf16-activations-in-fp32``: bf16 ops XNNPACK defines in fp32 become
fp32 ops on fp32 values, converted to bf16 only where a value leaves them. At the boundaries: a
graph input read by several ops (one convert), a result that is a graph output and read again, a
constant (one fp32 twin, the weight's layout made in fp32 too), symbolic rows, an op left in bf16
(an embedding) and a value rounded from an fp32 input (read through); declined: an op with a
dtype attribute; nothing to do in fp32; off without enable_bf16."""

from __future__ import annotations

import torch

from passes import parse_pipeline
from passes.testing import check_pipeline, graph_with_data

PASS = "xnnpack.bf16-activations-in-fp32{enable_bf16=true},dead-code-elimination"

W = torch.tensor([[1.0, -2.0, 0.5, 3.0], [0.25, 1e-6, -7.0, 5.0], [100.0, 0.0, -0.125, 2.0]], dtype=torch.bfloat16)


def test_a_chain_in_fp32_an_input_read_twice_an_output_read_again():
    before = graph_with_data(
        """
    graph @g {
      input %x: bf16[s0,4]
      param %w: bf16[3,4]
      %y: bf16[s0,3] = aten.linear(%x, %w)
      %r: bf16[s0,3] = aten.relu(%y)
      %s: bf16[s0,3] = aten.mul.Tensor(%r, %r)
      %o: bf16[s0,3] = aten.add.Tensor(%s, %r)
      %z: bf16[s0,4] = aten.neg(%x)
      return %r, %o, %z
    }""",
        w=W,
    )
    graph = check_pipeline(
        before,
        PASS,
        """
    graph @g {
      input %x: bf16[s0,4]
      param %w: bf16[3,4]
      param %w_f16: f16[3,4]
      %0: f32[s0,4] = xir.convert(%x) {dtype=f32}
      %1: f32[s0,3] = xir.linear_f16w(%0, %w_f16)
      %2: f32[s0,3] = aten.relu(%1)
      %3: bf16[s0,3] = xir.convert(%2) {dtype=bf16}
      %4: f32[s0,3] = aten.mul.Tensor(%2, %2)
      %5: f32[s0,3] = aten.add.Tensor(%4, %2)
      %6: bf16[s0,3] = xir.convert(%5) {dtype=bf16}
      %7: f32[s0,4] = aten.neg(%0)
      %8: bf16[s0,4] = xir.convert(%7) {dtype=bf16}
      return %3, %6, %8
    }""",
        changed=True,
    )
    # (the bf16 weight no longer read stays in the IR; the write-back deletes it from the program)
    # the linear's weight is held in fp16, half the bytes of fp32: every value of W but 1e-6 (an
    # fp16 subnormal, within 2**-25) exactly
    w16 = graph.input_named("w_f16").data
    assert w16.dtype is torch.float16
    assert (w16.float() - W.float()).abs().max() <= 2**-25
    assert torch.equal(w16.float()[W.float().abs() >= 2**-14], W.float()[W.float().abs() >= 2**-14])


def test_a_linears_weight_in_fp16_shared_tied_beyond_range_with_a_bias_and_off():
    """Linears read their bf16 weights as fp16 constants: one twin for a weight two linears share,
    the bf16 original kept for an embedding reading it too (a tied head); a weight beyond fp16's
    range and a bias stay fp32 twins; ``f16_weights=false`` gives fp32 weights throughout."""
    text = """
    graph @g {
      input %t: i64[2]
      input %x: bf16[2,4]
      param %w: bf16[3,4]
      param %big: bf16[4,3]
      param %b: bf16[4]
      %e: bf16[2,4] = aten.embedding(%w, %t)
      %s: bf16[2,4] = aten.add.Tensor(%x, %e)
      %y1: bf16[2,3] = aten.linear(%s, %w)
      %y2: bf16[2,3] = aten.linear(%x, %w)
      %y: bf16[2,3] = aten.add.Tensor(%y1, %y2)
      %z: bf16[2,4] = aten.linear(%y, %big, %b)
      return %y, %z
    }"""
    big = torch.full((4, 3), 2.0**17, dtype=torch.bfloat16)
    bias = torch.tensor([0.5, -1.0, 2.0, 0.0], dtype=torch.bfloat16)
    graph = check_pipeline(
        graph_with_data(text, w=W, big=big, b=bias),
        PASS,
        """
    graph @g {
      input %t: i64[2]
      input %x: bf16[2,4]
      param %w: bf16[3,4]
      param %big: bf16[4,3]
      param %b: bf16[4]
      param %w_f16: f16[3,4]
      param %big_f32: f32[4,3]
      param %b_f32: f32[4]
      %0: f32[2,4] = xir.convert(%x) {dtype=f32}
      %e: bf16[2,4] = aten.embedding(%w, %t)
      %1: f32[2,4] = xir.convert(%e) {dtype=f32}
      %2: f32[2,4] = aten.add.Tensor(%0, %1)
      %3: f32[2,3] = xir.linear_f16w(%2, %w_f16)
      %4: f32[2,3] = xir.linear_f16w(%0, %w_f16)
      %5: f32[2,3] = aten.add.Tensor(%3, %4)
      %6: bf16[2,3] = xir.convert(%5) {dtype=bf16}
      %7: f32[2,4] = aten.linear(%5, %big_f32, %b_f32)
      %8: bf16[2,4] = xir.convert(%7) {dtype=bf16}
      return %6, %8
    }""",
        changed=True,
    )
    assert graph.input_named("b_f32").data.dtype is torch.float32
    off = "xnnpack.bf16-activations-in-fp32{enable_bf16=true,f16_weights=false},dead-code-elimination"
    graph = check_pipeline(
        graph_with_data(text, w=W, big=big, b=bias),
        off,
        """
    graph @g {
      input %t: i64[2]
      input %x: bf16[2,4]
      param %w: bf16[3,4]
      param %big: bf16[4,3]
      param %b: bf16[4]
      param %w_f32: f32[3,4]
      param %big_f32: f32[4,3]
      param %b_f32: f32[4]
      %0: f32[2,4] = xir.convert(%x) {dtype=f32}
      %e: bf16[2,4] = aten.embedding(%w, %t)
      %1: f32[2,4] = xir.convert(%e) {dtype=f32}
      %2: f32[2,4] = aten.add.Tensor(%0, %1)
      %3: f32[2,3] = aten.linear(%2, %w_f32)
      %4: f32[2,3] = aten.linear(%0, %w_f32)
      %5: f32[2,3] = aten.add.Tensor(%3, %4)
      %6: bf16[2,3] = xir.convert(%5) {dtype=bf16}
      %7: f32[2,4] = aten.linear(%5, %big_f32, %b_f32)
      %8: bf16[2,4] = xir.convert(%7) {dtype=bf16}
      return %6, %8
    }""",
        changed=True,
    )


def test_an_op_left_in_bf16_a_value_rounded_from_fp32_a_weight_layout_and_a_cast():
    before = graph_with_data(
        """
    graph @g {
      input %t: i64[2]
      input %f: f32[2,4]
      param %w: bf16[3,4]
      %e: bf16[2,4] = aten.embedding(%w, %t)
      %c: bf16[2,4] = xir.convert(%f) {dtype=bf16}
      %a: bf16[2,4] = aten.add.Tensor(%e, %c)
      %wt: bf16[4,3] = aten.permute_copy(%w) {dims=[1, 0]}
      %m: bf16[2,3] = aten.mm(%a, %wt)
      %h: bf16[2,3] = aten._to_copy(%m) {dtype=bf16}
      %n: bf16[2,3] = aten.neg(%h)
      return %n
    }""",
        w=W,
    )
    check_pipeline(
        before,
        PASS,
        """
    graph @g {
      input %t: i64[2]
      input %f: f32[2,4]
      param %w: bf16[3,4]
      param %w_f32: f32[3,4]
      %e: bf16[2,4] = aten.embedding(%w, %t)
      %0: f32[2,4] = xir.convert(%e) {dtype=f32}
      %1: f32[2,4] = aten.add.Tensor(%0, %f)
      %2: f32[4,3] = aten.permute_copy(%w_f32) {dims=[1, 0]}
      %3: f32[2,3] = aten.mm(%1, %2)
      %4: bf16[2,3] = xir.convert(%3) {dtype=bf16}
      %h: bf16[2,3] = aten._to_copy(%4) {dtype=bf16}
      %5: f32[2,3] = xir.convert(%h) {dtype=f32}
      %6: f32[2,3] = aten.neg(%5)
      %7: bf16[2,3] = xir.convert(%6) {dtype=bf16}
      return %7
    }""",
        changed=True,
    )
    (rewrite,) = [p for p in parse_pipeline(PASS) if p.name == "xnnpack.bf16-activations-in-fp32"]
    rewrite.run(
        graph_with_data("""
    graph @g {
      input %x: bf16[2,3]
      %h: bf16[2,3] = aten._to_copy(%x) {dtype=bf16}
      return %h
    }""")
    )
    declined = " ".join(rewrite.last_stats.declined["bf16_activations_in_fp32"])
    assert "dtype attribute" in declined


def test_nothing_in_bf16_and_off_without_enable_bf16():
    fp32 = """
    graph @g {
      input %x: f32[2,4]
      %r: f32[2,4] = aten.relu(%x)
      %c: bf16[2,4] = xir.convert(%r) {dtype=bf16}
      return %c
    }"""
    check_pipeline(graph_with_data(fp32), PASS, fp32, changed=False)
    bf16 = """
    graph @g {
      input %x: bf16[2,4]
      %r: bf16[2,4] = aten.relu(%x)
      return %r
    }"""
    check_pipeline(graph_with_data(bf16), "xnnpack.bf16-activations-in-fp32", bf16, changed=False)


def test_a_bf16_bmm_with_an_fp32_result_reads_the_fp32_values():
    """``xnnpack.bf16-bmm-f32-output``'s bf16 x bf16 -> fp32 bmm, both operands made in fp32 here
    (one a graph input read by another op too: one convert, at the top), becomes an fp32 bmm."""
    check_pipeline(
        graph_with_data("""
    graph @g {
      input %a: bf16[2,s0,4]
      input %b: bf16[2,4,3]
      %r: bf16[2,s0,4] = aten.relu(%a)
      %n: bf16[2,4,3] = aten.neg(%b)
      %m: f32[2,s0,3] = xir.bmm_f32out(%r, %n)
      %c: bf16[2,s0,3] = xir.convert(%m) {dtype=bf16}
      %t: bf16[2,4,3] = aten.tanh(%b)
      return %c, %t
    }"""),
        PASS,
        """
    graph @g {
      input %a: bf16[2,s0,4]
      input %b: bf16[2,4,3]
      %0: f32[2,4,3] = xir.convert(%b) {dtype=f32}
      %1: f32[2,s0,4] = xir.convert(%a) {dtype=f32}
      %2: f32[2,s0,4] = aten.relu(%1)
      %3: f32[2,4,3] = aten.neg(%0)
      %4: f32[2,s0,3] = aten.bmm(%2, %3)
      %c: bf16[2,s0,3] = xir.convert(%4) {dtype=bf16}
      %5: f32[2,4,3] = aten.tanh(%0)
      %6: bf16[2,4,3] = xir.convert(%5) {dtype=bf16}
      return %c, %6
    }""",
        changed=True,
    )


def test_a_converted_constant_layout_and_a_table_row_at_a_run_time_position():
    """A bf16 constant's layout converted to fp32 (a rotary table's view read by an fp32 multiply)
    becomes the same layout of the fp32 constant; a row picked at a run-time position (a slice
    whose bound is a value) is no constant layout: it stays, converted once for its two readers."""
    table = torch.arange(12, dtype=torch.bfloat16).reshape(4, 3) / 7
    check_pipeline(
        graph_with_data(
            """
    graph @g {
      input %x: f32[2,3]
      input %pos: i64[]
      param %t: bf16[4,3]
      %v: bf16[3,4] = aten.permute_copy(%t) {dims=[1, 0]}
      %c: f32[3,4] = xir.convert(%v) {dtype=f32}
      %m: f32[2,4] = aten.mm(%x, %c)
      %p: int = aten._local_scalar_dense(%pos)
      %e: int = _operator.add(%p, %p)
      %r: bf16[2,3] = aten.slice_copy.Tensor(%t) {dim=0, start=%p, end=%e}
      %a: bf16[2,3] = aten.relu(%r)
      %b: bf16[2,3] = aten.neg(%r)
      return %m, %a, %b
    }""",
            t=table,
        ),
        PASS,
        """
    graph @g {
      input %x: f32[2,3]
      input %pos: i64[]
      param %t: bf16[4,3]
      param %t_f32: f32[4,3]
      %0: f32[3,4] = aten.permute_copy(%t_f32) {dims=[1, 0]}
      %m: f32[2,4] = aten.mm(%x, %0)
      %p: int = aten._local_scalar_dense(%pos)
      %e: int = _operator.add(%p, %p)
      %r: bf16[2,3] = aten.slice_copy.Tensor(%t) {dim=0, start=%p, end=%e}
      %1: f32[2,3] = xir.convert(%r) {dtype=f32}
      %2: f32[2,3] = aten.relu(%1)
      %3: bf16[2,3] = xir.convert(%2) {dtype=bf16}
      %4: f32[2,3] = aten.neg(%1)
      %5: bf16[2,3] = xir.convert(%4) {dtype=bf16}
      return %m, %3, %5
    }""",
        changed=True,
    )
