"""Convolutions as ExecuTorch's own XNNPACK op tests build them (test_conv2d.py, test_conv1d.py;
part of issue 14), and the per-channel quantized slice of test_slice_copy.py.

- A statically quantized conv with ``padding='same'`` and an even kernel exports as ``dequantize
  -> constant_pad_nd -> convolution -> quantize``: the pad goes into the delegate with the conv (as
  stock does), where XNNPACK's preprocessing quantizes it (InsertPadQDQPass) and pads with the
  zero point. (Before: the pad stayed outside in float, and the conv, reading a float input with
  a quantized weight, stayed outside too.)
- A dynamically quantized transposed conv (per-channel weight, on its output-channel axis) is a
  deconvolution XNNPACK runs with a dynamically quantized input, as stock delegates it.
- With ``config_precisions=FP32`` on a quantized program whose weight dequantizes were folded into
  constants (``constant_prop_pass``), the conv runs in fp32 on the dequantized activation, its
  Q/DQ outside.
- test_qs8_per_channel_slice_copy_matching_distinct_constant_qparams asserts that stock tags a
  slice between per-channel Q/DQ: lowering that partition fails in XNNPACK's own preprocessing
  (both ways), so xir leaves the slice outside and its program runs and matches eager.

Every case is lowered both ways (``to_edge_transform_and_lower`` and ``to_edge().to_backend()``),
serialized, run on ExecuTorch's runtime and compared with eager PyTorch (the converted pt2e model).
"""

from __future__ import annotations

import functools

import pytest
import torch
from executorch.backends.xnnpack.partition.config.xnnpack_config import ConfigPrecisionType

from lowering.fx.quantizer import quantize_pt2e
from xir_tools.harness import lower, max_error, run_pte

VIAS = ("etal", "backend")
QDQ = ("quantized_decomposed.quantize_per_tensor", "quantized_decomposed.dequantize_per_tensor")


def _export(module, inputs, dynamic_shapes=None):
    return torch.export.export(module, inputs, dynamic_shapes=dynamic_shapes, strict=True)


def _output_scale(ep) -> float:
    (output,) = ep.graph.output_node().args[0]
    return float(output.args[1])


# ---------------------------------------------------------- static: even kernel, 'same' padding


class SamePadFlatten(torch.nn.Module):  # test_conv2d.py's EvenSamePadFlatten
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 16, (2, 1), padding="same")

    def forward(self, x):
        return torch.flatten(self.conv(torch.reshape(x, (1, 1, 256, 1))), 1)


def _same_pad_case(name: str):
    if name == "conv2d":  # test_qs8_conv2d_even_kernel_same_padding
        return torch.nn.Conv2d(2, 4, (4, 4), padding="same"), (torch.randn(1, 2, 8, 8),)
    if name == "conv2d-no-bias":
        return torch.nn.Conv2d(2, 4, (4, 4), padding="same", bias=False), (torch.randn(1, 2, 8, 8),)
    if name == "depthwise":  # test_qs8_conv2d_depthwise_even_kernel_same_padding
        return torch.nn.Conv2d(4, 4, (4, 4), groups=4, padding="same"), (torch.randn(1, 4, 8, 8),)
    if name == "flatten":  # test_qs8_even_kernel_same_padding_flatten
        return SamePadFlatten(), (torch.randn(1, 1, 256, 1),)
    if name == "conv1d":  # test_qs8_conv1d_even_kernel_same_padding, kernel 4
        return torch.nn.Conv1d(2, 4, 4, padding="same"), (torch.randn(1, 2, 16),)
    raise KeyError(name)


@functools.lru_cache(maxsize=None)
def _same_pad_program(name: str):
    torch.manual_seed(0)
    module, inputs = _same_pad_case(name)
    converted = quantize_pt2e(module.eval(), inputs)
    return converted, inputs


@pytest.mark.parametrize(
    "name, via",
    [
        ("conv2d", "etal"),
        ("conv2d", "backend"),
        ("conv2d-no-bias", "backend"),
        ("depthwise", "etal"),
        ("flatten", "backend"),
        ("conv1d", "etal"),
    ],
)
def test_quantized_even_kernel_same_padding(name, via):
    converted, inputs = _same_pad_program(name)
    ep = _export(converted, inputs)
    expected = ep.module()(*inputs)
    scale = _output_scale(ep)
    result = lower(ep, inputs, "xir", via=via)
    assert result.ran, result.error
    assert result.delegated["aten.constant_pad_nd"] == 1 and result.delegated["aten.convolution"] == 1, result.delegated
    assert not result.outside["aten.constant_pad_nd"] and not result.outside["aten.convolution"], result.outside
    assert result.delegates == 1
    assert max_error(result.outputs, [expected]) <= 2 * scale  # (the op tests' qtol=2; measured: 0)


PAD_IR = """graph @g {{
  buffer %w: i8[4,2,4,4]
  input %x: f32[1,2,8,8]
  %0: f32[4,2,4,4] = quantized_decomposed.dequantize_per_tensor(%w) {{scale=0.01, zero_point=0, quant_min=-127, quant_max=127, dtype=i8}}
  %1: i8[1,2,8,8] = quantized_decomposed.quantize_per_tensor(%x) {{scale=0.1, zero_point=3, quant_min=-128, quant_max=127, dtype=i8}}
  %2: f32[1,2,8,8] = quantized_decomposed.dequantize_per_tensor(%1) {{scale=0.1, zero_point=3, quant_min=-128, quant_max=127, dtype=i8}}
  %3: f32{padded} = aten.constant_pad_nd(%2) {{pad={pad}, value={value}}}
  %4: f32[1,4,{out}] = aten.convolution(%3, %0) {{bias=none, stride=[1, 1], padding=[0, 0], dilation=[1, 1], transposed=false, output_padding=[0, 0], groups=1}}
  %5: i8[1,4,{out}] = quantized_decomposed.quantize_per_tensor(%4) {{scale=0.1, zero_point=0, quant_min=-128, quant_max=127, dtype=i8}}
  %6: f32[1,4,{out}] = quantized_decomposed.dequantize_per_tensor(%5) {{scale=0.1, zero_point=0, quant_min=-128, quant_max=127, dtype=i8}}
  return %6
}}
"""


@pytest.mark.parametrize(
    "pad, value, padded, out, where",
    [
        ([1, 2, 1, 2], 0.0, "[1,2,11,11]", "8,8", "with-the-conv"),
        ([1, 2, 1, 2], 0.5, "[1,2,11,11]", "8,8", "between-conversions"),  # pads with 0.5, not the zero point
        ([1, 2, 1, 2, 1, 0], 0.0, "[1,3,11,11]", "8,8", "outside"),  # pads the channels too
    ],
)
def test_pad_goes_with_the_quantized_conv_only_when_it_pads_spatial_dims_with_zero(pad, value, padded, out, where):
    """The rule (IR level): the pad joins the quantized conv only as stock's ConvolutionConfig takes
    it (value 0, spatial dims, no negative amounts); otherwise the conv stays outside, no Q/DQ
    folded. The pad then runs in fp32 between conversions unless it pads with 0 (XNNPACK's
    preprocessing quantizes the output of a zero pad that reads a dequantize)."""
    from lowering.capability import Options
    from lowering.partition import plan_partition
    from xir import parse_graph

    text = PAD_IR.format(pad=pad, value=value, padded=padded, out=out)
    if len(pad) == 6:
        text = text.replace("%w: i8[4,2,4,4]", "%w: i8[4,3,4,4]").replace("f32[4,2,4,4]", "f32[4,3,4,4]")
    graph = parse_graph(text)
    plan = plan_partition(graph, Options())
    conv = next(n for n in graph if n.op == "aten.convolution")
    pad_node = next(n for n in graph if n.op == "aten.constant_pad_nd")
    group = plan.group_of(conv)
    if where == "with-the-conv":
        assert group is not None and pad_node in group.nodes
        assert {n.op for n in group.implicit} == set(QDQ)  # weight and input dq, output q
        return
    assert group is None and not any(n.op in QDQ for g in plan.groups for n in g.implicit)
    pad_group = plan.group_of(pad_node)
    if where == "outside":
        assert pad_group is None
    else:  # with its input's dequantize as a conversion to f32
        assert pad_group is not None and pad_node.operands[0].producer in pad_group.nodes


# ------------------------------------------------------------ dynamic: transposed convolutions


class TransposedSeq(torch.nn.Module):  # test_conv2d.py's Conv2dDQSeq(transpose=True)
    def __init__(self):
        super().__init__()
        self.first = torch.nn.ConvTranspose2d(3, 8, 3, padding=1)
        self.second = torch.nn.ConvTranspose2d(8, 10, 3, padding=1)

    def forward(self, x):
        return self.second(self.first(x))


class TransposedParallel(torch.nn.Module):  # Conv2dDQParallel(transpose=True)
    def __init__(self):
        super().__init__()
        self.first = torch.nn.ConvTranspose2d(3, 8, 3, padding=1)
        self.second = torch.nn.ConvTranspose2d(3, 10, 3, padding=1)

    def forward(self, x):
        return self.first(x), self.second(x)


def _transposed_case(name: str):
    if name == "single":  # test_dq_conv2d_transpose
        return torch.nn.ConvTranspose2d(3, 10, (3, 3), padding=0), 1
    if name == "strided":  # stride 2 with output padding (not in the op tests)
        return torch.nn.ConvTranspose2d(3, 5, (3, 3), stride=2, padding=1, output_padding=1), 1
    if name == "seq":
        return TransposedSeq(), 2
    if name == "parallel":
        return TransposedParallel(), 2
    raise KeyError(name)


@functools.lru_cache(maxsize=None)
def _transposed_program(name: str):
    torch.manual_seed(0)
    module, convs = _transposed_case(name)
    inputs = (torch.randn(1, 3, 8, 8),)
    return quantize_pt2e(module.eval(), inputs, is_per_channel=True, is_dynamic=True), inputs, convs


@pytest.mark.parametrize(
    "name, per_op_mode, via",
    [
        ("single", True, "etal"),
        ("single", True, "backend"),
        ("strided", False, "etal"),
        ("seq", True, "backend"),
        ("seq", False, "etal"),
        ("parallel", True, "etal"),
    ],
)
def test_dynamically_quantized_transposed_conv(name, per_op_mode, via):
    converted, inputs, convs = _transposed_program(name)
    ep = _export(converted, inputs)
    expected = ep.module()(*inputs)
    expected = list(expected) if isinstance(expected, (tuple, list)) else [expected]
    result = lower(
        ep, inputs, "xir", via=via, per_op_mode=per_op_mode, config_precisions=ConfigPrecisionType.DYNAMIC_QUANT
    )
    assert result.ran, result.error
    assert result.delegated["aten.convolution"] == convs and not result.outside, (result.delegated, result.outside)
    assert result.delegates == (convs if per_op_mode else 1)
    # XNNPACK quantizes the activation itself (per tensor here too): within a few steps of eager
    largest = max(e.abs().max().item() for e in expected)
    assert max_error(result.outputs, expected) <= 0.02 * largest


# ------------------------------------------------ fp32 partitioner on a quantized conv (conv1d)


@functools.lru_cache(maxsize=None)
def _conv1d_quantized():
    torch.manual_seed(0)
    module = torch.nn.Conv1d(2, 1, 3, stride=2, padding=1).eval()  # test_conv1d.py's Conv1d
    inputs = (torch.randn(2, 2, 4),)
    return quantize_pt2e(module, inputs), inputs


@pytest.mark.parametrize("via", VIAS)
def test_fp32_partitioner_on_quantized_conv1d_after_constant_prop(via):
    """test_qs8_conv1d_with_floating_point_partitioner: the weight's dequantize folded into a float
    constant, the conv runs in fp32 in XNNPACK on the dequantized input (dynamic batch)."""
    from executorch.exir.passes.constant_prop_pass import constant_prop_pass

    converted, inputs = _conv1d_quantized()
    dynamic = ({0: torch.export.Dim("batch", min=2, max=10)},)

    def program():
        return constant_prop_pass(_export(converted, inputs, dynamic))

    runs = [inputs, (torch.randn(10, 2, 4),)]
    expected = [program().module()(*run) for run in runs]  # (lowering takes the folded constant away)
    result = lower(program(), inputs, "xir", via=via, config_precisions=ConfigPrecisionType.FP32)
    assert result.ran, result.error
    assert result.delegated == {"aten.convolution": 1}
    assert result.outside == {QDQ[0]: 2, QDQ[1]: 2}  # the Q/DQ run outside (quantized kernels)
    assert max_error(result.outputs, [expected[0]]) == 0.0
    assert max_error(run_pte(result.buffer, runs[1]), [expected[1]]) == 0.0


def test_fp32_partitioner_leaves_a_conv_with_a_dequantized_weight_outside():
    """Not folded (no constant_prop_pass): the weight is a dequantize, which would stay outside and
    reach the delegate as a run-time tensor. The conv stays outside."""
    converted, inputs = _conv1d_quantized()
    ep = _export(converted, inputs)
    expected = ep.module()(*inputs)
    result = lower(ep, inputs, "xir", config_precisions=ConfigPrecisionType.FP32)
    assert result.ran, result.error
    assert result.delegated == {} and result.outside["aten.convolution"] == 1
    assert max_error(result.outputs, [expected]) == 0.0


# -------------------------------------------------------- per-channel quantized slice_copy


class PerChannelSlice(torch.nn.Module):
    """test_qs8_per_channel_slice_copy_matching_distinct_constant_qparams's module (input and output
    scales equal, distinct constants). ``dtype``: the scales' dtype (ExecuTorch's portable
    quantize_per_channel kernel takes float64 scales only: with float32 ones the runtime aborts)."""

    def __init__(self, dtype=torch.float32):
        super().__init__()
        self.input_scales = torch.tensor([0.25, 0.5, 0.75, 1.0], dtype=dtype)
        self.output_scales = torch.tensor([0.25, 0.5, 0.75, 1.0], dtype=dtype)
        self.zero_points = torch.zeros(4, dtype=torch.int64)

    def forward(self, x):
        qd = torch.ops.quantized_decomposed
        q = qd.quantize_per_channel.default(x, self.input_scales, self.zero_points, 1, -128, 127, torch.int8)
        dq = qd.dequantize_per_channel.default(q, self.input_scales, self.zero_points, 1, -128, 127, torch.int8)
        sliced = torch.ops.aten.slice.Tensor(dq, 2, 0, 2)
        q = qd.quantize_per_channel.default(sliced, self.output_scales, self.zero_points, 1, -128, 127, torch.int8)
        return qd.dequantize_per_channel.default(q, self.output_scales, self.zero_points, 1, -128, 127, torch.int8)


@pytest.mark.parametrize("via", VIAS)
def test_per_channel_quantized_slice_stays_outside(via):
    """Stock tags the slice with its per-channel Q/DQ folded (what the op test asserts, on a fake
    program) and then cannot lower it: XNNPACK's preprocessing fails on the scales ("unsupported
    param type", both ways; with the scales in the delegate too, its serializer cannot define a
    per-channel quantized activation). xir leaves the per-channel Q/DQ outside and runs the slice
    in fp32 on the dequantized tensor: the program runs and matches eager exactly."""
    torch.manual_seed(0)
    inputs = (torch.randn(1, 4, 3) * 3,)
    stock = lower(_export(PerChannelSlice(), inputs), inputs, "stock", via=via)
    assert not stock.ran and "unsupported param type" in stock.error, stock.error
    module = PerChannelSlice(torch.float64)
    expected = module(*inputs)
    ours = lower(_export(module, inputs), inputs, "xir", via=via)
    assert ours.ran, ours.error
    assert ours.delegated == {"aten.slice_copy.Tensor": 1}
    assert not ours.outside["aten.slice_copy.Tensor"] and ours.outside["quantized_decomposed.dequantize_per_channel"]
    assert max_error(ours.outputs, [expected]) == 0.0
    stock = lower(_export(module, inputs), inputs, "stock", via=via)  # (float64 scales: the same failure)
    assert not stock.ran and "unsupported param type" in stock.error, stock.error


def test_stock_per_channel_slice_partition_cannot_be_lowered_even_with_its_scales():
    """Stock's partition of that slice with its scale constants put in the delegate as well (what
    a partitioner would have to add to get past the first failure): XNNPACK's serializer then
    cannot define the per-channel quantized activation the slice writes."""
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import EdgeCompileConfig, to_edge

    class WithScales(XnnpackPartitioner):
        def partition(self, ep):
            result = super().partition(ep)
            for node in ep.graph.nodes:
                tags = {u.meta.get("delegation_tag") for u in node.users} - {None}
                if node.op == "placeholder" and tags:
                    node.meta["delegation_tag"] = tags.pop()
            return result

    inputs = (torch.randn(1, 4, 3),)
    edge = to_edge(_export(PerChannelSlice(), inputs), compile_config=EdgeCompileConfig(_check_ir_validity=False))
    with pytest.raises(AssertionError, match="per channel params"):
        edge.to_backend(WithScales())
