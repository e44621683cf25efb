"""``xnnpack.dynamic-mm-as-bmm``: an ``mm`` whose second operand is not a constant as a one-batch
``bmm`` between views (XNNPACK's fully connected takes only a constant weight; its batch matrix
multiply takes two dynamic operands), with the declines: a product smaller than ``SMALL_MM``
(2**20 multiply-adds) stays an ``mm``."""

from __future__ import annotations

import pytest

from passes.testing import case, check_declined, check_pipeline

CASES = [
    case(  # two graph inputs; the result is a graph output and read again (by a relu)
        "inputs-result-returned-and-read",
        """
    graph @g {
      input %a: f32[64,128]
      input %b: f32[128,128]
      %p: f32[64,128] = aten.mm(%a, %b)
      %r: f32[64,128] = aten.relu(%p)
      return %p, %r
    }""",
        """
    graph @g {
      input %a: f32[64,128]
      input %b: f32[128,128]
      %0: f32[1,64,128] = aten.view_copy(%a) {size=[1, 64, 128]}
      %1: f32[1,128,128] = aten.view_copy(%b) {size=[1, 128, 128]}
      %2: f32[1,64,128] = aten.bmm(%0, %1)
      %3: f32[64,128] = aten.view_copy(%2) {size=[64, 128]}
      %r: f32[64,128] = aten.relu(%3)
      return %3, %r
    }""",
    ),
    case(  # a constant first operand: the second is computed, so XNNPACK's linear cannot take it
        "constant-first-operand",
        """
    graph @g {
      input %x: f32[128,128]
      param %w: f32[64,128]
      %p: f32[64,128] = aten.mm(%w, %x)
      return %p
    }""",
        """
    graph @g {
      input %x: f32[128,128]
      param %w: f32[64,128]
      %0: f32[1,64,128] = aten.view_copy(%w) {size=[1, 64, 128]}
      %1: f32[1,128,128] = aten.view_copy(%x) {size=[1, 128, 128]}
      %2: f32[1,64,128] = aten.bmm(%0, %1)
      %3: f32[64,128] = aten.view_copy(%2) {size=[64, 128]}
      return %3
    }""",
    ),
    case(  # a symbolic row count: the views infer it (-1)
        "symbolic-rows",
        """
    graph @g {
      input %a: f32[s0,4]
      input %b: f32[4,5]
      %p: f32[s0,5] = aten.mm(%a, %b)
      return %p
    }""",
        """
    graph @g {
      input %a: f32[s0,4]
      input %b: f32[4,5]
      %0: f32[1,s0,4] = aten.view_copy(%a) {size=[1, -1, 4]}
      %1: f32[1,4,5] = aten.view_copy(%b) {size=[1, 4, 5]}
      %2: f32[1,s0,5] = aten.bmm(%0, %1)
      %3: f32[s0,5] = aten.view_copy(%2) {size=[-1, 5]}
      return %3
    }""",
    ),
]


@pytest.mark.parametrize("before, expected, changed", CASES)
def test_dynamic_mm_as_bmm(before, expected, changed):
    check_pipeline(before, "xnnpack.dynamic-mm-as-bmm", expected, changed=changed)


DECLINES = [
    (  # (64 x 128 x 128 = 2**20 multiply-adds is rewritten: the cases above)
        "small",
        """
    graph @g {
      input %a: f32[64,128]
      input %b: f32[128,127]
      %p: f32[64,127] = aten.mm(%a, %b)
      return %p
    }""",
        "a product of 1040384 multiply-adds",
    ),
    (
        "linear",
        """
    graph @g {
      input %a: f32[3,4]
      param %w: f32[4,5]
      %p: f32[3,5] = aten.mm(%a, %w)
      return %p
    }""",
        "its second operand is a constant",
    ),
    (
        "two-symbolic-dims",
        """
    graph @g {
      input %a: f32[s0,4]
      input %b: f32[4,s1]
      %p: f32[s0,s1] = aten.mm(%a, %b)
      return %p
    }""",
        "two symbolic dims in a view",
    ),
    (
        "integer",
        """
    graph @g {
      input %a: i64[3,4]
      input %b: i64[4,5]
      %p: i64[3,5] = aten.mm(%a, %b)
      return %p
    }""",
        "not 2-D float matrices",
    ),
    (
        "dequantized",
        """
    graph @g {
      input %a: f32[3,4]
      input %q: i8[4,5]
      %b: f32[4,5] = quantized_decomposed.dequantize_per_tensor(%q) {scale=0.1, zero_point=0, quant_min=-128, quant_max=127, dtype=i8}
      %p: f32[3,5] = aten.mm(%a, %b)
      return %p
    }""",
        "reads a dequantized tensor",
    ),
]


@pytest.mark.parametrize("before, reason", [pytest.param(b, r, id=n) for n, b, r in DECLINES])
def test_declines(before, reason):
    check_declined(before, "xnnpack.dynamic-mm-as-bmm", "dynamic_mm_as_bmm", reason)


BF16 = """
    graph @g {
      input %a: bf16[64,128]
      input %b: bf16[128,128]
      %p: bf16[64,128] = aten.mm(%a, %b)
      return %p
    }"""


def test_bf16_only_with_enable_bf16():
    check_declined(BF16, "xnnpack.dynamic-mm-as-bmm{enable_bf16=false}", "dynamic_mm_as_bmm", "bf16 is not enabled")
    check_pipeline(
        BF16,
        "xnnpack.dynamic-mm-as-bmm{enable_bf16=true}",
        """
    graph @g {
      input %a: bf16[64,128]
      input %b: bf16[128,128]
      %0: bf16[1,64,128] = aten.view_copy(%a) {size=[1, 64, 128]}
      %1: bf16[1,128,128] = aten.view_copy(%b) {size=[1, 128, 128]}
      %2: bf16[1,64,128] = aten.bmm(%0, %1)
      %3: bf16[64,128] = aten.view_copy(%2) {size=[64, 128]}
      return %3
    }""",
        changed=True,
    )
