"""IR-text tests of xnnpack.bmm-distinct-operands: a bmm reading one permute's result twice gets a
second permute of the same input for its second operand (XNNPACK multiplies wrong when one
transpose feeds both operands). One case per boundary (the permute of a graph input, also returned,
read by another op) and the declined ones. End to end:
tests/lowering/test_fuzz_regressions.py::test_a_bmm_reading_one_permute_twice_reads_two."""

from __future__ import annotations

import pytest

import lowering  # noqa: F401  (registers the xnnpack.* passes)
from passes.testing import check_pipeline

PIPELINE = "xnnpack.bmm-distinct-operands"


def case(name, before, expected=None, pipeline=PIPELINE):
    return pytest.param(before, expected if expected is not None else before, expected is not None, pipeline, id=name)


CASES = [
    case(
        "permute-of-a-graph-input",
        """
    graph @g {
      input %x: f32[2,2,8]
      %p: f32[8,2,2] = aten.permute_copy(%x) {dims=[2, 1, 0]}
      %y: f32[8,2,2] = aten.bmm(%p, %p)
      return %y
    }""",
        """
    graph @g {
      input %x: f32[2,2,8]
      %0: f32[8,2,2] = aten.permute_copy(%x) {dims=[2, 1, 0]}
      %1: f32[8,2,2] = aten.permute_copy(%x) {dims=[2, 1, 0]}
      %2: f32[8,2,2] = aten.bmm(%0, %1)
      return %2
    }""",
    ),
    case(
        "permute-also-returned-and-read-by-another-op",
        """
    graph @g {
      input %x: bf16[2,2,8]
      %a: bf16[2,2,8] = aten.abs(%x)
      %p: bf16[8,2,2] = aten.permute_copy(%a) {dims=[2, 1, 0]}
      %y: bf16[8,2,2] = aten.bmm(%p, %p)
      %n: bf16[8,2,2] = aten.neg(%p)
      return %y, %p, %n
    }""",
        """
    graph @g {
      input %x: bf16[2,2,8]
      %0: bf16[2,2,8] = aten.abs(%x)
      %1: bf16[8,2,2] = aten.permute_copy(%0) {dims=[2, 1, 0]}
      %2: bf16[8,2,2] = aten.permute_copy(%0) {dims=[2, 1, 0]}
      %3: bf16[8,2,2] = aten.bmm(%1, %2)
      %4: bf16[8,2,2] = aten.neg(%1)
      return %3, %1, %4
    }""",
    ),
    case(
        "declined-two-different-values",
        """
    graph @g {
      input %x: f32[2,2,8]
      %p: f32[8,2,2] = aten.permute_copy(%x) {dims=[2, 1, 0]}
      %q: f32[8,2,2] = aten.abs(%p)
      %y: f32[8,2,2] = aten.bmm(%p, %q)
      return %y
    }""",
    ),
    case(
        "declined-one-value-not-a-permute",
        """
    graph @g {
      input %x: f32[8,2,2]
      %a: f32[8,2,2] = aten.abs(%x)
      %y: f32[8,2,2] = aten.bmm(%a, %a)
      return %y
    }""",
    ),
    case(
        "declined-bf16-without-enable-bf16",
        """
    graph @g {
      input %x: bf16[2,2,8]
      %p: bf16[8,2,2] = aten.permute_copy(%x) {dims=[2, 1, 0]}
      %y: bf16[8,2,2] = aten.bmm(%p, %p)
      return %y
    }""",
        pipeline="xnnpack.bmm-distinct-operands{enable_bf16=false}",
    ),
]


@pytest.mark.parametrize("before,expected,changed,pipeline", CASES)
def test_bmm_distinct_operands(before, expected, changed, pipeline):
    check_pipeline(before, pipeline, expected, changed=changed)
