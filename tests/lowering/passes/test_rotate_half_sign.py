"""IR-text tests of ``xnnpack.rotate-half-sign-in-sin``: Hugging Face's ``rotate_half`` (two
last-dim slices, the upper half negated, concatenated) read by products with a sine table becomes
cat([x, x])[..., h:3h] times the table with the sign folded in (one signed table per table and
run, one sign constant per width and dtype). At the boundaries: a symbolic sequence length, the
rotated tensor a graph input that is also an output, a table that is a constant, q and k sharing a
table, bf16, the numbers bit for bit; declined: the concatenation a graph output or read by
another op, the negation on the other half, halves of two tensors, slices that are not halves."""

from __future__ import annotations

import pytest
import torch

from passes.testing import check_declined, check_pipeline

PASS = "xnnpack.rotate-half-sign-in-sin,dead-code-elimination"

ROTATE = """
    graph @g {{
      input %x: {t}[1,s0,2,8]
      input %s: {t}[s0,1,8]
      input %c: {t}[s0,1,8]
      input %other: {t}[1,s0,2,8]
      %x1: {t}[1,s0,2,4] = aten.slice_copy.Tensor(%x) {{dim=3, start={lower_start}, end={lower_end}}}
      %x2: {t}[1,s0,2,4] = aten.slice_copy.Tensor({upper_of}) {{dim=-1, start=4, end=9223372036854775807}}
      %n: {t}[1,s0,2,4] = aten.neg({negated})
      %r: {t}[1,s0,2,8] = aten.cat({pieces}) {{dim=-1}}
      %xc: {t}[1,s0,2,8] = aten.mul.Tensor(%x, %c)
      %rs: {t}[1,s0,2,8] = aten.{reader}(%r, %s)
      %y: {t}[1,s0,2,8] = aten.add.Tensor(%xc, %rs)
      return %y, %x{extra}
    }}"""


def rotate(t="f32", upper_of="%x", lower_start=0, negated="%x2", pieces="%n, %x1", reader="mul.Tensor", extra=""):
    return ROTATE.format(
        t=t,
        upper_of=upper_of,
        lower_start=lower_start,
        lower_end=lower_start + 4,
        negated=negated,
        pieces=pieces,
        reader=reader,
        extra=extra,
    )


ROTATED = """
    graph @g {{
      input %x: {t}[1,s0,2,8]
      input %s: {t}[s0,1,8]
      input %c: {t}[s0,1,8]
      input %other: {t}[1,s0,2,8]
      param %rotate_half_sign_8: {t}[8]
      %0: {t}[s0,1,8] = aten.mul.Tensor(%s, %rotate_half_sign_8)
      %1: {t}[1,s0,2,16] = aten.cat(%x, %x) {{dim=-1}}
      %2: {t}[1,s0,2,8] = {slice}
      %xc: {t}[1,s0,2,8] = aten.mul.Tensor(%x, %c)
      %rs: {t}[1,s0,2,8] = aten.mul.Tensor(%2, %0)
      %y: {t}[1,s0,2,8] = aten.add.Tensor(%xc, %rs)
      return %y, %x
    }}"""
XIR_SLICE = "xir.slice(%1) {dim=3, start=4, end=12}"
SLICE_COPY = "aten.slice_copy.Tensor(%1) {dim=3, start=4, end=12, step=1}"


@pytest.mark.parametrize(
    "t, options, made",
    [
        ("f32", "", XIR_SLICE),
        ("bf16", "", XIR_SLICE),
        # bf16 stays outside XNNPACK without enable_bf16, where xir.slice has no kernel: a slice_copy, which the
        # write-back types at a symbolic length (test_writeback_symbolic.py runs the pass on a program)
        ("bf16", "{enable_bf16=false}", SLICE_COPY),
    ],
)
def test_rotate_half_as_a_doubled_slice_symbolic_and_an_input_that_is_an_output(t, options, made):
    """At a symbolic length the slice is slice_op's: xir.slice where XNNPACK takes it (no later pass
    needed for the program to be written back and delegated), else a slice_copy."""
    graph = check_pipeline(
        rotate(t=t), PASS.replace(",", options + ",", 1), ROTATED.format(t=t, slice=made), changed=True
    )
    assert torch.equal(graph.input_named("rotate_half_sign_8").data.float(), torch.tensor([-1.0] * 4 + [1.0] * 4))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_rewrite_computes_the_same_numbers(dtype):
    """rotate_half and its rewrite, run on the same tensors with torch: equal bit for bit."""
    x, s = torch.randn(1, 5, 2, 8, dtype=dtype), torch.randn(5, 1, 8, dtype=dtype)
    expected = torch.cat((-x[..., 4:], x[..., :4]), -1) * s
    sign = torch.tensor([-1.0] * 4 + [1.0] * 4, dtype=dtype)
    assert torch.equal(torch.cat((x, x), -1)[..., 4:12] * (s * sign), expected)


def test_q_and_k_share_one_signed_table_which_is_a_constant_and_bf16():
    text = """
    graph @g {
      input %q: bf16[1,3,4,8]
      input %k: bf16[1,3,2,8]
      param %sin: bf16[3,1,8]
    """
    for name in ("q", "k"):
        heads = 4 if name == "q" else 2
        text += f"""
      %{name}1: bf16[1,3,{heads},4] = aten.slice_copy.Tensor(%{name}) {{dim=-1, start=0, end=4}}
      %{name}2: bf16[1,3,{heads},4] = aten.slice_copy.Tensor(%{name}) {{dim=3, start=-4}}
      %{name}n: bf16[1,3,{heads},4] = aten.neg(%{name}2)
      %{name}r: bf16[1,3,{heads},8] = aten.cat(%{name}n, %{name}1) {{dim=3}}
      %{name}y: bf16[1,3,{heads},8] = aten.mul.Tensor(%sin, %{name}r)
    """
    text += "  return %qy, %ky\n}\n"
    graph = check_pipeline(
        text,
        PASS,
        """
    graph @g {
      input %q: bf16[1,3,4,8]
      input %k: bf16[1,3,2,8]
      param %sin: bf16[3,1,8]
      param %rotate_half_sign_8: bf16[8]
      %0: bf16[3,1,8] = aten.mul.Tensor(%sin, %rotate_half_sign_8)
      %1: bf16[1,3,4,16] = aten.cat(%q, %q) {dim=3}
      %2: bf16[1,3,4,8] = aten.slice_copy.Tensor(%1) {dim=3, start=4, end=12, step=1}
      %qy: bf16[1,3,4,8] = aten.mul.Tensor(%0, %2)
      %3: bf16[1,3,2,16] = aten.cat(%k, %k) {dim=3}
      %4: bf16[1,3,2,8] = aten.slice_copy.Tensor(%3) {dim=3, start=4, end=12, step=1}
      %ky: bf16[1,3,2,8] = aten.mul.Tensor(%0, %4)
      return %qy, %ky
    }""",
        changed=True,
    )
    assert graph.input_named("rotate_half_sign_8").data.dtype == torch.bfloat16


def test_a_rotation_read_by_two_products_is_rewritten_for_both():
    text = """
    graph @g {
      input %x: f32[2,8]
      input %s: f32[2,8]
      input %t: f32[8]
      %x1: f32[2,4] = aten.slice_copy.Tensor(%x) {dim=1, start=0, end=4}
      %x2: f32[2,4] = aten.slice_copy.Tensor(%x) {dim=1, start=4, end=8}
      %n: f32[2,4] = aten.neg(%x2)
      %r: f32[2,8] = aten.cat(%n, %x1) {dim=1}
      %a: f32[2,8] = aten.mul.Tensor(%r, %s)
      %b: f32[2,8] = aten.mul.Tensor(%t, %r)
      return %a, %b, %n
    }"""
    check_pipeline(
        text,
        PASS,
        """
    graph @g {
      input %x: f32[2,8]
      input %s: f32[2,8]
      input %t: f32[8]
      param %rotate_half_sign_8: f32[8]
      %0: f32[8] = aten.mul.Tensor(%t, %rotate_half_sign_8)
      %1: f32[2,8] = aten.mul.Tensor(%s, %rotate_half_sign_8)
      %x2: f32[2,4] = aten.slice_copy.Tensor(%x) {dim=1, start=4, end=8}
      %n: f32[2,4] = aten.neg(%x2)
      %2: f32[2,16] = aten.cat(%x, %x) {dim=1}
      %3: f32[2,8] = aten.slice_copy.Tensor(%2) {dim=1, start=4, end=12, step=1}
      %a: f32[2,8] = aten.mul.Tensor(%3, %1)
      %b: f32[2,8] = aten.mul.Tensor(%0, %3)
      return %a, %b, %n
    }""",
        changed=True,
    )


def test_a_table_of_rank_zero():
    """A scalar table broadcasts against the sign: the signed table is the sign times it."""
    check_pipeline(
        """
    graph @g {
      input %x: f32[2,8]
      input %t: f32[]
      %x1: f32[2,4] = aten.slice_copy.Tensor(%x) {dim=1, start=0, end=4}
      %x2: f32[2,4] = aten.slice_copy.Tensor(%x) {dim=1, start=4, end=8}
      %n: f32[2,4] = aten.neg(%x2)
      %r: f32[2,8] = aten.cat(%n, %x1) {dim=1}
      %a: f32[2,8] = aten.mul.Tensor(%r, %t)
      return %a
    }""",
        PASS,
        """
    graph @g {
      input %x: f32[2,8]
      input %t: f32[]
      param %rotate_half_sign_8: f32[8]
      %0: f32[8] = aten.mul.Tensor(%t, %rotate_half_sign_8)
      %1: f32[2,16] = aten.cat(%x, %x) {dim=1}
      %2: f32[2,8] = aten.slice_copy.Tensor(%1) {dim=1, start=4, end=12, step=1}
      %a: f32[2,8] = aten.mul.Tensor(%2, %0)
      return %a
    }""",
        changed=True,
    )


@pytest.mark.parametrize(
    "variant, reason",
    [
        (dict(extra=", %r"), "graph output"),
        (dict(reader="add.Tensor"), "not only by products"),
        (dict(pieces="%x1, %n"), "not two last-dim slices|first piece is not a negation"),
        (dict(upper_of="%other"), "not two last-dim slices of one tensor"),
        (dict(lower_start=2), "not the upper half then the lower half"),
    ],
)
def test_declined(variant, reason):
    check_declined(rotate(**variant), PASS, "rotate_half_sign_in_sin", reason)


def test_left_out_where_the_float_ops_stay_outside():
    """Its slice is xir.slice at a symbolic length, which runs only inside XNNPACK: without fp32 among
    the partitioner's precisions (the LLM flow's DQ-only stage) the pass is not in its pipeline, and
    otherwise it takes the partitioner's enable_bf16 (without it a bf16 slice stays a slice_copy)."""
    from executorch.backends.xnnpack.partition.config.xnnpack_config import ConfigPrecisionType

    from lowering import XnnpackPartitioner

    def passes(**options):
        return {p.name: p for p in XnnpackPartitioner(**options).pipeline}

    assert "xnnpack.rotate-half-sign-in-sin" not in passes(config_precisions=ConfigPrecisionType.DYNAMIC_QUANT)
    assert passes()["xnnpack.rotate-half-sign-in-sin"].enable_bf16 is False
    assert passes(enable_bf16=True)["xnnpack.rotate-half-sign-in-sin"].enable_bf16 is True
    assert passes(enable_bf16=True)["xnnpack.merge-head-chains"].enable_bf16 is True
    assert passes()["xnnpack.merge-head-chains"].enable_bf16 is False
