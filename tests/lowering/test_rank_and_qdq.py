"""Correct where stock breaks (1/2): tensors above 6-D, Q/DQ folds committed only for ops that
are really delegated, quantized ops with float outputs, force_non_static_weights_for_f32_linear.
Each case also runs stock and asserts it fails as described."""

import functools

import pytest
import torch

from xir_tools.examples import EXAMPLES, export_example, quantize_module
from xir_tools.harness import lower, reference


def test_patchify_8d_loads_and_matches():
    ep = export_example(EXAMPLES["patchify"])
    inputs = EXAMPLES["patchify"].example_inputs()
    stock, ours = lower(ep, inputs, "stock"), lower(ep, inputs, "xir")
    assert not stock.ran and "load failed" in stock.error  # 8-D permute delegated, refused at load
    assert ours.ran, ours.error
    assert ours.err(reference(ep, inputs)) == 0.0
    assert ours.delegated == {"aten.mul.Tensor": 1}
    assert ours.outside["aten.permute_copy"] == 1


class Permute(torch.nn.Module):
    def __init__(self, dims):
        super().__init__()
        self.dims = dims

    def forward(self, x):
        return x.permute(*self.dims) + 1


@pytest.mark.parametrize("rank", [6, 7])
def test_permute_rank_limit(rank):
    dims = list(range(rank))[::-1]
    inputs = (torch.randn(*([2] * rank)),)
    ep = torch.export.export(Permute(dims), inputs)
    stock, ours = lower(ep, inputs, "stock"), lower(ep, inputs, "xir")
    assert ours.ran and ours.err(reference(ep, inputs)) == 0.0
    if rank == 6:
        assert ours.delegated["aten.permute_copy"] == 1 and stock.ran
    else:
        assert ours.outside["aten.permute_copy"] == 1 and ours.delegated == {}  # the add is 7-D too
        assert not stock.ran and "load failed" in stock.error


class Linear8d(torch.nn.Module):
    def __init__(self, relu=False):
        super().__init__()
        self.fc = torch.nn.Linear(16, 8)
        self.relu = relu

    def forward(self, x):
        y = self.fc(x)
        return torch.relu(y) if self.relu else y


INPUT_8D = (torch.randn(2, 1, 2, 1, 2, 1, 3, 16),)


@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("per_op_mode", [False, True])
def test_float_linear_on_8d_input_keeps_its_matmul_in_xnnpack(relu, per_op_mode):
    ep = torch.export.export(Linear8d(relu).eval(), INPUT_8D)
    stock, ours = (
        lower(ep, INPUT_8D, "stock", per_op_mode=per_op_mode),
        lower(ep, INPUT_8D, "xir", per_op_mode=per_op_mode),
    )
    assert not stock.ran  # an 8-D linear (or relu) delegated: refused at load
    assert ours.ran, ours.error
    assert ours.err(reference(ep, INPUT_8D)) < 1e-5
    assert ours.delegated["aten.addmm"] + ours.delegated["aten.mm"] == 1  # the 2-D matrix multiply
    assert ours.outside["aten.view_copy"] >= 1  # the >6-D reshapes stay outside
    if relu:
        assert ours.outside["aten.relu"] == 1  # the relu runs on the 8-D output


@functools.lru_cache(maxsize=None)
def quantized_8d(mode):
    module = quantize_module(Linear8d().eval(), INPUT_8D, mode, per_channel=True)
    return torch.export.export(module, INPUT_8D)


@pytest.mark.parametrize("mode", ["static", "dynamic"])
@pytest.mark.parametrize("per_op_mode", [False, True])
def test_quantized_linear_on_8d_input(mode, per_op_mode):
    ep = quantized_8d(mode)
    stock, ours = (
        lower(ep, INPUT_8D, "stock", per_op_mode=per_op_mode),
        lower(ep, INPUT_8D, "xir", per_op_mode=per_op_mode),
    )
    ref = reference(ep, INPUT_8D)
    assert ours.ran, ours.error
    assert ours.err(ref) <= 0.05 * ref[0].abs().max().item()
    assert not stock.ran or stock.err(ref) > 0.05 * ref[0].abs().max().item()
    for op, count in ours.delegated.items():  # nothing above 6-D went in
        assert count >= 0
    assert ours.outside["aten.view_copy"] >= 1


def _float_output_conv(per_channel):
    module = quantize_module(
        torch.nn.Conv2d(3, 8, 3).eval(),
        (torch.randn(1, 3, 8, 8),),
        "static",
        per_channel=per_channel,
        float_output=True,
    )
    return torch.export.export(module, (torch.randn(1, 3, 8, 8),))


def _float_output_linear(per_channel):
    torch.manual_seed(0)
    inputs = (torch.randn(4, 8),)
    module = quantize_module(torch.nn.Linear(8, 6).eval(), inputs, "static", per_channel=per_channel, float_output=True)
    return torch.export.export(module, inputs)


@pytest.mark.parametrize("kind", ["conv", "linear"])
@pytest.mark.parametrize("per_channel", [False, True])
def test_quantized_op_with_float_output(kind, per_channel):
    ep = _float_output_conv(per_channel) if kind == "conv" else _float_output_linear(per_channel)
    inputs = (torch.randn(1, 3, 8, 8),) if kind == "conv" else (torch.randn(4, 8),)
    ref = reference(ep, inputs)
    stock, ours = lower(ep, inputs, "stock"), lower(ep, inputs, "xir")
    assert ours.ran, ours.error
    assert ours.err(ref) < 1e-4
    ops = ("aten.convolution",) if kind == "conv" else ("aten.linear", "aten.addmm")
    assert sum(ours.outside[op] for op in ops) == 1  # XNNPACK has no quantized op with a float output
    assert not any(ours.delegated[op] for op in ops)
    # stock marks the Q/DQ as folded into the op it then rejects: wrong values, or no program
    assert not stock.ran or stock.err(ref) > 0.1


class TransposedConv(torch.nn.Module):
    def __init__(self, groups=1):
        super().__init__()
        self.conv = torch.nn.ConvTranspose2d(4, 4, 3, groups=groups)

    def forward(self, x):
        return self.conv(x)


def test_per_channel_transposed_conv_on_the_output_axis_is_delegated():
    inputs = (torch.randn(1, 4, 5, 5),)
    module = quantize_module(TransposedConv().eval(), inputs, "static", per_channel=True)
    ep = torch.export.export(module, inputs)
    ref = reference(ep, inputs)
    ours = lower(ep, inputs, "xir")
    assert ours.ran, ours.error
    assert ours.err(ref) < 0.05 * ref[0].abs().max().item()
    assert ours.outside == {}


TRANSPOSED = """graph @g {{
  buffer %w: i8[4,{out_per_group},3,3]
  buffer %scales: f32[{channels}]
  buffer %zeros: i64[{channels}]
  input %x: f32[1,4,5,5]
  %0: f32[4,{out_per_group},3,3] = quantized_decomposed.dequantize_per_channel(%w, %scales, %zeros) {{axis={axis}, quant_min=-127, quant_max=127, dtype=i8}}
  %1: i8[1,4,5,5] = quantized_decomposed.quantize_per_tensor(%x) {{scale=0.1, zero_point=0, quant_min=-128, quant_max=127, dtype=i8}}
  %2: f32[1,4,5,5] = quantized_decomposed.dequantize_per_tensor(%1) {{scale=0.1, zero_point=0, quant_min=-128, quant_max=127, dtype=i8}}
  %3: f32[1,{out},7,7] = aten.convolution(%2, %0) {{bias=none, stride=[1, 1], padding=[0, 0], dilation=[1, 1], transposed=true, output_padding=[0, 0], groups={groups}}}
  %4: i8[1,{out},7,7] = quantized_decomposed.quantize_per_tensor(%3) {{scale=0.1, zero_point=0, quant_min=-128, quant_max=127, dtype=i8}}
  %5: f32[1,{out},7,7] = quantized_decomposed.dequantize_per_tensor(%4) {{scale=0.1, zero_point=0, quant_min=-128, quant_max=127, dtype=i8}}
  return %5
}}
"""


@pytest.mark.parametrize(
    "groups, axis, delegated, reason",
    [
        (1, 1, True, None),
        (2, 1, False, "groups=2 (XNNPACK rejects it)"),
        (1, 0, False, "quantized along axis 0, not the output-channel axis 1"),
    ],
)
def test_per_channel_transposed_conv_rules(groups, axis, delegated, reason):
    """The rule (IR level): a per-channel quantized transposed conv XNNPACK rejects stays out
    with its Q/DQ unfolded. (The XNNPACKQuantizer itself does not quantize grouped transposed
    convs, so the rejected cases are written as IR.)"""
    from lowering.capability import Options
    from lowering.partition import plan_partition
    from xir import parse_graph, verify

    out_per_group = 4 // groups
    channels = 4 if axis == 0 else out_per_group
    graph = parse_graph(
        TRANSPOSED.format(
            out_per_group=out_per_group, channels=channels, axis=axis, groups=groups, out=out_per_group * groups
        )
    )
    verify(graph)
    plan = plan_partition(graph, Options())
    conv = next(n for n in graph if n.op == "aten.convolution")
    group = plan.group_of(conv)
    assert (group is not None) == delegated
    if delegated:
        assert len(group.implicit) == 3  # weight dq, input dq, output q: committed with the conv
    else:
        rejection = next(r for r in plan.rejected if r.node is conv)
        assert reason in rejection.reason
        # no Q/DQ is folded into a conv that is not delegated
        assert all(conv not in g.nodes for g in plan.groups)
        assert not any(n.op == "quantized_decomposed.dequantize_per_channel" for g in plan.groups for n in g.nodes)


@pytest.mark.parametrize("mode, per_channel", [("static", False), ("static", True), ("dynamic", True)])
def test_force_non_static_weights_changes_only_float_linears(mode, per_channel):
    inputs = (torch.randn(4, 8),)
    torch.manual_seed(0)
    module = quantize_module(torch.nn.Linear(8, 6).eval(), inputs, mode, per_channel=per_channel)
    ep = torch.export.export(module, inputs)
    ref = reference(ep, inputs)
    plain = lower(ep, inputs, "xir", via="to_backend")
    forced = lower(ep, inputs, "xir", via="to_backend", force_non_static_weights_for_f32_linear=True)
    stock = lower(ep, inputs, "stock", via="to_backend", force_non_static_weights_for_f32_linear=True)
    assert forced.ran, forced.error
    assert forced.delegated == plain.delegated and forced.outside == plain.outside
    assert forced.err(ref) <= 0.05 * ref[0].abs().max().item()
    assert forced.outside["aten.addmm"] + forced.outside["aten.mm"] == 0
    assert not stock.ran or stock.err(ref) > 0.05 * ref[0].abs().max().item() or stock.outside != plain.outside


def test_force_non_static_weights_float_linear_keeps_weights_outside():
    from executorch.exir import EdgeCompileConfig, to_edge

    import lowering

    inputs = (torch.randn(4, 8),)
    ep = torch.export.export(torch.nn.Linear(8, 6).eval(), inputs)
    forced = lower(ep, inputs, "xir", via="to_backend", force_non_static_weights_for_f32_linear=True)
    assert forced.ran and forced.err(reference(ep, inputs)) < 1e-5
    assert forced.delegated["aten.addmm"] == 1
    for force, params in ((True, 2), (False, 0)):  # weight and bias stay parameters of the program
        partitioner = lowering.XnnpackPartitioner(force_non_static_weights_for_f32_linear=force)
        edge = to_edge(ep, compile_config=EdgeCompileConfig(_check_ir_validity=False)).to_backend(partitioner)
        kinds = [spec.kind.name for spec in edge.exported_program().graph_signature.input_specs]
        assert kinds.count("PARAMETER") == params
