"""IR-text tests of ``xnnpack.slices-as-xir-slices``: a slice of a tensor with a symbolic dim becomes
xir.slice with its bounds in range, at each graph boundary (graph output, graph input, several uses),
and the cases it declines (static shapes, which stock's slice takes; a bound computed at run time;
the symbolic dim to a symbolic length; a step; an integer tensor)."""

from __future__ import annotations

import pytest

from passes.testing import case, check_pipeline

SLICES = [
    case(
        "rotary-halves-of-a-graph-input",
        """
    graph @g {
      input %x: f32[1,s0,4,16]
      %a: f32[1,s0,4,8] = aten.slice_copy.Tensor(%x) {dim=3, start=0, end=8, step=1}
      %b: f32[1,s0,4,8] = aten.slice_copy.Tensor(%x) {dim=-1, start=8, end=9223372036854775807, step=1}
      %y: f32[1,s0,4,8] = aten.sub.Tensor(%a, %b)
      return %y
    }""",
        """
    graph @g {
      input %x: f32[1,s0,4,16]
      %a: f32[1,s0,4,8] = xir.slice(%x) {dim=3, start=0, end=8}
      %b: f32[1,s0,4,8] = xir.slice(%x) {dim=3, start=8, end=16}
      %y: f32[1,s0,4,8] = aten.sub.Tensor(%a, %b)
      return %y
    }""",
    ),
    case(
        "negative-start-result-is-output-and-read-twice",
        """
    graph @g {
      input %x: f32[s0,8]
      %a: f32[s0,2] = aten.slice_copy.Tensor(%x) {dim=1, start=-2}
      %m: f32[s0,2] = aten.mul.Tensor(%a, %a)
      return %m, %a
    }""",
        """
    graph @g {
      input %x: f32[s0,8]
      %a: f32[s0,2] = xir.slice(%x) {dim=1, start=6, end=8}
      %m: f32[s0,2] = aten.mul.Tensor(%a, %a)
      return %m, %a
    }""",
    ),
    case(
        "operand-is-also-a-graph-output",
        """
    graph @g {
      input %x: f32[s0,8]
      %r: f32[s0,8] = aten.relu(%x)
      %a: f32[s0,4] = aten.slice_copy.Tensor(%r) {dim=1, start=4, end=8, step=1}
      return %a, %r
    }""",
        """
    graph @g {
      input %x: f32[s0,8]
      %r: f32[s0,8] = aten.relu(%x)
      %a: f32[s0,4] = xir.slice(%r) {dim=1, start=4, end=8}
      return %a, %r
    }""",
    ),
    case(
        "first-token-of-the-symbolic-dim",
        """
    graph @g {
      input %x: f32[1,s0,8]
      %a: f32[1,1,8] = aten.slice_copy.Tensor(%x) {dim=1, start=0, end=1, step=1}
      return %a
    }""",
        """
    graph @g {
      input %x: f32[1,s0,8]
      %a: f32[1,1,8] = xir.slice(%x) {dim=1, start=0, end=1}
      return %a
    }""",
    ),
    case(
        "declined-static-shapes",
        """
    graph @g {
      input %x: f32[2,8]
      %a: f32[2,4] = aten.slice_copy.Tensor(%x) {dim=1, start=0, end=4, step=1}
      return %a
    }""",
    ),
    case(
        "declined-a-bound-computed-at-run-time",
        """
    graph @g {
      param %t: f32[128,8]
      input %p: f32[1,s0]
      %n: int = aten.sym_size.int(%p) {dim=1}
      %a: f32[s0,8] = aten.slice_copy.Tensor(%t) {dim=0, start=0, end=%n}
      return %a
    }""",
    ),
    case(
        "declined-the-symbolic-dim-to-a-symbolic-length",
        """
    graph @g {
      input %x: f32[1,s0,8]
      %a: f32[1,s1,8] = aten.slice_copy.Tensor(%x) {dim=1, start=1}
      return %a
    }""",
    ),
    case(
        "declined-a-step",
        """
    graph @g {
      input %x: f32[s0,8]
      %a: f32[s0,4] = aten.slice_copy.Tensor(%x) {dim=1, start=0, end=8, step=2}
      return %a
    }""",
    ),
    case(
        "declined-an-integer-tensor",
        """
    graph @g {
      input %x: i64[s0,8]
      %a: i64[s0,4] = aten.slice_copy.Tensor(%x) {dim=1, start=0, end=4}
      return %a
    }""",
    ),
]


@pytest.mark.parametrize("before, expected, changed", SLICES)
def test_slices_as_xir_slices(before, expected, changed):
    check_pipeline(before, "xnnpack.slices-as-xir-slices", expected, changed=changed)
