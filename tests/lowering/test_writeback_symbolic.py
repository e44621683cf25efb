"""Write-back of a node a pass made, on a symbolic size: torch's fake (reference) implementations
of ``permute_copy`` and ``expand_copy`` read the size as a number, which specializes the symbol for
the program and for the caller's (they share one ShapeEnv). The write-back types them from the
view op they copy; one that would still specialize is refused, the ShapeEnv as it was."""

from __future__ import annotations

import pytest
import torch

import xir
from lowering import writeback
from lowering.writeback import WriteBackError, write_back
from passes import Rewriter
from xir.ops import aten


class Model(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x)


def _edge_program():
    from executorch.exir import to_edge

    ep = torch.export.export(Model(), (torch.randn(1, 7, 8),), dynamic_shapes=({1: torch.export.Dim("seq", max=64)},))
    return to_edge(ep).exported_program()


def _symbolic(ep) -> bool:
    (x,) = [n for n in ep.graph.nodes if n.op == "placeholder"]
    return not isinstance(x.meta["val"].shape[1], int)


def _permute_and_expand(graph):
    """relu(x) => relu(expand(permute(permute(x))))): new nodes on the symbolic size."""
    relu = next(n for n in graph if n.op == "aten.relu")
    rewriter = Rewriter(graph)
    t = rewriter.op_before(relu, aten.permute_copy, [relu.input], dims=[0, 2, 1])
    back = rewriter.op_before(relu, aten.permute_copy, [t], dims=[0, 2, 1])
    wide = rewriter.op_before(relu, aten.expand_copy, [back], size=[1, -1, 8])
    rewriter.set_operand(relu, 0, wide)


def test_new_permutes_and_expands_keep_the_symbol():
    ep = _edge_program()
    graph = xir.from_exported_program(ep)
    _permute_and_expand(graph)
    program = write_back(graph, ep)
    assert _symbolic(ep) and _symbolic(program)
    made = [n for n in program.graph.nodes if "permute_copy" in str(n.target) or "expand_copy" in str(n.target)]
    assert len(made) == 3
    for node in made:
        assert not all(isinstance(d, int) for d in node.meta["val"].shape), node.format_node()
        assert node.meta["val"].is_contiguous()
    # and the program runs at other lengths
    module = program.module()
    for length in (1, 7, 30):
        x = torch.randn(1, length, 8)
        assert torch.equal(module(x), torch.relu(x))


def test_a_write_back_that_would_specialize_is_refused(monkeypatch):
    monkeypatch.setattr(writeback, "_COPY_AS_VIEW", {})  # (the fake permute_copy, as torch has it)
    ep = _edge_program()
    graph = xir.from_exported_program(ep)
    _permute_and_expand(graph)
    with pytest.raises(WriteBackError, match="would fix a symbolic size"):
        write_back(graph, ep)
    assert _symbolic(ep)  # (the caller's program keeps its symbol)
