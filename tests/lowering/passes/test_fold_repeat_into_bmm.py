"""IR-text tests of xnnpack.fold-repeat-into-bmm: grouped-query attention's repeat of K/V heads read by a
bmm without the repeat. One case per graph boundary (graph output, graph input, constant, several
uses) and the cases the pass declines. The numbers are checked end to end in
tests/lowering/test_attention.py (GQA and MQA, prefill and decode shapes, fp32 and bf16)."""

from __future__ import annotations

import pytest

from passes.testing import case, check_pipeline

PIPELINE = "xnnpack.fold-repeat-into-bmm"


# transformers' repeat_kv then q @ k.transpose(-1, -2) * scale, as the edge dialect has it
KEYS = """
graph @g {
  input %q: f32[6,5,4]
  input %k: f32[1,2,8,4]
  %a: f32[1,2,1,8,4] = aten.view_copy(%k) {size=[1, 2, 1, 8, 4]}
  %b: f32[1,2,3,8,4] = aten.expand_copy(%a) {size=[1, 2, 3, 8, 4]}
  %c: f32[1,2,3,8,4] = dim_order_ops._clone_dim_order(%b) {dim_order=[0, 1, 2, 3, 4]}
  %d: f32[1,6,8,4] = aten.view_copy(%c) {size=[1, 6, 8, 4]}
  %e: f32[1,6,4,8] = aten.permute_copy(%d) {dims=[0, 1, 3, 2]}
  %f: f32[1,6,4,8] = aten.mul.Scalar(%e) {other=0.5}
  %g: f32[6,4,8] = aten.view_copy(%f) {size=[6, 4, 8]}
  %h: f32[6,5,8] = aten.bmm(%q, %g)
  return %h
}"""

KEYS_FOLDED = """
graph @g {
  input %q: f32[6,5,4]
  input %k: f32[1,2,8,4]
  %0: f32[1,2,1,8,4] = aten.view_copy(%k) {size=[1, 2, 1, 8, 4]}
  %1: f32[2,8,4] = aten.view_copy(%0) {size=[2, 8, 4]}
  %2: f32[2,4,8] = aten.permute_copy(%1) {dims=[0, 2, 1]}
  %3: f32[2,4,8] = aten.mul.Scalar(%2) {other=0.5}
  %4: f32[2,15,4] = aten.view_copy(%q) {size=[2, 15, 4]}
  %5: f32[2,15,8] = aten.bmm(%4, %3)
  %6: f32[6,5,8] = aten.view_copy(%5) {size=[6, 5, 8]}
  return %6
}"""

CASES = [
    case("keys-of-grouped-query-attention-bmm-result-is-output-repeat-operand-is-input", KEYS, KEYS_FOLDED),
    # (ExecuTorch's LLM flow without its custom SDPA: a symbolic number of queries over the static cache)
    case(
        "symbolic-query-rows",
        KEYS.replace("%q: f32[6,5,4]", "%q: f32[6,s0,4]").replace("f32[6,5,8]", "f32[6,s0,8]"),
        KEYS_FOLDED.replace("%q: f32[6,5,4]", "%q: f32[6,s0,4]")
        .replace("f32[6,5,8]", "f32[6,s0,8]")
        .replace(
            "%4: f32[2,15,4] = aten.view_copy(%q) {size=[2, 15, 4]}",
            "%4: f32[2,3*s0,4] = aten.view_copy(%q) {size=[2, -1, 4]}",
        )
        .replace("%5: f32[2,15,8]", "%5: f32[2,3*s0,8]")
        .replace("{size=[6, 5, 8]}", "{size=[6, -1, 8]}"),
    ),
    case(
        "values-multi-query-repeat-operand-is-constant",
        """
    graph @g {
      param %v: f32[1,1,8,4]
      input %p: f32[1,4,5,8]
      %a: f32[1,1,1,8,4] = aten.view_copy(%v) {size=[1, 1, 1, 8, 4]}
      %b: f32[1,1,4,8,4] = aten.expand_copy(%a) {size=[1, 1, 4, 8, 4]}
      %c: f32[1,4,8,4] = aten.view_copy(%b) {size=[1, 4, 8, 4]}
      %d: f32[4,8,4] = aten.view_copy(%c) {size=[4, 8, 4]}
      %e: f32[4,5,8] = aten.view_copy(%p) {size=[4, 5, 8]}
      %f: f32[4,5,4] = aten.bmm(%e, %d)
      %g: f32[1,4,5,4] = aten.view_copy(%f) {size=[1, 4, 5, 4]}
      %h: f32[1,4,5,4] = aten.relu(%g)
      return %h
    }""",
        """
    graph @g {
      param %v: f32[1,1,8,4]
      input %p: f32[1,4,5,8]
      %0: f32[1,1,1,8,4] = aten.view_copy(%v) {size=[1, 1, 1, 8, 4]}
      %1: f32[4,5,8] = aten.view_copy(%p) {size=[4, 5, 8]}
      %2: f32[1,8,4] = aten.view_copy(%0) {size=[1, 8, 4]}
      %3: f32[1,20,8] = aten.view_copy(%1) {size=[1, 20, 8]}
      %4: f32[1,20,4] = aten.bmm(%3, %2)
      %5: f32[4,5,4] = aten.view_copy(%4) {size=[4, 5, 4]}
      %6: f32[1,4,5,4] = aten.view_copy(%5) {size=[1, 4, 5, 4]}
      %7: f32[1,4,5,4] = aten.relu(%6)
      return %7
    }""",
    ),
    case(
        "repeated-keys-have-other-users-the-repeat-stays-for-them",
        """
    graph @g {
      input %q: f32[4,5,4]
      input %k: f32[2,8,4]
      %a: f32[2,1,8,4] = aten.view_copy(%k) {size=[2, 1, 8, 4]}
      %b: f32[2,2,8,4] = aten.expand_copy(%a) {size=[2, 2, 8, 4]}
      %c: f32[4,8,4] = aten.view_copy(%b) {size=[4, 8, 4]}
      %d: f32[4,4,8] = aten.permute_copy(%c) {dims=[0, 2, 1]}
      %e: f32[4,4,8] = aten.div.Tensor(%d, %s)
      %h: f32[4,5,8] = aten.bmm(%q, %e)
      return %h, %c
    }""".replace("input %k: f32[2,8,4]", "input %k: f32[2,8,4]\n      input %s: f32[]"),
        """
    graph @g {
      input %q: f32[4,5,4]
      input %k: f32[2,8,4]
      input %s: f32[]
      %0: f32[2,1,8,4] = aten.view_copy(%k) {size=[2, 1, 8, 4]}
      %1: f32[2,2,8,4] = aten.expand_copy(%0) {size=[2, 2, 8, 4]}
      %2: f32[4,8,4] = aten.view_copy(%1) {size=[4, 8, 4]}
      %3: f32[2,8,4] = aten.view_copy(%0) {size=[2, 8, 4]}
      %4: f32[2,4,8] = aten.permute_copy(%3) {dims=[0, 2, 1]}
      %5: f32[2,4,8] = aten.div.Tensor(%4, %s)
      %6: f32[2,10,4] = aten.view_copy(%q) {size=[2, 10, 4]}
      %7: f32[2,10,8] = aten.bmm(%6, %5)
      %8: f32[4,5,8] = aten.view_copy(%7) {size=[4, 5, 8]}
      return %8, %2
    }""",
    ),
    case(
        "bf16-values-cast-to-f32-as-sdpa-computes-them",
        """
    graph @g {
      input %p: f32[1,4,1,8]
      input %v: bf16[1,2,8,4]
      %a: bf16[1,2,1,8,4] = aten.view_copy(%v) {size=[1, 2, 1, 8, 4]}
      %b: bf16[1,2,2,8,4] = aten.expand_copy(%a) {size=[1, 2, 2, 8, 4]}
      %c: bf16[1,4,8,4] = aten.view_copy(%b) {size=[1, 4, 8, 4]}
      %d: f32[1,4,8,4] = dim_order_ops._to_dim_order_copy(%c) {dtype=f32, dim_order=[0, 1, 2, 3]}
      %e: f32[4,8,4] = aten.view_copy(%d) {size=[4, 8, 4]}
      %f: f32[4,1,8] = aten.view_copy(%p) {size=[4, 1, 8]}
      %h: f32[4,1,4] = aten.bmm(%f, %e)
      return %h
    }""",
        """
    graph @g {
      input %p: f32[1,4,1,8]
      input %v: bf16[1,2,8,4]
      %0: bf16[1,2,1,8,4] = aten.view_copy(%v) {size=[1, 2, 1, 8, 4]}
      %1: f32[4,1,8] = aten.view_copy(%p) {size=[4, 1, 8]}
      %2: bf16[2,8,4] = aten.view_copy(%0) {size=[2, 8, 4]}
      %3: f32[2,8,4] = dim_order_ops._to_dim_order_copy(%2) {dtype=f32, dim_order=[0, 1, 2]}
      %4: f32[2,2,8] = aten.view_copy(%1) {size=[2, 2, 8]}
      %5: f32[2,2,4] = aten.bmm(%4, %3)
      %6: f32[4,1,4] = aten.view_copy(%5) {size=[4, 1, 4]}
      return %6
    }""",
    ),
    # declines
    case(
        "the-repeat-is-the-outer-batch-dim",
        """
    graph @g {
      input %q: f32[6,5,8]
      input %k: f32[1,1,2,8,4]
      %b: f32[1,3,2,8,4] = aten.expand_copy(%k) {size=[1, 3, 2, 8, 4]}
      %c: f32[6,8,4] = aten.view_copy(%b) {size=[6, 8, 4]}
      %h: f32[6,5,4] = aten.bmm(%q, %c)
      return %h
    }""",
    ),
    case(
        "a-permute-moves-batch-dims",
        """
    graph @g {
      input %q: f32[6,5,8]
      input %k: f32[2,1,8,4]
      %b: f32[2,3,8,4] = aten.expand_copy(%k) {size=[2, 3, 8, 4]}
      %c: f32[3,2,8,4] = aten.permute_copy(%b) {dims=[1, 0, 2, 3]}
      %d: f32[6,8,4] = aten.view_copy(%c) {size=[6, 8, 4]}
      %h: f32[6,5,4] = aten.bmm(%q, %d)
      return %h
    }""",
    ),
    case(
        "two-repeated-dims",
        """
    graph @g {
      input %q: f32[6,5,8]
      input %k: f32[2,1,8,1]
      %b: f32[2,3,8,4] = aten.expand_copy(%k) {size=[2, 3, 8, 4]}
      %c: f32[6,8,4] = aten.view_copy(%b) {size=[6, 8, 4]}
      %h: f32[6,5,4] = aten.bmm(%q, %c)
      return %h
    }""",
    ),
    case(
        "the-batch-takes-rows-of-the-repeated-tensor",
        """
    graph @g {
      input %q: f32[8,5,2]
      input %k: f32[2,1,4,4]
      %b: f32[2,2,4,4] = aten.expand_copy(%k) {size=[2, 2, 4, 4]}
      %c: f32[8,2,4] = aten.view_copy(%b) {size=[8, 2, 4]}
      %h: f32[8,5,4] = aten.bmm(%q, %c)
      return %h
    }""",
    ),
    case(
        "a-multiply-by-a-tensor-between",
        """
    graph @g {
      input %q: f32[4,5,4]
      input %k: f32[2,1,8,4]
      input %w: f32[2,2,8,4]
      %b: f32[2,2,8,4] = aten.expand_copy(%k) {size=[2, 2, 8, 4]}
      %m: f32[2,2,8,4] = aten.mul.Tensor(%b, %w)
      %c: f32[4,8,4] = aten.view_copy(%m) {size=[4, 8, 4]}
      %h: f32[4,5,8] = aten.bmm(%q, %c)
      return %h
    }""".replace(
            "%h: f32[4,5,8] = aten.bmm(%q, %c)",
            "%t: f32[4,4,8] = aten.permute_copy(%c) {dims=[0, 2, 1]}\n      %h: f32[4,5,8] = aten.bmm(%q, %t)",
        ),
    ),
    case(
        "the-repeat-is-on-the-left-operand",
        """
    graph @g {
      input %q: f32[1,5,4]
      input %k: f32[2,4,8]
      %b: f32[2,5,4] = aten.expand_copy(%q) {size=[2, 5, 4]}
      %h: f32[2,5,8] = aten.bmm(%b, %k)
      return %h
    }""",
    ),
]


@pytest.mark.parametrize("before, expected, changed", CASES)
def test_fold_repeat_into_bmm(before, expected, changed):
    check_pipeline(before, PIPELINE, expected, changed=changed)
