"""fold-constants: IR-text tests (constants given data after parsing), one per case the pass
decides on, and end-to-end lowerings run with ExecuTorch's runtime."""

from __future__ import annotations

import copy
import textwrap

import pytest
import torch

import xir
from lowering.passes.fold_constants import FoldConstants, written_constants
from passes import PassFailure, PassManager, parse_pipeline
from passes.testing import check_pipeline
from xir import Graph, InputKind, TensorType, parse_graph, print_graph
from xir.fx_import import TORCH_TO_DTYPE


def with_data(text: str, **data: torch.Tensor) -> Graph:
    """``text`` parsed, its constants given ``data`` by name (each checked against its type)."""
    graph = parse_graph(textwrap.dedent(text))
    for name, tensor in data.items():
        value = graph.input_named(name)
        assert value.type == TensorType(TORCH_TO_DTYPE[tensor.dtype], tuple(tensor.shape)), name
        value.data = tensor
    return graph


def fold(text: str, expected: str | None = None, *, pipeline: str = "fold-constants", **data):
    """Run ``pipeline`` on ``text`` with ``data`` and compare with ``expected`` (None: the graph must
    stay as it is). Returns the graph and the fold-constants pass (a list when there are several),
    to read its report."""
    passes = parse_pipeline(pipeline)
    graph = check_pipeline(
        with_data(text, **data), passes, expected if expected is not None else text, changed=expected is not None
    )
    folders = [p for p in passes if isinstance(p, FoldConstants)]
    return graph, folders[0] if len(folders) == 1 else folders


def reasons(p: FoldConstants) -> list[str]:
    return [reason for _, reason in p.last_report.skipped]


def test_registered_with_its_option():
    (p,) = parse_pipeline("fold-constants{max_elements=16}")
    assert isinstance(p, FoldConstants) and p.max_elements == 16 and str(p) == "fold-constants{max_elements=16}"
    assert str(FoldConstants()) == "fold-constants"


# ----------------------------------------------------------------------------- what folds


def test_cast_of_a_lifted_scalar_constant():
    """x * 2 as exported: a lifted i64 constant cast to f32, then the multiply."""
    graph, p = fold(
        """
    graph @g {
      input %x: f32[4]
      buffer %c: i64[]
      %0: f32[] = dim_order_ops._to_dim_order_copy(%c) {dtype=f32, dim_order=[]}
      %1: f32[4] = aten.mul.Tensor(%x, %0)
      return %1
    }""",
        """
    graph @g {
      input %x: f32[4]
      buffer %c: i64[]
      param %folded_to_dim_order_copy: f32[]
      %1: f32[4] = aten.mul.Tensor(%x, %folded_to_dim_order_copy)
      return %1
    }""",
        c=torch.tensor(2),
    )
    constant = graph.input_named("folded_to_dim_order_copy").data
    assert constant.dtype == torch.float32 and constant.shape == () and constant.item() == 2.0
    assert p.folded == {"dim_order_ops._to_dim_order_copy": 1}
    assert p.last_stats.fired == {"fold_constant": 1}
    assert p.last_report.constants == 1 and p.last_report.elements == 1
    assert p.last_report.summary() == (
        "folded 1 node(s) (dim_order_ops._to_dim_order_copy x1) into 1 constant(s) of 1 element(s)"
    )


def test_arange_plus_a_constant_then_cast():
    """torch.arange(8) + k as exported: arange from static attributes, add of a lifted constant, cast."""
    graph, p = fold(
        """
    graph @g {
      input %x: f32[8]
      buffer %k: i64[]
      %0: i64[8] = aten.arange.start_step() {start=0, end=8, layout=layout.strided, device=device.cpu, pin_memory=false}
      %1: i64[8] = aten.add.Tensor(%0, %k)
      %2: f32[8] = dim_order_ops._to_dim_order_copy(%1) {dtype=f32, dim_order=[0]}
      %3: f32[8] = aten.add.Tensor(%x, %2)
      return %3
    }""",
        """
    graph @g {
      input %x: f32[8]
      buffer %k: i64[]
      param %folded_to_dim_order_copy: f32[8]
      %3: f32[8] = aten.add.Tensor(%x, %folded_to_dim_order_copy)
      return %3
    }""",
        k=torch.tensor(3),
    )
    assert torch.equal(graph.input_named("folded_to_dim_order_copy").data, torch.arange(8, dtype=torch.float32) + 3)
    assert p.folded == {"aten.arange.start_step": 1, "aten.add.Tensor": 1, "dim_order_ops._to_dim_order_copy": 1}
    # the intermediate constants (the arange, the add) were removed again: only the last one is left
    assert p.last_report.constants == 1 and p.last_report.elements == 8


def test_a_causal_mask_folds_to_a_fixed_point_in_one_run():
    """A decoder's mask from static shapes: arange, unsqueezes, compare, full, scalar_tensor, where.
    The second run finds nothing left (check_pipeline checks its changed flag is False)."""
    graph, (p, again) = fold(
        """
    graph @g {
      input %s: f32[4,4]
      %0: i64[4] = aten.arange.start_step() {start=0, end=4}
      %1: i64[4,1] = aten.unsqueeze_copy(%0) {dim=1}
      %2: i64[1,4] = aten.unsqueeze_copy(%0) {dim=0}
      %3: bool[4,4] = aten.ge.Tensor(%1, %2)
      %4: f32[4,4] = aten.full() {size=[4, 4], fill_value=-inf, dtype=f32}
      %5: f32[] = aten.scalar_tensor() {s=0.0, dtype=f32}
      %6: f32[4,4] = aten.where.self(%3, %5, %4)
      %7: f32[4,4] = aten.add.Tensor(%s, %6)
      return %7
    }""",
        """
    graph @g {
      input %s: f32[4,4]
      param %folded_where: f32[4,4]
      %7: f32[4,4] = aten.add.Tensor(%s, %folded_where)
      return %7
    }""",
        pipeline="fold-constants,fold-constants",
    )
    mask = torch.full((4, 4), float("-inf")).triu(1)
    assert torch.equal(graph.input_named("folded_where").data, mask)
    assert sum(p.folded.values()) == 7 and again.folded == {} and again.last_report.skipped == []


def test_a_constant_with_several_readers():
    """A folded cast read twice becomes one constant read twice; the weight it was cast from stays
    for the node that reads it at run time."""
    graph, _ = fold(
        """
    graph @g {
      input %x: bf16[4]
      param %w: bf16[4]
      %0: f32[4] = dim_order_ops._to_dim_order_copy(%w) {dtype=f32, dim_order=[0]}
      %1: f32[4] = dim_order_ops._to_dim_order_copy(%x) {dtype=f32, dim_order=[0]}
      %2: f32[4] = aten.mul.Tensor(%1, %0)
      %3: f32[4] = aten.add.Tensor(%2, %0)
      %4: bf16[4] = aten.mul.Tensor(%x, %w)
      return %3, %4
    }""",
        """
    graph @g {
      input %x: bf16[4]
      param %w: bf16[4]
      param %folded_to_dim_order_copy: f32[4]
      %1: f32[4] = dim_order_ops._to_dim_order_copy(%x) {dtype=f32, dim_order=[0]}
      %2: f32[4] = aten.mul.Tensor(%1, %folded_to_dim_order_copy)
      %3: f32[4] = aten.add.Tensor(%2, %folded_to_dim_order_copy)
      %4: bf16[4] = aten.mul.Tensor(%x, %w)
      return %3, %4
    }""",
        w=torch.tensor([1.5, -2.25, 3.0, 0.1], dtype=torch.bfloat16),
    )
    w = graph.input_named("w").data
    assert torch.equal(graph.input_named("folded_to_dim_order_copy").data, w.float())


def test_a_folded_value_that_is_a_graph_output_stays_computed_for_the_output():
    """A constant is never made a graph output: the cast stays for the output, the multiply reads the constant."""
    fold(
        """
    graph @g {
      input %x: f32[4]
      buffer %c: i64[4]
      %0: f32[4] = dim_order_ops._to_dim_order_copy(%c) {dtype=f32, dim_order=[0]}
      %1: f32[4] = aten.mul.Tensor(%x, %0)
      return %1, %0
    }""",
        """
    graph @g {
      input %x: f32[4]
      buffer %c: i64[4]
      param %folded_to_dim_order_copy: f32[4]
      %0: f32[4] = dim_order_ops._to_dim_order_copy(%c) {dtype=f32, dim_order=[0]}
      %1: f32[4] = aten.mul.Tensor(%x, %folded_to_dim_order_copy)
      return %1, %0
    }""",
        c=torch.arange(4),
    )


def test_a_value_that_is_only_a_graph_output_is_not_folded():
    _, p = fold("""
    graph @g {
      input %x: f32[4]
      %0: i64[4] = aten.arange.start_step() {start=0, end=4}
      %1: f32[4] = aten.relu(%x)
      return %1, %0
    }""")
    assert reasons(p) == ["its result is a graph output only (a constant is never made a graph output)"]


def test_full_like_reads_only_the_shape_of_a_runtime_input():
    """ones_like(input_ids) as exported: the shape is static, the values never read."""
    graph, p = fold(
        """
    graph @g {
      input %ids: i64[1,5]
      %0: i64[1,5] = aten.full_like(%ids) {fill_value=1, pin_memory=false}
      %1: i64[1,5] = aten.mul.Tensor(%ids, %0)
      return %1
    }""",
        """
    graph @g {
      input %ids: i64[1,5]
      param %folded_full_like: i64[1,5]
      %1: i64[1,5] = aten.mul.Tensor(%ids, %folded_full_like)
      return %1
    }""",
    )
    assert torch.equal(graph.input_named("folded_full_like").data, torch.ones(1, 5, dtype=torch.int64))
    _, p = fold("""
    graph @g {
      input %x: f32[1,2,3,3]
      %0: f32[1,2,3,3] = aten.full_like(%x) {fill_value=1.0}
      %1: f32[1,2,3,3] = aten.mul.Tensor(%x, %0)
      return %1
    }""")
    assert reasons(p) == ["its result keeps the dim order of %x, which may be channels-last"]
    _, p = fold("""
    graph @g {
      input %x: f32[s0,3]
      %0: f32[s0,3] = aten.full_like(%x) {fill_value=1.0}
      %1: f32[s0,3] = aten.mul.Tensor(%x, %0)
      return %1
    }""")
    assert reasons(p) == ["result 0 has a symbolic shape (f32[s0,3])"]


def test_zeros_like_and_ones_like_read_only_the_shape_too():
    graph, _ = fold(
        """
    graph @g {
      input %x: f32[2,3]
      %0: f32[2,3] = aten.zeros_like(%x) {pin_memory=false}
      %1: i64[2,3] = aten.ones_like(%x) {dtype=i64}
      %2: f32[2,3] = aten.add.Tensor(%x, %0)
      %3: f32[2,3] = aten.mul.Tensor(%2, %1)
      return %3
    }""",
        """
    graph @g {
      input %x: f32[2,3]
      param %folded_zeros_like: f32[2,3]
      param %folded_ones_like: i64[2,3]
      %2: f32[2,3] = aten.add.Tensor(%x, %folded_zeros_like)
      %3: f32[2,3] = aten.mul.Tensor(%2, %folded_ones_like)
      return %3
    }""",
    )
    assert torch.equal(graph.input_named("folded_zeros_like").data, torch.zeros(2, 3))
    assert torch.equal(graph.input_named("folded_ones_like").data, torch.ones(2, 3, dtype=torch.int64))


# ----------------------------------------------------------------------------- what does not fold


def test_an_operand_computed_at_run_time():
    _, p = fold(
        """
    graph @g {
      input %x: f32[4]
      param %w: f32[4]
      %0: f32[4] = aten.mul.Tensor(%x, %w)
      %1: f32[4] = aten.neg(%0)
      return %1
    }""",
        w=torch.ones(4),
    )
    assert p.folded == {} and reasons(p) == []  # runtime operands are the common case: no reason recorded


MUTATED = [
    pytest.param(
        """
    graph @g {
      buffer %cache: f32[4,8]
      input %x: f32[1,8]
      input %pos: i64[1]
      %0: f32[4,8] = aten.index_put_(%cache, %x) {indices=[%pos]}
      %1: f32[8] = aten.sum.dim_IntList(%cache) {dim=[0]}
      %2: f32[1,8] = aten.mul.Tensor(%x, %1)
      return %2
    }""",
        "aten.index_put_, which is not pure",
        id="written-in-place",
    ),
    pytest.param(
        """
    graph @g {
      buffer %cache: f32[4,8]
      input %x: f32[8]
      %0: f32[8,4] = aten.permute_copy(%cache) {dims=[1, 0]}
      %1: f32[8,4] = custom.update(%0, %x)
      %2: f32[8] = aten.sum.dim_IntList(%cache) {dim=[0]}
      %3: f32[8] = aten.mul.Tensor(%x, %2)
      return %3
    }""",
        "custom.update, which is not pure",
        id="written-through-a-view",
    ),
]


@pytest.mark.parametrize("text, reason", MUTATED)
def test_a_buffer_the_program_mutates(text, reason):
    """A KV cache is a buffer the program writes: what it holds at run time is not its data."""
    buffer = next(v for v in parse_graph(textwrap.dedent(text)).inputs if v.is_constant)
    _, p = fold(text, **{buffer.name: torch.randn(*buffer.shape)})
    assert p.folded == {}
    assert reasons(p) and all(reason in r for r in reasons(p)), reasons(p)


def test_state_is_never_folded_from():
    """A buffer the program mutates (a KV cache) is imported as ``state``, not as a constant: what it
    holds at run time is not its data, so nothing reading it folds."""
    text = """
    graph @g {
      state %cache: f32[4,8]
      buffer %a: f32[8]
      input %x: f32[1,8]
      %0: f32[8] = aten.sum.dim_IntList(%cache) {dim=[0]}
      %1: f32[8] = aten.neg(%a)
      %2: f32[8] = aten.mul.Tensor(%0, %1)
      %3: f32[1,8] = aten.mul.Tensor(%x, %2)
      return %3
    }"""
    graph = with_data(text, cache=torch.ones(4, 8), a=torch.ones(8))
    assert written_constants(graph) == {}
    _, p = fold(
        text,
        """
    graph @g {
      state %cache: f32[4,8]
      buffer %a: f32[8]
      input %x: f32[1,8]
      param %folded_neg: f32[8]
      %0: f32[8] = aten.sum.dim_IntList(%cache) {dim=[0]}
      %2: f32[8] = aten.mul.Tensor(%0, %folded_neg)
      %3: f32[1,8] = aten.mul.Tensor(%x, %2)
      return %3
    }""",
        cache=torch.ones(4, 8),
        a=torch.ones(8),
    )
    assert p.folded == {"aten.neg": 1}


def test_the_size_limit():
    text = """
    graph @g {
      input %x: f32[8]
      %0: i64[8] = aten.arange.start_step() {start=0, end=8}
      %1: f32[8] = aten.add.Tensor(%x, %0)
      return %1
    }"""
    _, p = fold(text, pipeline="fold-constants{max_elements=7}")
    assert reasons(p) == ["result 0 has 8 elements, more than max_elements=7"]
    fold(
        text,
        """
    graph @g {
      input %x: f32[8]
      param %folded_arange: i64[8]
      %1: f32[8] = aten.add.Tensor(%x, %folded_arange)
      return %1
    }""",
        pipeline="fold-constants{max_elements=8}",
    )
    # the default: 65536 elements
    _, p = fold("""
    graph @g {
      input %x: f32[256,257]
      %0: f32[256,257] = aten.full() {size=[256, 257], fill_value=1.0, dtype=f32}
      %1: f32[256,257] = aten.add.Tensor(%x, %0)
      return %1
    }""")
    assert reasons(p) == ["result 0 has 65792 elements, more than max_elements=65536"]


def test_ops_never_folded():
    """A dequantized int8 weight stays an int8 weight (the quantized lowering needs the pattern);
    an opaque op may have side effects."""
    _, p = fold(
        """
    graph @g {
      input %x: f32[2,4]
      param %w: i8[3,4]
      %0: f32[3,4] = quantized_decomposed.dequantize_per_tensor(%w) {scale=0.1, zero_point=0, quant_min=-128, quant_max=127, dtype=i8}
      %1: f32[2,3] = aten.linear(%x, %0)
      return %1
    }""",
        w=torch.ones(3, 4, dtype=torch.int8),
    )
    assert reasons(p) == ["quantize/dequantize and xir's own ops are left to the lowering"]
    _, p = fold(
        """
    graph @g {
      input %x: f32[4]
      param %w: f32[4]
      %0: f32[4] = custom.thing(%w)
      %1: f32[4] = aten.add.Tensor(%x, %0)
      return %1
    }""",
        w=torch.ones(4),
    )
    assert reasons(p) == ["an opaque op (no definition in xir.ops): it may have side effects"]


def test_a_channels_last_copy_is_not_folded():
    """The IR records no dim order and constants are written contiguous: the copy stays."""
    _, p = fold(
        """
    graph @g {
      input %x: f32[1,2,3,3]
      param %w: f32[1,2,3,3]
      %0: f32[1,2,3,3] = dim_order_ops._to_dim_order_copy(%w) {dtype=f32, dim_order=[0, 2, 3, 1]}
      %1: f32[1,2,3,3] = aten.add.Tensor(%x, %0)
      return %1
    }""",
        w=torch.randn(1, 2, 3, 3),
    )
    assert reasons(p) == ["its result is not contiguous (a dim order other than the default)"]


def test_a_constant_without_data_is_not_folded():
    _, p = fold("""
    graph @g {
      input %x: f32[4]
      param %w: i64[4]
      %0: f32[4] = dim_order_ops._to_dim_order_copy(%w) {dtype=f32, dim_order=[0]}
      %1: f32[4] = aten.add.Tensor(%x, %0)
      return %1
    }""")
    assert reasons(p) == ["the constant %w has no data"]


def test_an_evaluation_that_raises_leaves_the_node_computed():
    _, p = fold(
        """
    graph @g {
      input %x: f32[4]
      param %w: f32[4]
      %0: f32[4] = aten.bitwise_not(%w)
      %1: f32[4] = aten.add.Tensor(%x, %0)
      return %1
    }""",
        w=torch.ones(4),
    )
    ((node, reason),) = p.last_report.skipped
    assert node == "%0: f32[4] = aten.bitwise_not(%w)"
    assert reason == "evaluating it failed: NotImplementedError: \"bitwise_not_cpu\" not implemented for 'Float'"


def test_a_node_whose_result_size_depends_on_its_data_is_not_folded():
    """Its result types are told (on fake tensors) before it is evaluated: a boolean mask's result
    depends on the mask's data, so they cannot be, and the node stays computed."""
    _, p = fold(
        """
    graph @g {
      input %x: f32[2]
      param %w: f32[4]
      param %mask: bool[4]
      %0: f32[2] = aten.index.Tensor(%w) {indices=[%mask]}
      %1: f32[2] = aten.add.Tensor(%x, %0)
      return %1
    }""",
        w=torch.arange(4.0),
        mask=torch.tensor([True, False, True, False]),
    )
    (reason,) = reasons(p)
    assert reason.startswith("evaluating it on fake tensors failed: DynamicOutputShapeException")


def test_a_result_of_another_type_than_the_node_says_is_an_error_naming_the_node():
    graph = parse_graph("""
    graph @g {
      input %x: f32[8]
      %0: f32[8] = aten.arange.start_step() {start=0, end=8}
      %1: f32[8] = aten.add.Tensor(%x, %0)
      return %1
    }""")
    before = print_graph(graph)
    with pytest.raises(PassFailure) as failure:
        PassManager("fold-constants").run(graph)
    message = str(failure.value)
    assert (
        "aten.arange.start_step" in message
        and "gave i64[8] for result 0, but the node's result type is f32[8]" in message
    )
    assert print_graph(graph) == before  # rolled back


# ----------------------------------------------------------------------------- end to end


def _pipeline_with_fold():
    """The default pipeline, which runs fold-constants after the pattern rewrites that match ops
    folding would turn into constants (xnnpack.safe-softmax matches a full_like), before the
    rewrites it saves work or delegation (scalar operands, casts)."""
    from lowering import DEFAULT_PIPELINE

    passes = parse_pipeline(DEFAULT_PIPELINE)
    assert sum(isinstance(p, FoldConstants) for p in passes) == 1
    return passes


class ScaleShiftCast(torch.nn.Module):
    """x * 2 (a lifted i64 constant cast to f32), + torch.arange(8) (arange, cast), + a bf16 weight cast to f32."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(
            torch.randn(8, generator=torch.Generator().manual_seed(0)).to(torch.bfloat16), requires_grad=False
        )

    def forward(self, x):
        return x * 2 + torch.arange(8) + self.w.float()


def test_end_to_end_every_compute_op_is_delegated():
    import lowering
    from xir_tools.harness import delegate_count, delegated_ops, outside_ops, run_pte, to_buffer

    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(1))
    ep = torch.export.export(ScaleShiftCast(), (x,))
    pipeline = _pipeline_with_fold()
    partitioner = lowering.XnnpackPartitioner(pipeline=pipeline)
    edge = lowering.to_edge_transform_and_lower(ep, partitioner=[partitioner])
    assert "fold-constants" in partitioner.rewrites_applied
    folder = next(p for p in pipeline if isinstance(p, FoldConstants))
    assert folder.folded == {"dim_order_ops._to_dim_order_copy": 3, "aten.arange.start_step": 1}
    assert outside_ops(edge) == {} and delegate_count(edge) == 1
    assert delegated_ops(edge) == {"aten.mul.Tensor": 1, "aten.add.Tensor": 2}
    (out,) = run_pte(to_buffer(edge), (x,))
    assert torch.equal(out, ep.module()(x))


class Accumulate(torch.nn.Module):
    """A running sum in a buffer (mutated every call: never folded from) beside constant subexpressions."""

    def __init__(self):
        super().__init__()
        self.register_buffer("total", torch.zeros(8))  # (ExecuTorch starts a mutable buffer at zero)
        self.register_buffer("scale", torch.arange(4.0))

    def forward(self, x):
        y = x * (self.total * 2) + torch.arange(8) + self.scale.sum()
        self.total.add_(x.sum(0))
        return y


def test_end_to_end_a_mutated_buffer_keeps_its_state():
    """Rewritten with fold-constants only (not delegated), serialized, run three times in one loaded
    method: the buffer's value changes between calls, and every call matches eager."""
    from executorch.exir import EdgeCompileConfig, to_edge

    import lowering
    from xir_tools.harness import load_method, to_buffer

    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(2))
    eager = Accumulate()
    ep = torch.export.export(copy.deepcopy(eager), (x,))
    folder = FoldConstants()
    partitioner = lowering.XnnpackPartitioner(pipeline=[folder])
    edge = to_edge(ep, compile_config=EdgeCompileConfig(_check_ir_validity=False)).transform(
        partitioner.transform_passes()
    )
    assert folder.folded == {
        "dim_order_ops._to_dim_order_copy": 2,
        "aten.arange.start_step": 1,
        "aten.sum.dim_IntList": 1,
    }
    assert folder.last_report.skipped == []  # b_total is state, not a constant: nothing to explain
    _program, method = load_method(to_buffer(edge))  # (the method needs its program alive)
    for _ in range(3):
        out = method.execute([x])[0].clone()
        assert torch.allclose(out, eager(x), rtol=0, atol=1e-5)


def test_end_to_end_a_mutated_buffer_read_inside_a_delegate_keeps_its_state():
    """The same program lowered whole (default pipeline): the multiply that reads the mutated buffer
    is delegated, the buffer stays the program's (it is state, not a delegate constant), and three
    calls in one loaded method match eager."""
    import lowering
    from xir_tools.harness import delegated_ops, load_method, to_buffer

    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(3))
    eager = Accumulate()
    ep = torch.export.export(copy.deepcopy(eager), (x,))
    edge = lowering.to_edge_transform_and_lower(ep, partitioner=[lowering.XnnpackPartitioner()])
    assert delegated_ops(edge)["aten.mul.Tensor"] == 2
    from executorch.exir import to_edge

    graph = xir.from_exported_program(to_edge(torch.export.export(copy.deepcopy(eager), (x,))).exported_program())
    assert graph.input_named("b_total").input_kind is InputKind.state
    assert graph.input_named("b_scale").input_kind is InputKind.buffer
    _program, method = load_method(to_buffer(edge))  # (the method needs its program alive)
    for _ in range(3):
        out = method.execute([x])[0].clone()
        assert torch.allclose(out, eager(x), rtol=0, atol=1e-5)


def test_the_weight_of_a_decomposed_linear_is_not_folded():
    """to_backend decomposes a linear into permute(weight) -> addmm; ExecuTorch's XNNPACK
    preprocessing rebuilds the linear from that permute, so folding it into a transposed constant
    broke the lowering (found by the fuzzer: "a and b must have same reduction dim")."""
    from xir_tools.harness import lower

    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(12, 3), torch.nn.ReLU()).eval()
    inputs = (torch.randn(9, 12),)
    ep = torch.export.export(module, inputs)
    ours = lower(ep, inputs, "xir", via="backend")
    assert ours.ran, ours.error
    assert torch.allclose(ours.outputs[0], module(*inputs), atol=1e-5)
    assert ours.delegated["aten.addmm"] == 1 and not ours.outside, dict(ours.outside)
