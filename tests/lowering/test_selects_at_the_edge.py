"""A select at its delegate's edge stays outside (the repair ``select-at-the-edge``): the slice and
view that ``xnnpack.select-as-slice`` made of it, with the views that lead to it from outside, when
its operand is computed outside the delegate or its result is read only outside. Inside it would
be an XNNPACK slice and reshape, outside it is one ExecuTorch copy (and free views), as in stock's
program; a select between two ops of one delegate stays inside, where it joins them.

The plan on IR text (each drop, and each decline), then a model lowered, run and compared with eager."""

from __future__ import annotations

import re

import pytest
import torch

from lowering import Options, partition
from xir import parse_graph
from xir_tools.harness import lower, reference

SELECT = "# by xnnpack.select-as-slice"
DROP = partition.SELECT_AT_THE_EDGE


def outside(text: str) -> dict[str, str]:
    """The reason of each node (by its result's name) the plan leaves outside."""
    graph = parse_graph(text + "\n")
    plan = partition.plan_partition(graph, Options())
    names = dict(zip((id(n) for n in graph), re.findall(r"^  %(\w+):", text, re.M)))  # (one result each)
    return {names[id(r.node)]: r.reason for r in plan.rejected}


def test_the_repair_knows_the_passs_name():
    from lowering.passes.select_as_slice import SelectAsSlice

    assert partition.SELECT_AS_SLICE == SelectAsSlice.name


DROPS = {
    # a select of a graph input through the view of an unsqueeze: the views before and after go too
    "read-from-a-graph-input-through-views": (
        f"""graph @g {{
  input %h: f32[2,3,4]
  %u: f32[2,1,3,4] = aten.view_copy(%h) {{size=[2, 1, 3, 4]}}
  %s: f32[1,1,3,4] = aten.slice_copy.Tensor(%u) {{dim=0, start=1, end=2, step=1}}  {SELECT}
  %v: f32[1,3,4] = aten.view_copy(%s) {{size=[1, 3, 4]}}  {SELECT}
  %w: f32[3,4] = aten.view_copy(%v) {{size=[3, 4]}}
  %a: f32[3,4] = aten.abs(%w)
  return %a
}}""",
        {"u", "s", "v", "w"},
    ),
    # the select's result read twice inside, and returned
    "read-from-a-graph-input-by-several-readers": (
        f"""graph @g {{
  input %x: f32[4,3]
  %s: f32[1,3] = aten.slice_copy.Tensor(%x) {{dim=0, start=2, end=3, step=1}}  {SELECT}
  %v: f32[3] = aten.view_copy(%s) {{size=[3]}}  {SELECT}
  %a: f32[3] = aten.abs(%v)
  %b: f32[3] = aten.mul.Tensor(%a, %v)
  return %b, %v
}}""",
        {"s", "v"},
    ),
    # computed inside, its result only returned: the delegate returns the operand instead
    "result-read-only-outside": (
        f"""graph @g {{
  input %x: f32[4,3]
  %a: f32[4,3] = aten.abs(%x)
  %s: f32[1,3] = aten.slice_copy.Tensor(%a) {{dim=0, start=0, end=1, step=1}}  {SELECT}
  %v: f32[3] = aten.view_copy(%s) {{size=[3]}}  {SELECT}
  return %v
}}""",
        {"s", "v"},
    ),
}


@pytest.mark.parametrize("text, dropped", DROPS.values(), ids=DROPS.keys())
def test_a_select_at_the_edge_stays_outside(text, dropped):
    reasons = outside(text)
    assert {name for name, reason in reasons.items() if reason == DROP} == dropped, reasons
    assert not set(reasons) - dropped, reasons  # (the abs and mul inside)


KEPT = {
    # computed and read in one delegate: the select joins them
    "between-two-ops-of-one-delegate": f"""graph @g {{
  input %x: f32[4,3]
  %a: f32[4,3] = aten.abs(%x)
  %s: f32[1,3] = aten.slice_copy.Tensor(%a) {{dim=0, start=1, end=2, step=1}}  {SELECT}
  %v: f32[3] = aten.view_copy(%s) {{size=[3]}}  {SELECT}
  %n: f32[3] = aten.neg(%v)
  return %n
}}""",
    # a slice the program wrote (stock delegates slice_copy), of a graph input
    "a-slice-of-the-program": """graph @g {
  input %x: f32[4,3]
  %s: f32[1,3] = aten.slice_copy.Tensor(%x) {dim=0, start=1, end=2, step=1}
  %v: f32[3] = aten.view_copy(%s) {size=[3]}
  %a: f32[3] = aten.abs(%v)
  return %a
}""",
    # a select of a constant (no input of the delegate to save)
    "of-a-constant": f"""graph @g {{
  input %x: f32[3]
  param %t: f32[4,3]
  %s: f32[1,3] = aten.slice_copy.Tensor(%t) {{dim=0, start=1, end=2, step=1}}  {SELECT}
  %v: f32[3] = aten.view_copy(%s) {{size=[3]}}  {SELECT}
  %a: f32[3] = aten.add.Tensor(%v, %x)
  return %a
}}""",
    # the slice read by another op too: not a select's slice alone
    "slice-read-twice": f"""graph @g {{
  input %x: f32[4,3]
  %s: f32[1,3] = aten.slice_copy.Tensor(%x) {{dim=0, start=1, end=2, step=1}}  {SELECT}
  %v: f32[3] = aten.view_copy(%s) {{size=[3]}}  {SELECT}
  %a: f32[3] = aten.abs(%v)
  %b: f32[1,3] = aten.neg(%s)
  return %a, %b
}}""",
}


@pytest.mark.parametrize("text", KEPT.values(), ids=KEPT.keys())
def test_a_select_that_joins_or_is_the_programs_stays_inside(text):
    assert outside(text) == {}


class Steps(torch.nn.Module):
    """An LSTM's shape: steps of a graph input and of initial states (selects at the edge), a
    select of a computed value between two ops of one delegate, and a select that is returned."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x, h):  # x [4, 3, 8], h [2, 3, 8]
        out = h[0] + torch.sigmoid(h[0]) + h[1]  # (h[0] read twice)
        for t in range(3):
            out = torch.tanh(self.lin(x[t]) + out)
        z = self.lin(out).view(3, 2, 4)
        inner = z[:, 0] * 2 + z[:, 1]  # (computed inside and read inside)
        return inner, z[2]  # (z[2]: read only outside)


@pytest.fixture(scope="module")
def steps():
    g = torch.Generator().manual_seed(0)
    example = (torch.randn(4, 3, 8, generator=g), torch.randn(2, 3, 8, generator=g))
    torch.manual_seed(0)
    ep = torch.export.export(Steps().eval(), example)
    return ep, example, lower(ep, example, "xir"), lower(ep, example, "stock")


def test_the_selects_at_the_edge_run_outside(steps):
    ep, example, ours, stock = steps
    assert ours.ran and stock.ran, (ours.error, stock.error)
    assert ours.err(reference(ep, example)) <= 1e-5
    # h[0], h[1], x[0..2] and the returned z[2] outside; z[:, 0] and z[:, 1] inside
    # (and their views: static ones are no kernel, but for the returned z[2]'s, a graph output)
    assert ours.kernels == {"aten.slice_copy.Tensor": 6, "aten.view_copy": 1}
    assert ours.delegated["aten.slice_copy.Tensor"] == 2
    assert ours.delegates == 1 < stock.delegates
    assert stock.kernels["aten.select_copy.int"] == 9  # (h[0] twice: xir reads it once)
    assert sum(ours.kernels.values()) < sum(stock.kernels.values())
