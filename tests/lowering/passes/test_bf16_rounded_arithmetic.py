"""IR-text tests of ``xnnpack.bf16-rounded-arithmetic``: a bf16 arithmetic op whose result an op
XNNPACK takes reads becomes the op in fp32 between converts, so that the result is rounded to bf16
as eager rounds it (XNNPACK reads it unrounded). At the boundaries: a graph input read by several
ops (one convert), a constant operand (an fp32 twin), symbolic rows, a result that is a graph output
and read inside too, a result with several readers, a rounding pair that ``remove-no-ops`` must
keep; declined: a result only returned or read only outside XNNPACK, a clamp to bf16 bounds, ops
that only move or negate bf16 values; off without enable_bf16. The eager parity itself is proved
end to end in tests/lowering/test_bf16_rounding.py."""

from __future__ import annotations

import pytest
import torch

from passes.testing import check_pipeline, graph_with_data

PASS = "xnnpack.bf16-rounded-arithmetic{enable_bf16=true},xnnpack.remove-no-ops,common-subexpression-elimination,dead-code-elimination"
W = torch.tensor([1.5, -2.0, 0.375, 3.0], dtype=torch.bfloat16)


def test_a_chain_a_constant_operand_symbolic_rows_an_input_read_twice():
    """mul -> add -> neg -> sigmoid: the mul and the add are read inside, so each is computed in
    fp32 and rounded; x, read by both, is converted once; the constant gets an fp32 twin equal to
    it; the rounding pair between the mul and the add (bf16 -> f32 after f32 -> bf16) stays through
    remove-no-ops (it is the rounding, not a no-op); the neg only negates a bf16 value; the sigmoid's
    result is returned, and XNNPACK writes it rounded."""
    before = graph_with_data(
        """
    graph @g {
      input %x: bf16[s0,4]
      param %w: bf16[4]
      %m: bf16[s0,4] = aten.mul.Tensor(%x, %w)
      %a: bf16[s0,4] = aten.add.Tensor(%m, %x)
      %n: bf16[s0,4] = aten.neg(%a)
      %r: bf16[s0,4] = aten.sigmoid(%n)
      return %r
    }""",
        w=W,
    )
    graph = check_pipeline(
        before,
        PASS,
        """
    graph @g {
      input %x: bf16[s0,4]
      param %w: bf16[4]
      param %w_f32: f32[4]
      %0: f32[s0,4] = xir.convert(%x) {dtype=f32}
      %1: f32[s0,4] = aten.mul.Tensor(%0, %w_f32)
      %2: bf16[s0,4] = xir.convert(%1) {dtype=bf16}
      %3: f32[s0,4] = xir.convert(%2) {dtype=f32}
      %4: f32[s0,4] = aten.add.Tensor(%3, %0)
      %5: bf16[s0,4] = xir.convert(%4) {dtype=bf16}
      %6: bf16[s0,4] = aten.neg(%5)
      %7: bf16[s0,4] = aten.sigmoid(%6)
      return %7
    }""",
        changed=True,
    )
    assert torch.equal(graph.input_named("w_f32").data, W.float())


def test_a_result_that_is_an_output_and_has_several_readers():
    """The mul's result is returned and read by an add and a sub: rounded once, and the output, the
    add and the sub all read the rounded value; the add and the sub are only returned."""
    check_pipeline(
        """
    graph @g {
      input %x: bf16[2,4]
      %m: bf16[2,4] = aten.mul.Tensor(%x, %x)
      %a: bf16[2,4] = aten.add.Tensor(%m, %x)
      %b: bf16[2,4] = aten.sub.Tensor(%x, %m)
      return %m, %a, %b
    }""",
        PASS,
        """
    graph @g {
      input %x: bf16[2,4]
      %0: f32[2,4] = xir.convert(%x) {dtype=f32}
      %1: f32[2,4] = aten.mul.Tensor(%0, %0)
      %2: bf16[2,4] = xir.convert(%1) {dtype=bf16}
      %3: bf16[2,4] = aten.add.Tensor(%2, %x)
      %4: bf16[2,4] = aten.sub.Tensor(%x, %2)
      return %2, %3, %4
    }""",
        changed=True,
    )


def test_a_sum_read_only_by_a_cast_to_f32_and_outside():
    """The residual sum is read by a cast to f32 (RMSNorm's ``x.float()``, which
    casts-as-converts later makes a convert inside XNNPACK, reading it unrounded) and by a select
    left outside: rounded (found when hoist-row-select moved the last layer's residual add, the
    sum's only other reader, onto the select's row; Qwen3 bf16's logits then left eager's)."""
    check_pipeline(
        """
    graph @g {
      input %x: bf16[1,s0,4]
      input %y: bf16[1,s0,4]
      %h: bf16[1,s0,4] = aten.add.Tensor(%x, %y)
      %f: f32[1,s0,4] = aten._to_copy(%h) {dtype=f32}
      %n: f32[1,s0,4] = aten.mul.Tensor(%f, %f)
      %last: bf16[1,4] = aten.select_copy.int(%h) {dim=1, index=-1}
      return %n, %last
    }""",
        PASS,
        """
    graph @g {
      input %x: bf16[1,s0,4]
      input %y: bf16[1,s0,4]
      %0: f32[1,s0,4] = xir.convert(%x) {dtype=f32}
      %1: f32[1,s0,4] = xir.convert(%y) {dtype=f32}
      %2: f32[1,s0,4] = aten.add.Tensor(%0, %1)
      %3: bf16[1,s0,4] = xir.convert(%2) {dtype=bf16}
      %4: f32[1,s0,4] = aten._to_copy(%3) {dtype=f32}
      %5: f32[1,s0,4] = aten.mul.Tensor(%4, %4)
      %6: bf16[1,4] = aten.select_copy.int(%3) {dim=1, index=-1}
      return %5, %6
    }""",
        changed=True,
    )


def test_a_clamp_to_a_bound_bf16_cannot_hold():
    """clamp(x, min=0.1): eager clamps to 0.1 rounded to bf16; in fp32 between converts the result
    is rounded the same way."""
    check_pipeline(
        """
    graph @g {
      input %x: bf16[2,4]
      %c: bf16[2,4] = aten.clamp(%x) {min=0.1}
      %d: bf16[2,4] = aten.neg(%c)
      return %d
    }""",
        PASS,
        """
    graph @g {
      input %x: bf16[2,4]
      %0: f32[2,4] = xir.convert(%x) {dtype=f32}
      %1: f32[2,4] = aten.clamp(%0) {min=0.1}
      %2: bf16[2,4] = xir.convert(%1) {dtype=bf16}
      %3: bf16[2,4] = aten.neg(%2)
      return %3
    }""",
        changed=True,
    )


DECLINED = """
    graph @g {
      input %x: bf16[2,4]
      input %i: i64[3]
      %m: bf16[2,4] = aten.mul.Tensor(%x, %x)
      %e: bf16[3,4] = aten.embedding(%m, %i)
      %c: bf16[2,4] = aten.hardtanh(%x) {min_val=0.0, max_val=6.0}
      %d: bf16[2,4] = aten.neg(%c)
      %r: bf16[2,4] = aten.relu(%d)
      %h: bf16[2,4] = aten.sqrt(%x)
      return %e, %r, %h
    }"""


@pytest.mark.parametrize(
    "pipeline", [PASS, "xnnpack.bf16-rounded-arithmetic"], ids=["declined", "off-without-enable-bf16"]
)
def test_declined_and_off(pipeline):
    """Declined: a mul read only by an embedding (outside XNNPACK: what it reads is written
    rounded), a hardtanh to 0 and 6 (bf16 numbers: it only picks values), a neg and a relu (they
    only negate and pick), a sqrt that is only returned (XNNPACK writes it rounded). Without enable_bf16 the pass makes nothing (bf16 stays outside XNNPACK)."""
    check_pipeline(DECLINED, pipeline, DECLINED, changed=False)
