"""IR-text tests of the rewrites that bring Swin's shifted windows into XNNPACK:
``xnnpack.index-select-as-slices`` (torch.roll's gather), ``xnnpack.step-slice-as-view`` (the patch
merging's ``x[:, 1::2]``) and ``xnnpack.as-strided-as-view`` (an ``as_strided`` that only
reshapes), each at the graph boundaries (graph input, graph output, constant, several readers),
with a symbolic dim, and the cases each declines."""

from __future__ import annotations

import textwrap

import pytest
import torch

from lowering.passes.index_select_as_slices import index_runs
from lowering.passes.step_slice_as_view import step_slice_as_view  # noqa: F401  (the rule under test)
from passes.testing import case, check_pipeline
from xir import parse_graph


def with_index(text: str, index: list[int]):
    graph = parse_graph(textwrap.dedent(text))
    graph.input_named("index").data = torch.tensor(index, dtype=torch.int64)
    return graph


ROLL_OF_AN_INPUT = """
graph @g {
  input %x: f32[2,8,3]
  const %index: i64[8]
  %y: f32[2,8,3] = aten.index_select(%x, %index) {dim=1}
  return %y
}"""


def test_a_roll_of_a_graph_input_to_a_graph_output_is_two_slices_and_a_cat():
    index = torch.roll(torch.arange(8), 3).tolist()  # [5, 6, 7, 0, 1, 2, 3, 4]
    check_pipeline(
        with_index(ROLL_OF_AN_INPUT, index),
        "xnnpack.index-select-as-slices",
        """
    graph @g {
      input %x: f32[2,8,3]
      const %index: i64[8]
      %0: f32[2,3,3] = aten.slice_copy.Tensor(%x) {dim=1, start=5, end=8, step=1}
      %1: f32[2,5,3] = aten.slice_copy.Tensor(%x) {dim=1, start=0, end=5, step=1}
      %y: f32[2,8,3] = aten.cat(%0, %1) {dim=1}
      return %y
    }""",
        changed=True,
    )


def test_a_gather_with_several_readers_and_a_symbolic_dim_elsewhere_makes_xir_slices():
    check_pipeline(
        with_index(
            """
    graph @g {
      input %x: f32[s0,6]
      const %index: i64[4]
      %y: f32[s0,4] = aten.index_select(%x, %index) {dim=-1}
      %z: f32[s0,4] = aten.mul.Tensor(%y, %y)
      return %z, %y
    }""",
            [4, 5, 1, 2],
        ),
        "xnnpack.index-select-as-slices",
        """
    graph @g {
      input %x: f32[s0,6]
      const %index: i64[4]
      %0: f32[s0,2] = xir.slice(%x) {dim=1, start=4, end=6}
      %1: f32[s0,2] = xir.slice(%x) {dim=1, start=1, end=3}
      %y: f32[s0,4] = aten.cat(%0, %1) {dim=1}
      %z: f32[s0,4] = aten.mul.Tensor(%y, %y)
      return %z, %y
    }""",
        changed=True,
    )


def test_a_gather_of_a_constant_in_one_run_is_one_slice():
    check_pipeline(
        with_index(
            """
    graph @g {
      param %w: f32[5,2]
      const %index: i64[3]
      input %x: f32[3,2]
      %g: f32[3,2] = aten.index_select(%w, %index) {dim=0}
      %y: f32[3,2] = aten.add.Tensor(%x, %g)
      return %y
    }""",
            [1, 2, 3],
        ),
        "xnnpack.index-select-as-slices",
        """
    graph @g {
      param %w: f32[5,2]
      const %index: i64[3]
      input %x: f32[3,2]
      %g: f32[3,2] = aten.slice_copy.Tensor(%w) {dim=0, start=1, end=4, step=1}
      %y: f32[3,2] = aten.add.Tensor(%x, %g)
      return %y
    }""",
        changed=True,
    )


@pytest.mark.parametrize(
    "index, why",
    [
        ([0, 2, 4, 6, 1, 3, 5, 7], "8 runs"),  # a shuffle: more slices than it saves
        ([0, 9, 1, 2, 3, 4, 5, 6], "out of range"),
    ],
)
def test_a_gather_of_many_runs_or_out_of_range_stays(index, why):
    check_pipeline(
        with_index(ROLL_OF_AN_INPUT, index), "xnnpack.index-select-as-slices", ROLL_OF_AN_INPUT, changed=False
    )


def test_a_gather_by_a_computed_index_stays():
    text = """
    graph @g {
      input %x: f32[2,8,3]
      input %index: i64[8]
      %y: f32[2,8,3] = aten.index_select(%x, %index) {dim=1}
      return %y
    }"""
    check_pipeline(text, "xnnpack.index-select-as-slices", text, changed=False)


def test_index_runs():
    assert index_runs([5, 6, 7, 0, 1]) == [(5, 8), (0, 2)]
    assert index_runs([3, 3]) == [(3, 4), (3, 4)]


STEP_SLICES = [
    case(
        "odd-positions-of-a-graph-input-to-a-graph-output",
        """
    graph @g {
      input %x: f32[1,8,8,4]
      %y: f32[1,4,8,4] = aten.slice_copy.Tensor(%x) {dim=1, start=1, end=9223372036854775807, step=2}
      return %y
    }""",
        """
    graph @g {
      input %x: f32[1,8,8,4]
      %0: f32[1,4,2,8,4] = aten.view_copy(%x) {size=[1, 4, 2, 8, 4]}
      %1: f32[1,4,1,8,4] = aten.slice_copy.Tensor(%0) {dim=2, start=1, end=2, step=1}
      %y: f32[1,4,8,4] = aten.view_copy(%1) {size=[1, 4, 8, 4]}
      return %y
    }""",
    ),
    case(
        "even-positions-read-twice-and-a-symbolic-batch",
        """
    graph @g {
      input %x: f32[s0,6,3]
      %y: f32[s0,3,3] = aten.slice_copy.Tensor(%x) {dim=1, start=0, end=6, step=2}
      %z: f32[s0,3,3] = aten.add.Tensor(%y, %y)
      return %z, %y
    }""",
        """
    graph @g {
      input %x: f32[s0,6,3]
      %0: f32[s0,3,2,3] = aten.view_copy(%x) {size=[-1, 3, 2, 3]}
      %1: f32[s0,3,1,3] = xir.slice(%0) {dim=2, start=0, end=1}
      %y: f32[s0,3,3] = aten.view_copy(%1) {size=[-1, 3, 3]}
      %z: f32[s0,3,3] = aten.add.Tensor(%y, %y)
      return %z, %y
    }""",
    ),
    case(
        "a-constant-in-part-from-an-offset",
        """
    graph @g {
      param %w: f32[10]
      %y: f32[3] = aten.slice_copy.Tensor(%w) {dim=0, start=3, end=9, step=2}
      return %y
    }""",
        """
    graph @g {
      param %w: f32[10]
      %0: f32[5,2] = aten.view_copy(%w) {size=[5, 2]}
      %1: f32[3,2] = aten.slice_copy.Tensor(%0) {dim=0, start=1, end=4, step=1}
      %2: f32[3,1] = aten.slice_copy.Tensor(%1) {dim=1, start=1, end=2, step=1}
      %y: f32[3] = aten.view_copy(%2) {size=[3]}
      return %y
    }""",
    ),
    case(
        "an-odd-length-dim-its-positions-sliced-first",
        """
    graph @g {
      input %x: f32[2,7]
      %y: f32[2,3] = aten.slice_copy.Tensor(%x) {dim=1, start=0, end=6, step=2}
      return %y
    }""",
        """
    graph @g {
      input %x: f32[2,7]
      %0: f32[2,6] = aten.slice_copy.Tensor(%x) {dim=1, start=0, end=6, step=1}
      %1: f32[2,3,2] = aten.view_copy(%0) {size=[2, 3, 2]}
      %2: f32[2,3,1] = aten.slice_copy.Tensor(%1) {dim=2, start=0, end=1, step=1}
      %y: f32[2,3] = aten.view_copy(%2) {size=[2, 3]}
      return %y
    }""",
    ),
    case(
        "declined-the-last-block-does-not-fit",
        """
    graph @g {
      input %x: f32[2,7]
      %y: f32[2,3] = aten.slice_copy.Tensor(%x) {dim=1, start=2, end=7, step=2}
      return %y
    }""",
    ),
    case(
        "declined-a-symbolic-sliced-dim",
        """
    graph @g {
      input %x: f32[2,s0]
      %y: f32[2,s1] = aten.slice_copy.Tensor(%x) {dim=1, start=0, end=9223372036854775807, step=2}
      return %y
    }""",
    ),
    case(
        "declined-six-d-would-become-seven",
        """
    graph @g {
      input %x: f32[1,2,2,2,2,4]
      %y: f32[1,2,2,2,2,2] = aten.slice_copy.Tensor(%x) {dim=5, start=0, end=4, step=2}
      return %y
    }""",
    ),
]


@pytest.mark.parametrize("before, expected, changed", STEP_SLICES)
def test_step_slice_as_view(before, expected, changed):
    check_pipeline(before, "xnnpack.step-slice-as-view", expected, changed=changed)


AS_STRIDED = [
    case(
        "a-reshape-of-a-constant",
        """
    graph @g {
      param %w: f32[2,6]
      %y: f32[3,4] = aten.as_strided_copy(%w) {size=[3, 4], stride=[4, 1]}
      return %y
    }""",
        """
    graph @g {
      param %w: f32[2,6]
      %y: f32[3,4] = aten.view_copy(%w) {size=[3, 4]}
      return %y
    }""",
    ),
    case(
        "read-twice-and-returned",
        """
    graph @g {
      param %w: f32[2,6]
      %y: f32[3,4] = aten.as_strided_copy(%w) {size=[3, 4], stride=[4, 1]}
      %z: f32[3,4] = aten.add.Tensor(%y, %y)
      return %z, %y
    }""",
        """
    graph @g {
      param %w: f32[2,6]
      %y: f32[3,4] = aten.view_copy(%w) {size=[3, 4]}
      %z: f32[3,4] = aten.add.Tensor(%y, %y)
      return %z, %y
    }""",
    ),
    case(
        "declined-an-offset",
        """
    graph @g {
      param %w: f32[4,6]
      %y: f32[2,3] = aten.as_strided_copy(%w) {size=[2, 3], stride=[3, 1], storage_offset=1}
      return %y
    }""",
    ),
    case(
        "declined-a-transposing-stride",
        """
    graph @g {
      param %w: f32[2,3]
      %y: f32[3,2] = aten.as_strided_copy(%w) {size=[3, 2], stride=[1, 3]}
      return %y
    }""",
    ),
    case(
        "declined-not-every-element",
        """
    graph @g {
      param %w: f32[4,6]
      %y: f32[2,3] = aten.as_strided_copy(%w) {size=[2, 3], stride=[3, 1]}
      return %y
    }""",
    ),
]


@pytest.mark.parametrize("before, expected, changed", AS_STRIDED)
def test_as_strided_as_view_of_a_contiguous_input(before, expected, changed, monkeypatch):
    """The rules, with the input known contiguous (in a program, the FX metadata says so: the
    end-to-end Swin test covers that)."""
    import lowering.passes.as_strided_as_view as module

    monkeypatch.setattr(module, "_contiguous_in_program", lambda value: True)
    check_pipeline(before, "xnnpack.as-strided-as-view", expected, changed=changed)


def test_as_strided_of_an_input_of_unknown_layout_stays():
    """A parsed graph links no program: the input may be channels-last, so nothing changes."""
    before = AS_STRIDED[0].values[0]
    check_pipeline(before, "xnnpack.as-strided-as-view", before, changed=False)
