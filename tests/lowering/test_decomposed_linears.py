"""Linears that ExecuTorch decomposes, delegated as linears (part of issue 14), as ExecuTorch's own
XNNPACK op tests (test_linear.py) build them: the same modules, shapes and quantization configs.

``to_edge()`` (then ``to_backend``) decomposes a 3-D linear into ``view -> addmm/mm -> view`` (with
symbolic sizes when the batch dims are dynamic), its weight read through ``permute``; quantized,
the views sit between the dequantize of the input and the matrix multiply. XNNPACK's
preprocessing rebuilds one linear from such a pattern when the delegate holds all of it, so xir
delegates the views with the matrix multiply (``capability.decomposed_linears``). Each case is
lowered both ways (``to_edge_transform_and_lower`` and ``to_edge().to_backend()``), run on the
ExecuTorch runtime at the example's size and at the other ends of its dynamic dims, and compared
with eager PyTorch (for quantized programs, the converted pt2e model).

Also here: torchao's group-wise int4 linears (``Int8DynamicActivationIntxWeightConfig``), and where
stock XNNPACK is wrong and xir is right: int4 per-channel weights with an odd number of input
channels, and torchao int4 weights with zero points (each run on the runtime against eager).
"""

from __future__ import annotations

import functools

import pytest
import torch
from executorch.backends.xnnpack.partition.config.xnnpack_config import ConfigPrecisionType
from executorch.exir import EdgeCompileConfig, to_edge

import lowering
from lowering.fx.quantizer import quantize_pt2e
from lowering.partition import NotLowerable
from xir_tools.harness import lower, max_error, run_pte

VIAS = ("etal", "backend")
MATMULS = ("aten.linear", "aten.addmm", "aten.mm")
DYNAMIC = ConfigPrecisionType.DYNAMIC_QUANT


class Linear(torch.nn.Module):  # test_linear.py's BaseLinear
    def __init__(self, in_channels, out_channels, bias=True, dtype=torch.float):
        super().__init__()
        self.linear = torch.nn.Linear(in_channels, out_channels, bias=bias).to(dtype)

    def forward(self, x):
        return self.linear(x)


class LinearRelu(Linear):  # test_linear.py's LinearReluModule
    def forward(self, x):
        return torch.relu(self.linear(x))


class SharedDQChain(torch.nn.Module):  # two linears reading one input (its dynamic Q/DQ duplicated)
    def __init__(self, in_channels=13, out_channels=17):
        super().__init__()
        self.w1 = torch.nn.Parameter(torch.rand(out_channels, in_channels))
        self.b1 = torch.nn.Parameter(torch.rand(out_channels))
        self.w2 = torch.nn.Parameter(torch.rand(out_channels, in_channels))
        self.b2 = torch.nn.Parameter(torch.rand(out_channels))

    def forward(self, x):
        return torch.nn.functional.linear(x, self.w1, self.b1) + torch.nn.functional.linear(x, self.w2, self.b2)


def _export(module, inputs, dynamic_shapes=None):
    return torch.export.export(module, inputs, dynamic_shapes=dynamic_shapes, strict=True)


def _batch_dims(rows: int, batch_dims: int) -> tuple:
    return ({i: torch.export.Dim(f"batch{i}", min=2, max=rows) for i in range(batch_dims)},)


def _sizes(shape: list[int], dynamic: dict, which: str) -> list[int]:
    """``shape`` with each dynamic dim at its minimum (``which="min"``) or maximum."""
    shape = list(shape)
    for dim, spec in dynamic.items():
        shape[dim] = max(spec.min, 2) if which == "min" else min(spec.max, 9)
    return shape


def _assert_linear_delegated(result, linears: int = 1, delegates: int = 1):
    assert result.ran, result.error
    assert sum(result.delegated[op] for op in MATMULS) == linears, result.delegated
    assert not any(result.outside[op] for op in MATMULS), result.outside
    assert not result.outside["aten.view_copy"], result.outside  # the views went in with their linear
    assert result.delegates == delegates


def _assert_matches(result, ep, inputs: tuple, dynamic_shapes, atol: float, dtype=torch.float):
    """The lowered program against eager on ``inputs`` and on the other ends of the dynamic dims."""
    runs = [inputs]
    if dynamic_shapes:
        for which in ("min", "max"):
            torch.manual_seed(1)
            runs.append((torch.randn(_sizes(inputs[0].shape, dynamic_shapes[0], which)).to(dtype),))
    for run in runs:
        outputs = result.outputs if run is inputs else run_pte(result.buffer, run)
        expected = ep.module()(*run)
        error = max_error(outputs, [expected])
        assert error <= atol, f"max error {error} on input {tuple(run[0].shape)}"


# ----------------------------------------------------------------------------------- fp32


@pytest.mark.parametrize("via", VIAS)
@pytest.mark.parametrize(
    "rows,in_channels,out_channels,bias,batch_dims",
    [(3, 4, 4, True, 1), (3, 4, 4, False, 2), (4, 37, 17, True, 2), (4, 37, 17, False, 1)],
)
def test_fp32_linear_fused_relu(rows, in_channels, out_channels, bias, batch_dims, via):
    """test_fp32_linear_fused_relu: with 2 dynamic batch dims the views have symbolic sizes. (Before:
    xir delegated the matrix multiply without its views, and fold-constants transposed its weight:
    XNNPACK's preprocessing then rebuilt the linear with the transposed weight; wrong numbers.)"""
    torch.manual_seed(0)
    inputs = (torch.randn([rows] * batch_dims + [in_channels]),)
    dynamic = _batch_dims(rows, batch_dims)
    ep = _export(LinearRelu(in_channels, out_channels, bias).eval(), inputs, dynamic)
    result = lower(ep, inputs, "xir", via=via)
    _assert_linear_delegated(result)
    assert result.delegated["aten.relu"] == 1
    _assert_matches(result, ep, inputs, dynamic, atol=1e-5)


def test_fp32_linear_on_8d_input_leaves_its_views_outside():
    """A decomposed linear goes in whole only when its input and output are at most 6-D: on an 8-D
    input the matrix multiply goes alone (its views stay outside)."""
    inputs = (torch.randn(2, 1, 2, 1, 2, 1, 3, 16),)
    ep = _export(Linear(16, 8).eval(), inputs)
    result = lower(ep, inputs, "xir", via="backend")
    assert result.ran, result.error
    assert result.delegated["aten.addmm"] == 1 and result.outside["aten.view_copy"] == 2
    assert result.err([ep.module()(*inputs)]) <= 1e-5
    # recognised as a decomposed linear, but not delegated whole: its matmul is checked on its own
    # before XNNPACK's preprocessing may rebuild it (an exact rebuild here: nothing is kept)
    plan = result.partitioner.last_plan
    assert len(plan.linears) == 1 and plan.whole_linears == [] and plan.kept_matmuls == []


@pytest.mark.parametrize("mode", ["fp32", "static", "dynamic"])
def test_linear_on_a_1d_input_is_delegated_with_its_views(mode):
    """fuzz static seed 1153: ``to_edge`` writes a linear on a 1-D input as ``view -> addmm -> view``.
    Before, xir did not take it as a decomposed linear (it wanted an input of rank 2 or more): in
    quantized programs the views and addmm stayed outside ("only one of input and weight is
    quantized") where stock delegates all of it and runs correctly. (Dynamic: XNNPACK needs a
    per-channel weight.)"""
    torch.manual_seed(0)
    inputs = (torch.randn(31),)
    module = Linear(31, 6).eval()
    if mode != "fp32":
        module = quantize_pt2e(module, inputs, is_per_channel=mode == "dynamic", is_dynamic=mode == "dynamic")
    ep = _export(module, inputs)
    result, stock = lower(ep, inputs, "xir", via="backend"), lower(ep, inputs, "stock", via="backend")
    _assert_linear_delegated(result)
    assert not result.outside, result.outside
    assert stock.ran and not stock.outside  # as stock
    _assert_matches(result, ep, inputs, None, atol=1e-5 if mode == "fp32" else 0.05)


# ------------------------------------------------------------------------- static quantized


@functools.lru_cache(maxsize=None)
def _static(kind: str, bias: bool, batch_dims: int, per_channel: bool):
    torch.manual_seed(0)
    rows, in_channels, out_channels = 4, 37, 17
    inputs = (torch.randn([rows] * batch_dims + [in_channels]),)
    module = (LinearRelu if kind == "relu" else Linear)(in_channels, out_channels, bias).eval()
    dynamic = _batch_dims(rows, batch_dims)
    converted = quantize_pt2e(module, inputs, is_per_channel=per_channel, is_dynamic=False)
    return _export(converted, inputs, dynamic), inputs, dynamic


def _output_scale(ep) -> float:
    """The quantization step of the program's output (ExecuTorch's tests allow one)."""
    (output,) = ep.graph.output_node().args[0]
    return float(output.args[1])


@pytest.mark.parametrize("via", VIAS)
@pytest.mark.parametrize(
    "kind,per_channel,bias,batch_dims",
    [("linear", False, True, 2), ("linear", False, False, 1), ("relu", False, False, 2), ("linear", True, True, 2)],
    ids=["qs8-2-batch-dims", "qs8-no-bias", "qs8-relu-2-batch-dims", "qc8-2-batch-dims"],
)
def test_statically_quantized_linear(kind, per_channel, bias, batch_dims, via):
    """test_qs8_linear, test_qs8_linear_fused_relu, test_qc8_linear: ``dequantize -> view -> addmm ->
    view -> quantize`` is one quantized linear (before: the views stayed outside, and the Q/DQ ran in
    two more delegates)."""
    ep, inputs, dynamic = _static(kind, bias, batch_dims, per_channel)
    result = lower(ep, inputs, "xir", via=via)
    _assert_linear_delegated(result)
    assert not any("quantized_decomposed" in op for op in result.outside), result.outside
    _assert_matches(result, ep, inputs, dynamic, atol=1e-3 + _output_scale(ep))


# ----------------------------------------------------------------------- dynamic quantized


@functools.lru_cache(maxsize=None)
def _dynamic(module_kind: str, dtype: torch.dtype, bias: bool):
    torch.manual_seed(0)
    if module_kind == "one-batch-dim":  # test_qd8_f32/f16_per_channel_linear
        module, inputs = Linear(13, 17, bias, dtype), (torch.randn(1, 8, 13).to(dtype),)
        dynamic = ({1: torch.export.Dim("batch", max=100)},)
    else:  # test_qd8_per_channel_linear_with_two_batch: one Dim for both batch dims
        batch = torch.export.Dim("batch", max=100)
        module, inputs = Linear(14, 15, bias, dtype), (torch.randn(2, 2, 14).to(dtype),)
        dynamic = ({0: batch, 1: batch},)
    converted = quantize_pt2e(module.eval(), inputs, is_per_channel=True, is_dynamic=True)
    return _export(converted, inputs, dynamic), inputs, dynamic


@pytest.mark.parametrize("via", VIAS)
@pytest.mark.parametrize(
    "module_kind,dtype,bias,per_op_mode",
    [
        ("one-batch-dim", torch.float, False, True),
        ("one-batch-dim", torch.float, True, False),
        ("one-batch-dim", torch.half, True, True),
        ("two-batch-dims", torch.float, False, False),
        ("two-batch-dims", torch.half, True, True),
    ],
    ids=["qd8-f32-per-op", "qd8-f32-bias", "qd8-f16-bias-per-op", "qd8-f32-two-batch-dims", "qd8-f16-two-batch-dims"],
)
def test_dynamically_quantized_linear(module_kind, dtype, bias, per_op_mode, via):
    """test_qd8_f32/f16_per_channel_linear, test_qd8_per_channel_linear_with_two_batch: ``choose_qparams
    -> quantize -> dequantize -> view -> addmm/mm -> view`` is one dynamically quantized linear (the
    two-batch-dims output is typed ``[s0, (s0**2)//s0, 15]``: the same batch dims, symbolically)."""
    ep, inputs, dynamic = _dynamic(module_kind, dtype, bias)
    result = lower(ep, inputs, "xir", via=via, per_op_mode=per_op_mode, config_precisions=DYNAMIC)
    _assert_linear_delegated(result)
    assert not result.outside, result.outside
    _assert_matches(result, ep, inputs, dynamic, atol=5e-2, dtype=dtype)


@pytest.mark.parametrize("via", VIAS)
@pytest.mark.parametrize("per_op_mode", [True, False])
def test_shared_dynamic_quantization_chain(per_op_mode, via):
    """test_qd8_f32_per_channel_shared_dq_chain: two linears of one 3-D input, each with its own copy
    of the input's dynamic Q/DQ; static views (before: they read a dequantize and stayed outside)."""
    torch.manual_seed(42)
    inputs = (torch.randn(1, 2, 13),)
    ep = _export(quantize_pt2e(SharedDQChain().eval(), inputs, is_per_channel=True, is_dynamic=True), inputs)
    result = lower(ep, inputs, "xir", via=via, per_op_mode=per_op_mode, config_precisions=DYNAMIC)
    _assert_linear_delegated(result, linears=2, delegates=2 if per_op_mode else 1)
    assert set(result.outside) == {"aten.add.Tensor"}  # fp32 is not among the precisions
    _assert_matches(result, ep, inputs, None, atol=1.5e-1)


@functools.lru_cache(maxsize=None)
def _int4_per_channel(in_channels: int, out_channels: int, bias: bool, dtype: torch.dtype = torch.float):
    torch.manual_seed(0)
    inputs = (torch.randn(1, 2, in_channels).to(dtype),)
    dynamic = ({1: torch.export.Dim("batch", max=100)},)
    converted = quantize_pt2e(
        Linear(in_channels, out_channels, bias, dtype).eval(),
        inputs,
        is_per_channel=True,
        is_dynamic=True,
        weight_qmin=-8,
        weight_qmax=7,
    )
    return _export(converted, inputs, dynamic), inputs, dynamic


@pytest.mark.parametrize("via", VIAS)
@pytest.mark.parametrize("dtype", [torch.float, torch.half], ids=["f32", "f16"])
@pytest.mark.parametrize("bias", [True, False])
def test_int4_per_channel_linear(bias, dtype, via):
    """test_linear_qd8_{f32,f16}_per_channel_int4 with an even number of input channels: delegated."""
    ep, inputs, dynamic = _int4_per_channel(2, 1, bias, dtype)
    result = lower(ep, inputs, "xir", via=via, config_precisions=DYNAMIC)
    _assert_linear_delegated(result)
    _assert_matches(result, ep, inputs, dynamic, atol=5e-2, dtype=dtype)


@pytest.mark.parametrize("via", VIAS)
def test_int4_per_channel_weight_with_odd_input_channels_stays_outside(via):
    """test_linear_qd8_f32_per_channel_int4 with 63 input channels: XNNPACK 1.5.1 (qd8 x qc4w) gets
    every row but the first wrong when the input has 2 to 15 rows. Stock delegates it (wrong by
    about the outputs' own size on 2 rows; ExecuTorch's test passes only when its random batch
    size is 1 or at least 16); xir leaves the linear outside with its Q/DQ, and the program is
    right on every row count (1, 2, 5, 17 here)."""
    ep, inputs, _ = _int4_per_channel(63, 127, False)
    reference = ep.module()(*inputs)
    stock, ours = (
        lower(ep, inputs, "stock", via=via, config_precisions=DYNAMIC),
        lower(ep, inputs, "xir", via=via, config_precisions=DYNAMIC),
    )
    assert stock.ran and stock.delegates == 1
    assert stock.err([reference]) > 0.2 * reference.abs().max().item()
    assert ours.ran, ours.error
    assert ours.delegates == 0 and sum(ours.outside[op] for op in MATMULS) == 1
    assert ours.err([reference]) <= 1e-5
    assert "odd number of input channels (63)" in ours.partitioner.report()
    for rows in (1, 5, 17):
        torch.manual_seed(rows)
        run = (torch.randn(1, rows, 63),)
        error = max_error(run_pte(ours.buffer, run), [ep.module()(*run)])
        assert error <= 1e-5, f"max error {error} on {rows} rows"


@pytest.mark.parametrize("via", VIAS)
def test_fp16_int4_per_channel_weight_with_odd_input_channels_is_not_lowerable(via):
    """test_linear_qd8_f16_per_channel_int4 with 63 input channels: XNNPACK 1.5.1's qd8-f16-qc4w
    kernel is as wrong as the fp32 one (every row but the first of 2 to 15 rows; measured for 3, 5,
    17, 33, 63 and 127 input channels, right for 2 and 64). Stock's fp16 op test passes only
    because its random batch sizes (1..100) happen to avoid 2..15. Outside a delegate the program
    cannot run either: ExecuTorch's portable choose_qparams.tensor takes fp32 inputs only and aborts
    the process on an fp16 one (before, xir left the linear outside and the program aborted when
    run). So xir raises NotLowerable naming the linear and both reasons."""
    ep, inputs, _ = _int4_per_channel(63, 127, False, torch.half)
    reference = ep.module()(*inputs).float()
    stock = lower(ep, inputs, "stock", via=via, config_precisions=DYNAMIC)
    assert stock.ran and stock.delegates == 1
    assert stock.err([reference]) > 0.2 * reference.abs().max().item()  # 2 rows: wrong
    partitioner = lowering.XnnpackPartitioner(config_precisions=DYNAMIC)
    with pytest.raises(
        NotLowerable,
        match=r"odd number of input channels \(63\).*choose_qparams kernel takes an fp32 "
        r"input, this one is f16",
    ):
        if via == "etal":
            lowering.to_edge_transform_and_lower(ep, partitioner=[partitioner])
        else:
            edge = to_edge(ep, compile_config=EdgeCompileConfig(_check_ir_validity=False))
            edge.transform(partitioner.transform_passes()).to_backend(partitioner)


# ---------------------------------------------------------------- torchao group-wise int4


def _groupwise(
    in_rows: int,
    in_channels: int,
    out_channels: int,
    group: int,
    bias: bool,
    rank: int = 3,
    dtype=torch.float,
    **weight_options,
):
    from torchao.quantization.granularity import PerGroup
    from torchao.quantization.quant_api import Int8DynamicActivationIntxWeightConfig, quantize_
    from torchao.utils import unwrap_tensor_subclass

    torch.manual_seed(0)
    module = Linear(in_channels, out_channels, bias, dtype).eval()
    inputs = (torch.randn([1] * (rank - 2) + [in_rows, in_channels]).to(dtype),)
    quantize_(
        module,
        Int8DynamicActivationIntxWeightConfig(
            weight_dtype=torch.int4, weight_granularity=PerGroup(group), **weight_options
        ),
    )
    unwrap_tensor_subclass(module)
    return _export(module, inputs), inputs


@pytest.mark.parametrize(
    "rows,in_channels,group,out_channels,bias,rank,dtype,atol",
    [
        (17, 64, 32, 92, True, 3, torch.float, 5e-3),
        (31, 128, 64, 128, False, 2, torch.float, 5e-3),
        (2, 32, 32, 17, False, 2, torch.half, 1e-2),
        (17, 64, 32, 92, True, 3, torch.half, 1e-2),
        (31, 128, 64, 128, True, 3, torch.bfloat16, 8e-2),
    ],
    ids=["f32-3d", "f32-2d-groups-of-64", "f16-2d", "f16-3d", "bf16-3d"],
)
def test_groupwise_int4_linear(rows, in_channels, group, out_channels, bias, rank, dtype, atol):
    """test_linear_qd8_{f32,f16,bf16}_per_token_weight_per_channel_group_int4: torchao's
    choose_qparams_affine -> quantize_affine -> dequantize_affine (per token) and dequantize_affine of
    the int4 weight (groups of input channels) are one linear in one delegate. (Before: the affine
    ops were opaque to xir; left outside, a program with them has no kernel for them.)"""
    ep, inputs = _groupwise(rows, in_channels, out_channels, group, bias, rank, dtype)
    result = lower(
        ep, inputs, "xir", via="etal", per_op_mode=True, config_precisions=DYNAMIC, enable_bf16=dtype is torch.bfloat16
    )
    _assert_linear_delegated(result)
    assert not result.outside, result.outside
    expected = ep.module()(*inputs)
    assert result.err([expected]) <= atol + 5e-3 * expected.abs().max().item()


def test_groupwise_int4_linear_with_an_unsupported_group_size_raises():
    """test_linear_qd8_per_token_groupwise_unsupported_groupsize: XNNPACK needs int4 groups of a
    multiple of 32 input channels, and torchao's affine ops have no ExecuTorch kernel outside a
    delegate: xir raises while partitioning (an AssertionError, with the message of stock's
    preprocessing, which raises it later), naming the linear and why."""
    ep, inputs = _groupwise(1, 60, 60, 30, True, rank=2)
    from lowering import XnnpackPartitioner, to_edge_transform_and_lower

    with pytest.raises(AssertionError, match="requires group_size to be a multiple of 32, but got 30") as raised:
        to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner(config_precisions=DYNAMIC, per_op_mode=True)])
    assert isinstance(raised.value, NotLowerable) and "aten.linear" in str(raised.value)


def test_groupwise_int4_weight_with_zero_points_is_not_delegated():
    """An int4 weight quantized asymmetrically (zero points other than 0): XNNPACK's quantized
    weights have no zero point and stock's lowering drops them (its outputs are wrong); xir
    refuses, reading the zero points even from the fake-tensor copy of the program ExecuTorch
    hands the partitioner."""
    from torchao.quantization.quant_primitives import MappingType

    ep, inputs = _groupwise(4, 64, 8, 32, True, rank=3, weight_mapping_type=MappingType.ASYMMETRIC)
    reference = ep.module()(*inputs)
    stock = lower(ep, inputs, "stock", via="etal", per_op_mode=True, config_precisions=DYNAMIC)
    assert stock.ran and stock.delegates == 1
    assert stock.err([reference]) > 0.1 * reference.abs().max().item()
    from lowering import XnnpackPartitioner, to_edge_transform_and_lower

    with pytest.raises(NotLowerable, match="zero points other than 0"):
        to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner(config_precisions=DYNAMIC, per_op_mode=True)])


def test_groupwise_int4_linear_decomposed_by_to_edge_is_not_delegated():
    """Through ``to_edge().to_backend()`` a torchao linear is decomposed with its quantize/dequantize
    ops inside the linear's source pattern: XNNPACK's preprocessing rebuilds the linear from the
    pattern's first input and the raw int8 weight (stock's outputs are garbage). xir keeps it out,
    and since its affine ops have no kernel outside XNNPACK, raises NotLowerable saying why (before,
    the program failed later in to_executorch: "Missing out variants")."""
    from executorch.exir import EdgeCompileConfig, to_edge

    from lowering import XnnpackPartitioner

    ep, inputs = _groupwise(17, 64, 92, 32, True, rank=3)
    reference = ep.module()(*inputs)
    stock = lower(ep, inputs, "stock", via="backend", per_op_mode=True, config_precisions=DYNAMIC)
    assert stock.ran and stock.delegates == 1
    assert stock.err([reference]) > 10 * reference.abs().max().item()
    ours = lower(ep, inputs, "xir", via="backend", per_op_mode=True, config_precisions=DYNAMIC)
    assert not ours.ran and ours.error.startswith("NotLowerable")
    edge = to_edge(ep, compile_config=EdgeCompileConfig(_check_ir_validity=False))
    with pytest.raises(NotLowerable, match="rebuild the linear from the raw int8 weight"):
        edge.to_backend(XnnpackPartitioner(per_op_mode=True, config_precisions=DYNAMIC))
