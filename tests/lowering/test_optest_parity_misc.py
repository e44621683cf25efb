"""Parity with ExecuTorch's own XNNPACK op tests (part of issue 14): ``torch.max(x, dim)`` without
its indices (test_max_dim.py) and clones that change the dim order (test_clone.py), with the
op tests' modules and shapes, lowered, run on the ExecuTorch runtime and compared with eager.

* ``max.dim`` whose indices are unused: XNNPACK's preprocessing makes it an ``amax`` and defines a
  max pooling over dim 2 or 3 of a 4-D input, kept channels-last. Its visitor reads the dim as
  written and needs ``keepdim=True`` (stock delegates ``dim=-1`` or ``keepdim=False`` anyway and
  then fails to lower); a softmax after it sees the channels-last tensor (stock delegates both
  and is wrong), so xir puts that softmax in a delegate of its own. With its indices used, it stays
  outside.
* A clone that changes the dim order (to or from channels-last) stays outside, as with stock;
  the dim order comes from what torch.export traced (``rules.dim_order_of``).
"""

from __future__ import annotations

import pytest
import torch

from lowering.capability import Options
from lowering.partition import plan_partition
from xir import parse_graph
from xir_tools.harness import lower, reference

CLONE = "dim_order_ops._clone_dim_order"
TO_COPY = "dim_order_ops._to_dim_order_copy"


def _lower_and_run(module, inputs, tol=1e-6):
    ep = torch.export.export(module, inputs)
    ours = lower(ep, inputs)
    assert ours.ran, ours.error
    assert ours.err(reference(ep, inputs)) <= tol
    return ours


class MaxNoIndices(torch.nn.Module):  # test_max_dim.py's MaxNoIndices
    def forward(self, x):
        a, _ = torch.max(x, dim=2, keepdim=True)
        b, _ = torch.max(x, dim=3, keepdim=True)
        return a, b


class MaxWithIndices(torch.nn.Module):  # test_max_dim.py's Max
    def forward(self, x):
        a, i = torch.max(x, dim=2, keepdim=True)
        b, j = torch.max(x, dim=3, keepdim=True)
        return a, i, b, j


class MaxDimsXnnpackCannotDefine(torch.nn.Module):
    def forward(self, x):
        return torch.max(x, dim=-1, keepdim=True)[0], torch.max(x, dim=1, keepdim=True)[0], torch.max(x, dim=3)[0]


class MaxThenSoftmax(torch.nn.Module):
    def forward(self, x):
        return torch.softmax(torch.max(x, dim=2, keepdim=True)[0], -1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_max_dim_without_indices_is_delegated(dtype):
    ours = _lower_and_run(MaxNoIndices(), (torch.randn(16, 3, 12, 12).to(dtype),), tol=0)
    assert ours.delegated == {"aten.max.dim": 2} and not ours.outside and ours.delegates == 1


def test_max_dim_with_indices_stays_outside():
    ours = _lower_and_run(MaxWithIndices(), (torch.randn(16, 3, 12, 12),), tol=0)
    assert ours.outside == {"aten.max.dim": 2} and not ours.delegated


def test_max_dim_xnnpack_cannot_define_stays_outside():
    """dim=-1, dim=1, keepdim=False: stock delegates each and fails in XNNPACK's preprocessing (its
    visitor takes dim 2 or 3 as written, with keepdim)."""
    ours = _lower_and_run(MaxDimsXnnpackCannotDefine(), (torch.randn(2, 3, 5, 7),), tol=0)
    assert ours.outside == {"aten.max.dim": 3} and not ours.delegated


def test_softmax_after_max_dim_runs_in_a_delegate_of_its_own():
    """XNNPACK keeps max.dim's result channels-last: a softmax over the last dim in the same
    delegate would normalize over the channels (stock: max error 0.47). In a delegate of its own
    it reads max.dim's result contiguous (before: left outside)."""
    ours = _lower_and_run(MaxThenSoftmax(), (torch.randn(2, 3, 5, 7),))
    assert ours.delegated == {"aten.max.dim": 1, "aten._softmax": 1} and not ours.outside
    assert [g.ops() for g in ours.partitioner.last_plan.groups] == [["aten.max.dim"], ["aten._softmax"]]
    assert ours.delegates == 2


def test_max_dim_rules_on_ir_text():
    text = """graph @g {{
  input %x: f32[2,3,5,7]
  %0: f32[2,3,1,7], %1: i64[2,3,1,7] = aten.max.dim(%x) {{dim={dim}, keepdim=true}}
  return {returned}
}}
"""
    taken = plan_partition(parse_graph(text.format(dim=2, returned="%0")), Options())
    assert [g.ops() for g in taken.groups] == [["aten.max.dim"]] and not taken.rejected
    indices = plan_partition(parse_graph(text.format(dim=2, returned="%0, %1")), Options())
    assert not indices.groups and "indices are used" in indices.rejected[0].reason
    negative = plan_partition(parse_graph(text.format(dim=-2, returned="%0")), Options())
    assert not negative.groups and "dim -2" in negative.rejected[0].reason


SOFTMAX_AFTER_MAX = """graph @g {{
  input %x: f32[2,3,5,7]
  %0: f32[2,3,1,7], %1: i64[2,3,1,7] = aten.max.dim(%x) {{dim=2, keepdim=true}}
  %2: f32[2,3,1,7] = aten.{between}(%0)
  %3: f32[2,3,1,7] = aten._softmax(%2) {{dim=-1, half_to_float=false}}
  %4: f32[2,3,1,7] = aten.relu(%3)
  return {returned}
}}
"""


@pytest.mark.parametrize("returned", ["%4", "%2, %4", "%3, %4"])
def test_a_softmax_after_a_channels_last_op_is_planned_in_a_group_of_its_own(returned):
    """The max and the abs stay together, the softmax is alone, and the relu after it joins one of
    them (whatever else the graph returns: the softmax's input or its result)."""
    plan = plan_partition(parse_graph(SOFTMAX_AFTER_MAX.format(between="abs", returned=returned)), Options())
    groups = [g.ops() for g in plan.groups]
    assert ["aten._softmax"] in groups and ["aten.max.dim", "aten.abs"] in [g[:2] for g in groups], groups
    assert sorted(op for g in groups for op in g) == sorted(["aten.max.dim", "aten.abs", "aten._softmax", "aten.relu"])
    assert not plan.rejected


def test_a_softmax_after_a_layout_reset_shares_the_group():
    """After a view, the tensor is contiguous again in XNNPACK: one group for all."""
    text = SOFTMAX_AFTER_MAX.format(between="abs", returned="%4").replace(
        "%2: f32[2,3,1,7] = aten.abs(%0)", "%2: f32[2,3,1,7] = aten.view_copy(%0) {size=[2,3,1,7]}"
    )
    plan = plan_partition(parse_graph(text), Options())
    assert [g.ops() for g in plan.groups] == [["aten.max.dim", "aten.view_copy", "aten._softmax", "aten.relu"]]


class CloneWithMemoryFormat(torch.nn.Module):  # test_clone.py's
    def __init__(self, memory_format):
        super().__init__()
        self.memory_format = memory_format

    def forward(self, x):
        return torch.clone(x, memory_format=self.memory_format)


class CloneChannelsLastToContiguous(torch.nn.Module):  # test_clone.py's
    def forward(self, x):
        y = x.to(memory_format=torch.channels_last)
        return torch.clone(y, memory_format=torch.contiguous_format)


def test_clone_to_channels_last_stays_outside():
    ours = _lower_and_run(CloneWithMemoryFormat(torch.channels_last), (torch.randn(1, 3, 4, 4),), tol=0)
    assert ours.outside == {CLONE: 1} and not ours.delegated
    assert ours.outputs[0].is_contiguous(memory_format=torch.channels_last)


def test_clone_from_channels_last_to_contiguous_stays_outside():
    ours = _lower_and_run(CloneChannelsLastToContiguous(), (torch.randn(1, 3, 4, 4),), tol=0)
    assert ours.outside == {CLONE: 1} and ours.delegated == {TO_COPY: 1}
    assert ours.outputs[0].is_contiguous()


def test_clone_keeping_the_dim_order_is_delegated():
    ours = _lower_and_run(CloneWithMemoryFormat(torch.contiguous_format), (torch.randn(1, 3, 4, 4),), tol=0)
    assert not ours.outside.get(CLONE)


def test_clone_with_unknown_input_dim_order_stays_outside():
    """In IR text no value has a known dim order: a clone that sets one stays outside, one that
    preserves the format is taken."""
    text = """graph @g {{
  input %x: f32[1,3,4,4]
  %0: f32[1,3,4,4] = aten.relu(%x)
  %1: f32[1,3,4,4] = dim_order_ops._clone_dim_order(%0) {attributes}
  return %1
}}
"""
    sets = plan_partition(parse_graph(text.format(attributes="{dim_order=[0, 1, 2, 3]}")), Options())
    assert [r.node.op for r in sets.rejected] == [CLONE] and "dim order is unknown" in sets.rejected[0].reason
    keeps = plan_partition(parse_graph(text.format(attributes="")), Options())
    assert not keeps.rejected
