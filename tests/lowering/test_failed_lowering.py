"""A lowering by xir that fails leaves the program handed over exactly as it was (README: "so you
can fall back to stock on it"): its graph, state dict, constants, range constraints, and the
ShapeEnv its fake values share with every program it came from (replacements, var_to_val, ranges,
guards). Checked by lowering the same program with ExecuTorch's stock XnnpackPartitioner after the
failure, loading it with ExecuTorch's runtime and running it at two lengths other than the export
example (3 tokens), against eager.

The failures: a write-back whose shape computation pins the sequence length to the export example
and then raises (as torch's fake slice_copy did on a symbolic size, issue 58: a Llama in bf16 then
ran only 3-token prompts on stock); an xir pipeline pass that raises; an ExecuTorch transform pass
after xir's that raises."""

from __future__ import annotations

import pytest
import torch
from torch.export import Dim
from torch.utils import _pytree

import lowering
from lowering.fx import writeback
from passes import function_pass
from tests.lowering.test_dynamic_shapes import RotateHalf
from xir_tools import harness

EXAMPLE, LENGTHS = 3, (5, 9)


@function_pass("test-failed-lowering-raise")
def raising_pass(graph) -> bool:
    """A pipeline pass that fails (after the default pipeline's rewrites)."""
    raise RuntimeError("a pipeline pass failed")


@pytest.fixture
def program():
    torch.manual_seed(0)
    module = RotateHalf().eval()
    ep = torch.export.export(module, (torch.randn(1, EXAMPLE, 64),), dynamic_shapes=({1: Dim("seq", min=1, max=64)},))
    return module, ep


def shape_env(ep):
    from torch._guards import detect_fake_mode

    return detect_fake_mode([n.meta.get("val") for n in ep.graph.nodes if n.op == "placeholder"]).shape_env


def everything(ep) -> dict:
    """What a failed lowering must leave as it was."""
    env = shape_env(ep)
    return {
        "code": ep.graph_module.code,
        "nodes": [n.name for n in ep.graph.nodes],
        "vals": [str(n.meta["val"].shape) for n in ep.graph.nodes if isinstance(n.meta.get("val"), torch.Tensor)],
        "signature": str(ep.graph_signature),
        "state_dict": {k: (id(v), v.clone()) for k, v in ep.state_dict.items()},
        "constants": {k: id(v) for k, v in ep.constants.items()},
        "range_constraints": dict(ep.range_constraints),
        "replacements": dict(env.replacements),
        "var_to_val": dict(env.var_to_val),
        "var_to_range": dict(env.var_to_range),
        "guards": [str(g.expr) for g in env.guards],
        "deferred_runtime_asserts": {k: list(v) for k, v in env.deferred_runtime_asserts.items()},
    }


def assert_as_it_was(before: dict, ep) -> None:
    after = everything(ep)
    for key in before:
        if key == "state_dict":
            assert before[key].keys() == after[key].keys()
            for name, (identity, data) in before[key].items():
                assert after[key][name][0] == identity and torch.equal(after[key][name][1], data), name
        else:
            assert after[key] == before[key], key


def stock_runs_at_other_lengths(module, ep) -> None:
    """Stock lowers ``ep``, and the program runs at LENGTHS on the runtime as eager does."""
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner as Stock
    from executorch.exir import to_edge_transform_and_lower

    edge = to_edge_transform_and_lower(ep, partitioner=[Stock()])
    assert harness.delegate_count(edge) >= 1
    _, method = harness.load_method(edge.to_executorch().buffer)
    for length in LENGTHS:
        x = torch.randn(1, length, 64)
        got = harness.run_method(method, [x])
        expected = harness.reference(None, [x], module)
        assert [tuple(t.shape) for t in got] == [tuple(t.shape) for t in expected]
        assert harness.max_error(got, expected) <= 1e-5, length


def test_a_write_back_that_pins_the_symbol_and_raises_leaves_the_program_whole(program, monkeypatch):
    module, ep = program
    before = everything(ep)
    pinned = []

    def pinning_fake_run(target, args, kwargs, fake_mode):
        """Read an argument's symbolic size as a number (torch fixes the symbol to the example's
        value, as a failing fake slice_copy did), then fail."""
        vals = [a.meta["val"] for a in _pytree.tree_leaves((args, kwargs)) if isinstance(a, torch.fx.Node)]
        sizes = [d for v in vals if isinstance(v, torch.Tensor) for d in v.shape if isinstance(d, torch.SymInt)]
        with fake_mode:
            numbers = [int(d) for d in sizes]
        if sizes and shape_env(ep).replacements:
            pinned.append(numbers)
        raise RuntimeError("Cannot call storage_offset() on tensor with symbolic sizes/strides")

    monkeypatch.setattr(writeback, "_fake_run", pinning_fake_run)
    with pytest.raises(Exception, match="XirRewritePass") as failure:
        lowering.to_edge_transform_and_lower(ep, partitioner=[lowering.XnnpackPartitioner()])
    assert "storage_offset" in repr(failure.value.__cause__)
    assert pinned and EXAMPLE in pinned[0], "the fake run did not pin the sequence length: the test proves nothing"
    monkeypatch.undo()
    assert_as_it_was(before, ep)
    stock_runs_at_other_lengths(module, ep)


class RaiseAfterXir:
    """An ExecuTorch transform pass after xir's: checks that it got xir's rewritten program, fails."""

    def __new__(cls, seen: list):
        from executorch.exir.pass_base import ExportedProgramPassBase

        class Raise(ExportedProgramPassBase):
            def call(self, ep):
                seen.append(any(n.meta.get("xir_origin") for n in ep.graph.nodes))
                raise RuntimeError("a transform pass after xir's failed")

        return Raise()


@pytest.mark.parametrize("where", ["xir-pipeline", "after-xir"])
def test_a_failed_transform_leaves_the_program_whole(program, where):
    """ExecuTorch's to_edge_transform_and_lower with xir's transform pass, failing in xir's pipeline
    (its pass manager rolls the IR back; nothing was written) or in a transform pass after xir's
    (which had written its rewrites into a copy)."""
    from executorch.exir import to_edge_transform_and_lower

    module, ep = program
    before = everything(ep)
    seen: list = []
    if where == "xir-pipeline":
        partitioner = lowering.XnnpackPartitioner(pipeline="+test-failed-lowering-raise")
        passes, message = partitioner.transform_passes(), "a pipeline pass failed"
    else:
        partitioner = lowering.XnnpackPartitioner()
        passes, message = [*partitioner.transform_passes(), RaiseAfterXir(seen)], "a transform pass after xir's failed"
    with pytest.raises(Exception) as failure:
        to_edge_transform_and_lower(ep, transform_passes=passes, partitioner=[partitioner])
    chain, error = [], failure.value
    while error is not None:
        chain.append(str(error))
        error = error.__cause__
    assert any(message in text for text in chain), chain
    assert seen == ([] if where == "xir-pipeline" else [True])  # (xir's pass had rewritten the program)
    assert_as_it_was(before, ep)
    stock_runs_at_other_lengths(module, ep)
