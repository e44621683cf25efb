"""xir's partitioner in lists of partitioners, as ExecuTorch's flows build them (issue 54): a
DQ-only stage then the rest, xir before or after stock's XNNPACK partitioner, and xir's own ops
(xir.slice, xir.convert, ...) that no partitioner of the list takes written back as ATen ops
(``lowering.fx.xir_ops_as_aten``). Every program is lowered, serialized, loaded on the runtime, run
at two sequence lengths and compared with eager; none keeps an xir op outside a delegate."""

import pytest
import torch
from torch.export import Dim

from xir_tools import harness

SEQ = Dim("seq", min=1, max=64)
LENGTHS = (5, 13)


class GatedBlock(torch.nn.Module):
    """Two linears and the float ops between them on a symbolic sequence length: its slices of the
    last dim become xir.slice (xnnpack.slices-as-xir-slices), one of a graph input, one read by
    several ops, one a graph output; two batched matmuls (in bf16 xir.bmm_f32out)."""

    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(24, 32)
        self.down = torch.nn.Linear(16, 8)

    def forward(self, x):
        h = self.up(x)
        a, b = h[..., :16], h[..., 16:]
        mixed = torch.bmm(torch.bmm(a, b.transpose(1, 2)), a)  # (bf16: xir.bmm_f32out)
        g = a * torch.sigmoid(b) + a + x[..., :16] * 0.5 + mixed * 0.01
        return self.down(g), b


def _inputs(length: int, dtype=torch.float32):
    return (torch.randn(1, length, 24, generator=torch.Generator().manual_seed(length)).to(dtype),)


def _program(quantized: bool, dtype=torch.float32):
    """(exported program with a symbolic length, eager module): fp32/bf16, or dynamically quantized
    linears (XNNPACKQuantizer, per channel)."""
    torch.manual_seed(0)
    module = GatedBlock().eval().to(dtype)
    sample = _inputs(7, dtype)
    if quantized:
        from lowering.fx.quantizer import quantize_pt2e

        module = quantize_pt2e(module, sample, is_per_channel=True, is_dynamic=True)
    return harness.export(module, sample, dynamic_shapes=({1: SEQ},)), module


def _check_on_runtime(edge, module, dtype=torch.float32, tolerance=1e-5):
    """No xir op outside the delegates; the program loads and matches ``module`` at every length."""
    outside = harness.outside_ops(edge)
    assert not any(op.startswith("xir.") for op in outside), outside
    _, method = harness.load_method(harness.to_buffer(edge))
    for length in LENGTHS:
        inputs = _inputs(length, dtype)
        actual = harness.run_method(method, list(inputs))
        expected = harness.reference(None, inputs, module)
        assert [a.shape for a in actual] == [e.shape for e in expected]
        assert harness.max_error(actual, expected) <= tolerance, f"length {length}"


def _dq(which: str, **options):
    from executorch.backends.xnnpack.partition.config.xnnpack_config import ConfigPrecisionType

    return harness.make_partitioner(which, config_precisions=ConfigPrecisionType.DYNAMIC_QUANT, **options)


def _written_back(edge) -> list[str]:
    """The ops of the program's nodes that xir wrote back from one of its own (by the xir op)."""
    graph = edge.exported_program().graph
    return sorted(n.meta["xir_written_back_from"] for n in graph.nodes if "xir_written_back_from" in n.meta)


@pytest.fixture(scope="module")
def quantized():
    return _program(quantized=True)


@pytest.mark.parametrize("order", ["xir-dq,xir", "stock-dq,xir", "xir-dq,stock"])
def test_lists_with_xir(quantized, order):
    """ExecuTorch's to_edge_transform_and_lower with a list, xir's rewrites as its transform passes:
    the dynamically quantized linears go to the first stage, the float ops (with xir's slices) to
    the second (or stay outside, for a DQ-only list), xir before and after stock's partitioner."""
    from executorch.exir import to_edge_transform_and_lower

    from lowering.fx.llm import transform_passes

    ep, module = quantized
    stages = {
        "xir-dq": lambda: _dq("xir"),
        "stock-dq": lambda: _dq("stock"),
        "xir": lambda: harness.make_partitioner("xir"),
        "stock": lambda: harness.make_partitioner("stock"),
    }
    partitioners = [stages[name]() for name in order.split(",")]
    edge = to_edge_transform_and_lower(
        ep, transform_passes=transform_passes(partitioners) or None, partitioner=partitioners
    )
    inside = harness.delegated_ops(edge)
    # both linears with their dynamic quantization inside, each in a delegate
    assert inside["aten.linear"] + inside.get("aten.mm", 0) + inside.get("aten.addmm", 0) >= 2, inside
    assert not any(
        op.startswith(("aten.linear", "aten.mm", "aten.addmm", "quantized_decomposed."))
        for op in harness.outside_ops(edge)
    ), harness.outside_ops(edge)
    if order.endswith(",xir"):  # xir's second stage takes the float ops, its slices among them
        assert inside["xir.slice"] >= 2 and "aten.sigmoid" in inside, inside
    _check_on_runtime(edge, module, tolerance=0.05)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_xir_ops_no_partitioner_takes_are_written_back(dtype):
    """xir's rewrites for an fp32 partitioner, but only a DQ-only xir stage in the list (it takes
    nothing of a float program): ExecuTorch's to_edge_transform_and_lower asks it
    ops_to_not_decompose about the final program, and it writes back every xir op there as ATen
    ops (xir.slice of a graph input, one read by several ops, one a graph output; in bf16 the
    converts around the bf16 arithmetic and the bmm with an fp32 result): the program runs on
    portable kernels and matches eager. (The DQ-only stage's decomposition, which ExecuTorch runs
    first, decomposes the float linears: see the next test for xir.linear_f16w.)"""
    from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower

    bf16 = dtype is torch.bfloat16
    ep, module = _program(quantized=False, dtype=dtype)
    rewrites = harness.make_partitioner("xir", enable_bf16=bf16)
    stage = _dq("xir", enable_bf16=bf16)
    for skip_dim_order in (False, True):  # (the cast the edge program uses: dim-order's, or aten._to_copy)
        edge = to_edge_transform_and_lower(
            ep,
            transform_passes=rewrites.transform_passes(),
            partitioner=[stage],
            compile_config=EdgeCompileConfig(_skip_dim_order=skip_dim_order),
        )
        assert harness.delegate_count(edge) == 0
        written = _written_back(edge)
        assert written.count("xir.slice") >= 3, written
        if bf16:
            assert {"xir.convert", "xir.bmm_f32out"} <= set(written), written
            casts = [op for op in harness.outside_ops(edge) if "to_copy" in op or "to_dim_order_copy" in op]
            assert casts and all(("dim_order" in op) != skip_dim_order for op in casts), casts
        _check_on_runtime(edge, module, dtype, tolerance=2**-6 if bf16 else 1e-5)


def test_to_backend_then_to_executorch_pass():
    """to_edge, xir's rewrites as edge.transform, then to_backend with a DQ-only xir stage alone:
    the xir ops it leaves are written back by ``XirOpsAsAten`` in to_executorch's passes (or
    ``rewrite_edge_manager``); a second to_backend with xir's fp32 partitioner takes them instead."""
    from executorch.exir import ExecutorchBackendConfig, to_edge

    from lowering.fx.xir_ops_as_aten import XirOpsAsAten, rewrite_edge_manager, undelegated_xir_nodes

    ep, module = _program(quantized=False)
    full = harness.make_partitioner("xir")
    edge = to_edge(ep).transform(full.transform_passes()).to_backend(_dq("xir"))
    assert len(undelegated_xir_nodes(edge.exported_program().graph_module)) >= 3
    program = edge.to_executorch(ExecutorchBackendConfig(passes=[XirOpsAsAten()]))
    _, method = harness.load_method(program.buffer)
    for length in LENGTHS:
        inputs = _inputs(length)
        assert (
            harness.max_error(harness.run_method(method, list(inputs)), harness.reference(None, inputs, module)) <= 1e-5
        )

    edge = to_edge(ep).transform(full.transform_passes()).to_backend(_dq("xir"))
    assert rewrite_edge_manager(edge) and not undelegated_xir_nodes(edge.exported_program().graph_module)
    _check_on_runtime(edge, module)

    edge = to_edge(ep).transform(full.transform_passes()).to_backend(_dq("xir")).to_backend(full)
    assert harness.delegated_ops(edge)["xir.slice"] >= 3
    _check_on_runtime(edge, module)


def test_linears_on_fp16_weights_written_back():
    """bf16 linears kept whole by to_edge (``preserve_ops``), rewritten by xir as fp32 linears on
    fp16 constants (``bf16_activations_in_fp32``: xir.linear_f16w, between converts), then a DQ-only
    xir stage that takes none of it: ``rewrite_edge_manager`` writes them back as ``linear`` of the
    weight cast to fp32, and the program matches eager bf16 within bf16's rounding."""
    from executorch.exir import EdgeCompileConfig, to_edge

    from lowering.fx.xir_ops_as_aten import rewrite_edge_manager

    ep, module = _program(quantized=False, dtype=torch.bfloat16)
    rewrites = harness.make_partitioner("xir", enable_bf16=True, bf16_activations_in_fp32=True)
    config = EdgeCompileConfig(preserve_ops=[torch.ops.aten.linear.default])
    edge = to_edge(ep, compile_config=config).transform(rewrites.transform_passes())
    edge = edge.to_backend(_dq("xir", enable_bf16=True))
    assert rewrite_edge_manager(edge)
    written = _written_back(edge)
    assert written.count("xir.linear_f16w") == 2, written
    assert harness.outside_ops(edge)["aten.linear"] == 2
    _check_on_runtime(edge, module, torch.bfloat16, tolerance=2**-6)


def test_an_xir_op_without_a_value_is_named():
    """An xir op outside every delegate that cannot be written back (here: without the value its
    ATen ops need) is an error naming the node, and the graph is left as it was."""
    from executorch.exir.dialects._ops import ops as exir_ops

    import lowering.fx.xnnpack_ops  # noqa: F401  (registers xir's ops)
    from lowering.fx.xir_ops_as_aten import XirOpLeftOutside, rewrite_graph_module

    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    x.meta["val"] = torch.empty(2, 8)
    good = graph.call_function(exir_ops.edge.xir.slice.default, (x, 1, 0, 4))
    good.meta["val"] = torch.empty(2, 4)
    bad = graph.call_function(exir_ops.edge.xir.slice.default, (good, 1, 0, 2))
    graph.output((bad,))
    gm = torch.fx.GraphModule(torch.nn.Module(), graph)
    before = [(n.name, n.target, n.args) for n in gm.graph.nodes]
    with pytest.raises(XirOpLeftOutside, match=r"xir_slice_default_1 .*no tensor value"):
        rewrite_graph_module(gm)
    assert [(n.name, n.target, n.args) for n in gm.graph.nodes] == before


def test_cast_follows_the_programs_dim_order_mode():
    """Without the program (a to_executorch pass sees only its graph module), the cast an
    xir.convert becomes follows the casts the graph has: aten._to_copy with _skip_dim_order,
    dim_order_ops' otherwise (and when it has none, ExecuTorch's default)."""
    from executorch.exir.dialects._ops import ops as exir_ops

    import lowering.fx.xnnpack_ops  # noqa: F401
    from lowering.fx.xir_ops_as_aten import rewrite_graph_module

    edge = exir_ops.edge
    for cast, expected in (
        (edge.aten._to_copy.default, edge.aten._to_copy.default),
        (edge.dim_order_ops._to_dim_order_copy.default, edge.dim_order_ops._to_dim_order_copy.default),
        (None, edge.dim_order_ops._to_dim_order_copy.default),
    ):
        graph = torch.fx.Graph()
        x = graph.placeholder("x")
        x.meta["val"] = torch.empty(2, 8, dtype=torch.bfloat16)
        first = x if cast is None else graph.call_function(cast, (x,), {"dtype": torch.bfloat16})
        first.meta["val"] = x.meta["val"]
        convert = graph.call_function(edge.xir.convert.default, (first, torch.float32))
        convert.meta["val"] = torch.empty(2, 8)
        graph.output((convert,))
        gm = torch.fx.GraphModule(torch.nn.Module(), graph)
        assert rewrite_graph_module(gm) == [convert.name]
        assert convert.target == expected and convert.kwargs["dtype"] == torch.float32
        assert ("dim_order" in convert.kwargs) == (expected is not edge.aten._to_copy.default)
