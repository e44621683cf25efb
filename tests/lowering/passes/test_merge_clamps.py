"""IR-text tests of xnnpack.merge-clamps: relu/hardtanh of a relu/hardtanh becomes one activation
with the bounds of both (XNNPACK's preprocessing fuses an activation into the op before it and a
second one overwrites its bounds). One case per boundary (the first activation also a graph
output, read by another op, reading a graph input) and the declined ones. End to end:
tests/lowering/test_fuzz_regressions.py::test_consecutive_activations_keep_both_bounds."""

from __future__ import annotations

import pytest

import lowering  # noqa: F401  (registers the xnnpack.* passes)
from passes.testing import case, check_pipeline

PIPELINE = "xnnpack.merge-clamps"


CASES = [
    case(
        "relu-of-relu6-of-an-add-result-is-output",
        """
    graph @g {
      input %x: f32[2,3]
      input %b: f32[3]
      %a: f32[2,3] = aten.add.Tensor(%x, %b)
      %h: f32[2,3] = aten.hardtanh(%a) {min_val=0.0, max_val=6.0}
      %r: f32[2,3] = aten.relu(%h)
      return %r
    }""",
        """
    graph @g {
      input %x: f32[2,3]
      input %b: f32[3]
      %0: f32[2,3] = aten.add.Tensor(%x, %b)
      %1: f32[2,3] = aten.hardtanh(%0) {min_val=0.0, max_val=6.0}
      return %1
    }""",
    ),
    case(
        "hardtanh-of-relu-of-a-graph-input-first-also-returned",
        """
    graph @g {
      input %x: f32[4]
      %r: f32[4] = aten.relu(%x)
      %h: f32[4] = aten.hardtanh(%r) {min_val=-1.0, max_val=1.0}
      return %h, %r
    }""",
        """
    graph @g {
      input %x: f32[4]
      %0: f32[4] = aten.relu(%x)
      %1: f32[4] = aten.hardtanh(%x) {min_val=0.0, max_val=1.0}
      return %1, %0
    }""",
    ),
    case(
        "relu-of-relu-first-read-by-another-op",
        """
    graph @g {
      input %x: f32[4]
      %r: f32[4] = aten.relu(%x)
      %s: f32[4] = aten.relu(%r)
      %m: f32[4] = aten.mul.Tensor(%r, %x)
      return %s, %m
    }""",
        """
    graph @g {
      input %x: f32[4]
      %0: f32[4] = aten.relu(%x)
      %1: f32[4] = aten.relu(%x)
      %2: f32[4] = aten.mul.Tensor(%0, %x)
      return %1, %2
    }""",
    ),
    case(
        "three-in-a-row",
        """
    graph @g {
      input %x: f32[4]
      %a: f32[4] = aten.hardtanh(%x) {min_val=-2.0, max_val=5.0}
      %b: f32[4] = aten.relu(%a)
      %c: f32[4] = aten.hardtanh(%b) {min_val=-1.0, max_val=3.0}
      return %c
    }""",
        """
    graph @g {
      input %x: f32[4]
      %0: f32[4] = aten.hardtanh(%x) {min_val=0.0, max_val=3.0}
      return %0
    }""",
    ),
    case(
        "declined-bounds-do-not-overlap",
        """
    graph @g {
      input %x: f32[4]
      %a: f32[4] = aten.hardtanh(%x) {min_val=-3.0, max_val=-1.0}
      %b: f32[4] = aten.relu(%a)
      return %b
    }""",
    ),
    case(
        "declined-one-activation",
        """
    graph @g {
      input %x: f32[4]
      %a: f32[4] = aten.abs(%x)
      %b: f32[4] = aten.relu(%a)
      return %b
    }""",
    ),
]


@pytest.mark.parametrize("before,expected,changed", CASES)
def test_merge_clamps(before, expected, changed):
    check_pipeline(before, PIPELINE, expected, changed=changed)
