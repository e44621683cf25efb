"""3-D convolutions: XNNPACK has none, ExecuTorch 1.5.1's portable kernels run none; xir
rewrites them into 2-D convolutions XNNPACK runs, float or behind a quantized weight, and its
quantizer helper leaves them in float."""

import pytest
import torch
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

from lowering.fx.quantizer import make_quantizer
from passes import PassManager, VerifyEach
from xir import parse_graph, print_graph
from xir_tools.examples import quantize_module
from xir_tools.harness import lower, reference


@pytest.mark.parametrize(
    "padding, stride, dilation",
    [
        ((1, 1, 1), (1, 1, 1), 1),
        ((2, 0, 1), (1, 2, 1), (2, 1, 1)),
    ],
)
def test_float_conv3d_runs_in_xnnpack(padding, stride, dilation):
    torch.manual_seed(0)
    module = torch.nn.Conv3d(2, 4, 3, padding=padding, stride=stride, dilation=dilation).eval()
    inputs = (torch.randn(1, 2, 6, 7, 7),)
    ep = torch.export.export(module, inputs)
    stock, ours = lower(ep, inputs, "stock"), lower(ep, inputs, "xir")
    assert not stock.ran  # stock: the conv stays on portable kernels, which have no 3-D convolution
    assert ours.ran, ours.error
    assert ours.err(reference(ep, inputs)) < 1e-5
    assert ours.delegated["aten.convolution"] == 3 and not ours.outside  # one 2-D conv per depth tap


class Conv3dThenLinear(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv3d(2, 4, 3, padding=1)
        self.fc = torch.nn.Linear(5, 3)

    def forward(self, x):
        return self.fc(torch.relu(self.conv(x)))


INPUTS = (torch.randn(1, 2, 4, 5, 5),)


def test_quantized_conv3d_loads_and_matches():
    """Stock's XNNPACKQuantizer quantizes the Conv3d; stock then cannot run it. xir dequantizes
    its weight once into float 2-D taps that XNNPACK runs."""
    torch.manual_seed(0)
    module = quantize_module(torch.nn.Sequential(torch.nn.Conv3d(2, 4, 3)).eval(), INPUTS, "static", per_channel=True)
    ep = torch.export.export(module, INPUTS)
    ref = reference(ep, INPUTS)
    stock, ours = lower(ep, INPUTS, "stock"), lower(ep, INPUTS, "xir")
    assert not stock.ran
    assert ours.ran, ours.error
    assert ours.err(ref) <= 0.02 * ref[0].abs().max().item()
    assert ours.delegated["aten.convolution"] == 3 and ours.outside["aten.convolution"] == 0


def test_quantizer_helper_leaves_conv3d_in_float():
    torch.manual_seed(0)
    model = Conv3dThenLinear().eval()
    prepared = prepare_pt2e(torch.export.export(model, INPUTS).module(), make_quantizer(is_per_channel=True))
    prepared(*INPUTS)
    ep = torch.export.export(convert_pt2e(prepared), INPUTS)
    convs = [n for n in ep.graph.nodes if "conv3d" in str(n.target) or "convolution" in str(n.target)]
    assert len(convs) == 1
    weight = convs[0].args[1]
    assert weight.op == "placeholder"  # a float parameter, not a dequantized int8 buffer
    assert any("dequantize_per_channel" in str(n.target) for n in ep.graph.nodes)  # the linear is quantized
    ours = lower(ep, INPUTS, "xir")
    assert ours.ran, ours.error
    ref = reference(ep, INPUTS)
    assert ours.err(ref) <= 0.05 * ref[0].abs().max().item()
    assert ours.delegated["aten.convolution"] == 3 and ours.delegated["aten.linear"] == 1


def test_decompose_conv3d_ir():
    graph = parse_graph("""graph @g {
  param %w: f32[4,2,2,3,3]
  input %x: f32[1,2,3,5,5]
  %0: f32[1,4,2,3,3] = aten.convolution(%x, %w) {bias=none, stride=[1, 1, 1], padding=[0, 0, 0], dilation=[1, 1, 1], transposed=false, output_padding=[0, 0, 0], groups=1}
  return %0
}
""")
    graph.input_named("w").data = torch.randn(4, 2, 2, 3, 3)
    PassManager("xnnpack.decompose-conv3d,dead-code-elimination", [VerifyEach()]).run(graph)
    text = print_graph(graph, show_origin=True)
    assert text.count("aten.convolution(") == 2 and "f32[3,4,3,3] = aten.convolution" in text
    assert "param %w_tap0: f32[4,2,3,3]" in text and "param %w_tap1: f32[4,2,3,3]" in text
    assert "aten.slice_copy.Tensor(%" in text and "{dim=1, start=1, end=3, step=1}" in text
    assert "# by xnnpack.decompose-conv3d" in text
    assert graph.outputs[0].type.shape == (1, 4, 2, 3, 3)
