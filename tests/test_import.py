"""Import real ExecuTorch edge programs: each prints, parses back identically and verifies."""

import pytest
import torch

import xir
from xir import DType, InputKind, Symbol

NAMES = ["mlp", "cnn", "attention", "attention-bf16", "patchify", "quantized-conv", "linear-bn-3d", "mlp-dynamic-batch"]


@pytest.mark.parametrize("name", NAMES)
def test_round_trip_and_verify(edge_programs, name):
    graph = xir.from_exported_program(edge_programs[name])
    text = xir.print_graph(graph)
    assert xir.print_graph(xir.parse_graph(text)) == text
    xir.verify(graph)
    xir.verify(xir.parse_graph(text))
    fx_calls = [
        n for n in edge_programs[name].graph.nodes if n.op == "call_function" and "getitem" not in str(n.target)
    ]
    assert len(graph) == len(fx_calls)
    assert all(node.fx_node is not None for node in graph)
    assert "getitem" not in text


def test_multi_output_ops_get_one_result_each(edge_programs):
    graph = xir.from_exported_program(edge_programs["cnn"])
    pools = [n for n in graph if n.op == "aten.max_pool2d_with_indices"]
    assert pools and len(pools[0].results) == 2 and pools[0].results[1].dtype is DType.i64
    norms = [n for n in graph if n.op == "aten._native_batch_norm_legit_no_training"]
    assert norms and all(len(n.results) == 3 for n in norms)


def test_patchify_has_an_8d_permute(edge_programs):
    graph = xir.from_exported_program(edge_programs["patchify"])
    permute = next(n for n in graph if n.op == "aten.permute_copy")
    assert permute.result.rank == 8
    assert permute.attributes["dims"] == [0, 2, 5, 3, 6, 1, 4, 7]
    assert permute.result.shape == (2, 8, 8, 2, 2, 6, 16, 16)


def test_quantized_conv_has_typed_qdq(edge_programs):
    graph = xir.from_exported_program(edge_programs["quantized-conv"])
    quantize = next(n for n in graph if n.op == "quantized_decomposed.quantize_per_tensor")
    assert quantize.result.dtype is DType.i8 and quantize.attributes["dtype"] is DType.i8
    conv = next(n for n in graph if n.op == "aten.convolution")
    assert conv.operands[0].producer.op == "quantized_decomposed.dequantize_per_tensor"


def test_bf16_values_are_bf16(edge_programs):
    graph = xir.from_exported_program(edge_programs["attention-bf16"])
    bmms = [n for n in graph if n.op == "aten.bmm"]
    assert len(bmms) == 2 and all(n.result.dtype is DType.bf16 for n in bmms)


def test_dynamic_batch_dim_is_a_symbol(edge_programs):
    graph = xir.from_exported_program(edge_programs["mlp-dynamic-batch"])
    x = graph.input_named("x")
    assert x.input_kind is InputKind.user
    assert isinstance(x.shape[0], Symbol) and x.shape[1] == 16


def test_input_kinds_and_constant_data(edge_programs):
    graph = xir.from_exported_program(edge_programs["cnn"])
    kinds = {v.name: v.input_kind for v in graph.inputs}
    assert kinds["x"] is InputKind.user
    assert kinds["p_conv1_weight"] is InputKind.parameter
    assert kinds["b_bn1_running_mean"] is InputKind.buffer
    weight = graph.input_named("p_conv1_weight")
    assert tuple(weight.data.shape) == (8, 3, 3, 3)
    assert "param %p_conv1_weight: f32[8,3,3,3]" in xir.print_graph(graph)


def test_unknown_ops_are_imported_as_they_are():
    import torch

    @torch.library.custom_op("xirtest::mystery", mutates_args=())
    def mystery(x: torch.Tensor) -> torch.Tensor:
        return x + 1

    @mystery.register_fake
    def _(x):
        return torch.empty_like(x)

    class M(torch.nn.Module):
        def forward(self, x):
            return mystery(x) * 2

    ep = torch.export.export(M(), (torch.randn(3),))
    graph = xir.from_exported_program(ep)
    node = next(n for n in graph if n.op == "xirtest.mystery")
    assert str(node.result.type) == "f32[3]"
    xir.verify(graph)


class _AbsentOptionals(torch.nn.Module):
    """A conv without bias (a trailing absent operand) and a layer norm with a bias but no weight
    (an absent operand before a present one)."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, bias=False)
        self.shift = torch.nn.Parameter(torch.randn(4))

    def forward(self, x):
        y = self.conv(x).permute(0, 2, 3, 1)
        return torch.nn.functional.layer_norm(y, (4,), weight=None, bias=self.shift)


def test_an_absent_optional_operand_is_absent():
    from executorch.exir import to_edge

    from xir_tools.harness import lower, reference

    inputs = (torch.randn(1, 3, 6, 6),)
    ep = torch.export.export(_AbsentOptionals().eval(), inputs)
    graph = xir.from_exported_program(to_edge(ep).exported_program())
    conv = next(n for n in graph if n.op == "aten.convolution")
    assert "bias" not in conv.attributes and len(conv.operands) == 2 and conv.bias is None
    assert "bias=none" not in xir.print_graph(graph)
    norm = next(n for n in graph if n.op == "aten.native_layer_norm")
    # the bias follows the absent weight, so the weight keeps its place
    assert norm.attributes["weight"] is None and norm.weight is None and norm.bias is not None
    xir.verify(graph)
    # written back, lowered and run: the absent operands are still absent (None) in the program
    ours = lower(ep, inputs)
    assert ours.ran, ours.error
    assert ours.err(reference(ep, inputs)) < 1e-4
    # (the weightless layer norm is decomposed, as XNNPACK has no layer norm without a weight)
    assert ours.delegated["aten.convolution"] == 1 and not ours.outside, (ours.delegated, ours.outside)


def test_the_old_spelling_of_an_absent_bias_still_reads():
    graph = xir.parse_graph("""graph @g {
  input %x: f32[1,3,6,6]
  input %w: f32[4,3,3,3]
  %y: f32[1,4,4,4] = aten.convolution(%x, %w) {bias=none, stride=[1, 1], padding=[0, 0], dilation=[1, 1], transposed=false, output_padding=[0, 0], groups=1}
  return %y
}""")
    xir.verify(graph)
    conv = next(n for n in graph if n.op == "aten.convolution")
    assert conv.bias is None and conv.weight.name == "w"
