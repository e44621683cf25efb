"""IR-text tests of ``xnnpack.select-as-slice``: a select of one index of a static dim becomes a
slice of length 1 and a view, at each graph boundary (graph output, graph input, constant, several
uses), with a symbolic dim elsewhere, and the cases it declines."""

from __future__ import annotations

import pytest

from passes.testing import case, check_pipeline

SELECTS = [
    case(
        "rotary-pair-pick-of-a-symbolic-length",
        """
    graph @g {
      input %x: f32[1,s0,4,8,2]
      %r: f32[1,s0,4,8] = aten.select_copy.int(%x) {dim=-1, index=0}
      %i: f32[1,s0,4,8] = aten.select_copy.int(%x) {dim=-1, index=1}
      %y: f32[1,s0,4,8] = aten.sub.Tensor(%r, %i)
      return %y
    }""",
        """
    graph @g {
      input %x: f32[1,s0,4,8,2]
      %0: f32[1,s0,4,8,1] = aten.slice_copy.Tensor(%x) {dim=4, start=0, end=1, step=1}
      %r: f32[1,s0,4,8] = aten.view_copy(%0) {size=[1, -1, 4, 8]}
      %1: f32[1,s0,4,8,1] = aten.slice_copy.Tensor(%x) {dim=4, start=1, end=2, step=1}
      %i: f32[1,s0,4,8] = aten.view_copy(%1) {size=[1, -1, 4, 8]}
      %y: f32[1,s0,4,8] = aten.sub.Tensor(%r, %i)
      return %y
    }""",
    ),
    case(
        "negative-index-result-is-output-and-read-twice",
        """
    graph @g {
      input %x: f32[3,5]
      %s: f32[5] = aten.select_copy.int(%x) {dim=0, index=-1}
      %m: f32[5] = aten.mul.Tensor(%s, %s)
      return %m, %s
    }""",
        """
    graph @g {
      input %x: f32[3,5]
      %0: f32[1,5] = aten.slice_copy.Tensor(%x) {dim=0, start=2, end=3, step=1}
      %s: f32[5] = aten.view_copy(%0) {size=[5]}
      %m: f32[5] = aten.mul.Tensor(%s, %s)
      return %m, %s
    }""",
    ),
    case(
        "operand-is-also-a-graph-output",
        """
    graph @g {
      input %x: f32[2,s0]
      %r: f32[2,s0] = aten.relu(%x)
      %s: f32[s0] = aten.select_copy.int(%r) {dim=0, index=1}
      return %s, %r
    }""",
        """
    graph @g {
      input %x: f32[2,s0]
      %r: f32[2,s0] = aten.relu(%x)
      %0: f32[1,s0] = aten.slice_copy.Tensor(%r) {dim=0, start=1, end=2, step=1}
      %s: f32[s0] = aten.view_copy(%0) {size=[-1]}
      return %s, %r
    }""",
    ),
    case(
        "of-a-constant",
        """
    graph @g {
      param %w: f32[2,3]
      input %x: f32[3]
      %s: f32[3] = aten.select_copy.int(%w) {dim=0, index=1}
      %y: f32[3] = aten.add.Tensor(%x, %s)
      return %y
    }""",
        """
    graph @g {
      param %w: f32[2,3]
      input %x: f32[3]
      %0: f32[1,3] = aten.slice_copy.Tensor(%w) {dim=0, start=1, end=2, step=1}
      %s: f32[3] = aten.view_copy(%0) {size=[3]}
      %y: f32[3] = aten.add.Tensor(%x, %s)
      return %y
    }""",
    ),
    case(
        "declined-the-symbolic-dim-last-token",
        """
    graph @g {
      input %x: f32[1,s0,8]
      %s: f32[1,8] = aten.select_copy.int(%x) {dim=1, index=-1}
      return %s
    }""",
    ),
    case(
        "declined-an-integer-tensor",
        """
    graph @g {
      input %p: i64[4]
      %s: i64[] = aten.select_copy.int(%p) {dim=0, index=0}
      return %s
    }""",
    ),
    case(
        "declined-1-d-its-result-would-be-0-d",
        """
    graph @g {
      input %x: f32[4]
      %s: f32[] = aten.select_copy.int(%x) {dim=0, index=2}
      return %s
    }""",
    ),
    case(
        "declined-two-symbolic-dims-left",
        """
    graph @g {
      input %x: f32[s0,s1,2]
      %s: f32[s0,s1] = aten.select_copy.int(%x) {dim=2, index=0}
      return %s
    }""",
    ),
]


@pytest.mark.parametrize("before, expected, changed", SELECTS)
def test_select_as_slice(before, expected, changed):
    check_pipeline(before, "xnnpack.select-as-slice", expected, changed=changed)
