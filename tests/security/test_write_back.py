"""Item 5 of issue 28: a failed write-back leaves the caller's programs exactly as they were.

The write-back fails on purpose, late: a custom pass (appended to the default pipeline) turns the
ReLU into an op with no definition, which cannot be written back, while fold-batch-norm has
already rewritten the conv before it. A caller that catches the error and lowers the same edge
program with the stock partitioner must get a program that computes what the model does (before
the fix, the half-rewritten conv read the folded weights and the batch norm still ran after it).
"""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("executorch")

from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner as StockPartitioner  # noqa: E402
from executorch.exir import EdgeCompileConfig, to_edge  # noqa: E402

import lowering  # noqa: E402
from lowering.fx.writeback import WriteBackError, write_back  # noqa: E402
from passes import function_pass  # noqa: E402
from xir_tools.harness import delegated_ops, max_error, run_pte  # noqa: E402


@function_pass("test-security-opaque-relu")
def opaque_relu(graph) -> bool:
    """Replace each ReLU by an op xir has no definition of (write-back refuses it)."""
    changed = False
    for node in list(graph):
        if node.op == "aten.relu":
            opaque = graph.create_node("test.opaque_relu", [node.input], result_types=[node.result.type])
            graph.insert_before(node, opaque)
            graph.replace_node(node, [opaque.result])
            changed = True
    return changed


class ConvBnRelu(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.bn = torch.nn.BatchNorm2d(4)
        self.head = torch.nn.Conv2d(4, 2, 1)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-2, 2)
            self.bn.running_var.uniform_(0.5, 3)
            self.bn.weight.uniform_(0.5, 2)
            self.bn.bias.uniform_(-1, 1)

    def forward(self, x):
        return self.head(torch.relu(self.bn(self.conv(x))))


def _write_back_failed(error: BaseException) -> bool:
    """Whether ``error`` (ExecuTorch wraps what a pass raises) comes from write-back's refusal."""
    while error is not None:
        if isinstance(error, WriteBackError) and "opaque op" in str(error):
            return True
        error = error.__cause__ or error.__context__
    return False


def _snapshot(ep):
    """Everything of a program a rewrite could change: its code, signature, constants and state."""
    return (
        ep.graph_module.code,
        str(ep.graph_signature),
        sorted(ep.state_dict),
        sorted(ep.constants),
        [(n.name, n.op, str(n.target), repr(n.args), repr(n.kwargs)) for n in ep.graph.nodes],
    )


@pytest.fixture(scope="module")
def model_and_inputs():
    torch.manual_seed(0)
    model = ConvBnRelu().eval()
    inputs = (torch.randn(1, 3, 8, 8),)
    return model, inputs


def test_failed_transform_leaves_the_edge_program_whole_and_stock_fallback_is_right(model_and_inputs):
    model, inputs = model_and_inputs
    ep = torch.export.export(model, inputs)
    edge = to_edge(ep, compile_config=EdgeCompileConfig(_check_ir_validity=False))
    before = _snapshot(edge.exported_program())
    partitioner = lowering.XnnpackPartitioner(pipeline="+test-security-opaque-relu")

    with pytest.raises(Exception) as failure:
        edge.transform(partitioner.transform_passes())
    assert _write_back_failed(failure.value)

    assert _snapshot(edge.exported_program()) == before
    # the caller falls back to stock on the very same edge program
    lowered = edge.to_backend(StockPartitioner())
    assert delegated_ops(lowered)["aten.convolution"] == 2
    outputs = run_pte(lowered.to_executorch().buffer, inputs)
    assert max_error(outputs, [model(*inputs)]) < 1e-4


def test_failed_lowering_leaves_the_exported_program_whole(model_and_inputs):
    model, inputs = model_and_inputs
    ep = torch.export.export(model, inputs)
    before = _snapshot(ep)
    with pytest.raises(Exception) as failure:
        lowering.to_edge_transform_and_lower(
            ep, partitioner=[lowering.XnnpackPartitioner(pipeline="+test-security-opaque-relu")]
        )
    assert _write_back_failed(failure.value)
    assert _snapshot(ep) == before
    assert max_error([ep.module()(*inputs)], [model(*inputs)]) < 1e-5


def test_write_back_failure_restores_the_ir_links_and_success_returns_a_new_program(model_and_inputs):
    import xir
    from passes import PassManager

    model, inputs = model_and_inputs
    edge = to_edge(torch.export.export(model, inputs), compile_config=EdgeCompileConfig(_check_ir_validity=False))
    ep = edge.exported_program()
    before = _snapshot(ep)

    graph = xir.from_exported_program(ep)
    PassManager(lowering.XnnpackPartitioner(pipeline="+test-security-opaque-relu").pipeline).run(graph)
    links = [(obj, obj.fx_node) for obj in (*graph.inputs, *graph)]
    with pytest.raises(WriteBackError, match="opaque op"):
        write_back(graph, ep)
    assert _snapshot(ep) == before
    assert all(obj.fx_node is fx_node for obj, fx_node in links)

    graph = xir.from_exported_program(ep)
    PassManager(lowering.XnnpackPartitioner().pipeline).run(graph)
    rewritten = write_back(graph, ep)
    assert rewritten is not ep and _snapshot(ep) == before
    assert "aten._native_batch_norm_legit_no_training" in str(before[0]) or "batch_norm" in before[0]
    assert "batch_norm" not in rewritten.graph_module.code  # folded, in the copy only
    assert all(n.fx_node.graph is rewritten.graph for n in graph)
    assert max_error([rewritten.module()(*inputs)], [model(*inputs)]) < 1e-4
