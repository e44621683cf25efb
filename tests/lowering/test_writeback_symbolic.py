"""Write-back of a node a pass made, on a symbolic size: torch's fake (reference) implementations
of ``permute_copy`` and ``expand_copy`` read the size as a number, which specializes the symbol for
the program and for the caller's (they share one ShapeEnv). The write-back types them from the
view op they copy; one that would still specialize is refused, the ShapeEnv as it was."""

from __future__ import annotations

import pytest
import torch

import xir
from lowering.fx import writeback
from lowering.fx.writeback import WriteBackError, write_back
from passes import Rewriter
from xir import Symbol, TensorType
from xir.ops import aten


class Model(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x)


def _edge_program():
    from executorch.exir import to_edge

    ep = torch.export.export(Model(), (torch.randn(1, 7, 8),), dynamic_shapes=({1: torch.export.Dim("seq", max=64)},))
    return to_edge(ep).exported_program()


def _symbolic(ep) -> bool:
    (x,) = [n for n in ep.graph.nodes if n.op == "placeholder" and n.name in ep.graph_signature.user_inputs]
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


def _slices(graph):
    """relu(x) => relu(x)[..., 2:6] + relu(x)[:, :1][..., 2:6] (the first token) and relu(x)[:, 1:] returned too:
    new slice_copy nodes on the symbolic size (along a static dim, and along the symbolic one), the
    relu read by three of them and returned."""
    relu = next(n for n in graph if n.op == "aten.relu")
    rewriter = Rewriter(graph)
    after = graph.nodes[-1] if graph.nodes[-1] is not relu else relu
    part = rewriter.create(
        aten.slice_copy.Tensor, [relu.result], attributes={"dim": 2, "start": 2, "end": 6, "step": 1}
    )
    # (the IR infers no type for a slice of a symbolic dim: given)
    x = relu.result.type
    first = rewriter.create(
        aten.slice_copy.Tensor,
        [relu.result],
        [TensorType(x.dtype, (1, 1, 8))],
        attributes={"dim": 1, "start": 0, "end": 1, "step": 1},
    )
    rest = rewriter.create(
        aten.slice_copy.Tensor,
        [relu.result],
        [TensorType(x.dtype, (1, Symbol(f"{x.shape[1]}-1"), 8))],
        attributes={"dim": 1, "start": 1, "end": 2**63 - 1, "step": 1},
    )
    first_part = rewriter.create(
        aten.slice_copy.Tensor, [first.result], attributes={"dim": 2, "start": 2, "end": 6, "step": 1}
    )
    total = rewriter.create(aten.add.Tensor, [part.result, first_part.result])
    for node in (part, first, first_part, rest, total):
        rewriter.insert_after(after, node)
        after = node
    graph.outputs = [relu.result, total.result, rest.result]


class ThreeOutputs(torch.nn.Module):
    def forward(self, x):
        r = torch.relu(x)
        return r, r[..., :4] * 1.0, r * 1.0


def test_new_slices_of_a_symbolic_size_keep_the_symbol():
    """torch's fake slice_copy fails at a symbolic size ("Cannot call storage_offset() on tensor with
    symbolic sizes/strides"), fixing the symbol on the way (issue 58): the write-back computes its
    shape from the slice view."""
    from executorch.exir import to_edge

    ep = to_edge(
        torch.export.export(
            ThreeOutputs(), (torch.randn(1, 7, 8),), dynamic_shapes=({1: torch.export.Dim("seq", max=64)},)
        )
    ).exported_program()
    graph = xir.from_exported_program(ep)
    _slices(graph)
    program = write_back(graph, ep)
    assert _symbolic(ep) and _symbolic(program)
    before = {n.name for n in ep.graph.nodes}
    made = [n for n in program.graph.nodes if "slice_copy" in str(n.target) and n.name not in before]
    assert len(made) == 4
    shapes = sorted(str(tuple(n.meta["val"].shape)) for n in made)
    assert [("s" in shape) for shape in shapes].count(True) == 2, (
        shapes
    )  # (the first token's two: [1, 1, 8] and [1, 1, 4])
    module = program.module()
    for length in (2, 7, 30):
        x = torch.randn(1, length, 8)
        r = torch.relu(x)
        outputs = module(x)
        assert (
            torch.equal(outputs[0], r)
            and torch.equal(outputs[1], r[..., 2:6] + r[:, :1, 2:6])
            and torch.equal(outputs[2], r[:, 1:])
        )
