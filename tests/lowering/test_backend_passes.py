"""Delegates that get only ExecuTorch's XNNPACK linear rebuild (``lowering/fx/backend_passes.py``).

For each program: lowered once with xir's default (a delegate whose ops no other XNNPACK
preprocessing pass changes gets the ``dqlinear_partitioner`` compile spec, so ExecuTorch runs only
``ConvertToLinearPass`` on it) and once with ``all_backend_passes=True``. Every delegate's
serialized XNNPACK graph must be the same bytes both ways; the default's program runs on the
runtime and matches eager; the test asserts which delegates were light and why the others were not.
"""

from __future__ import annotations

import copy

import pytest
import torch
from executorch.exir.lowered_backend_module import get_lowered_submodules

from bench.llm import Sizes, build_decoder, export_decoder, quantize_decoder
from lowering.fx.backend_passes import KEY, why_all_passes
from xir_tools.harness import compare, delegated_ops, load_method, lower_edge, reference, run_method, to_buffer

DYNAMIC = torch.export.Dim("s", min=1, max=64)


def delegates(edge) -> list:
    return [module for _, module, _ in get_lowered_submodules(edge.exported_program().graph_module)]


def is_light(module) -> bool:
    return any(spec.key == KEY for spec in module.compile_specs)


def both_ways(ep, **options):
    """(light edge, its partitioner, the processed bytes with all passes)."""
    light, partitioner = lower_edge(ep, "xir", **options)
    full, _ = lower_edge(ep, "xir", all_backend_passes=True, **options)
    assert not any(is_light(m) for m in delegates(full))
    return light, partitioner, [m.processed_bytes for m in delegates(full)]


def check(ep, inputs, kind="fp32", light=None, **options):
    """Lower both ways, compare the delegates' bytes, run the default against eager."""
    edge, partitioner, full_bytes = both_ways(ep, **options)
    modules = delegates(edge)
    assert [m.processed_bytes for m in modules] == full_bytes
    if light is not None:
        assert [is_light(m) for m in modules] == light, partitioner.all_passes_reasons
    _, method = load_method(to_buffer(edge))
    ok, message, *_ = compare(run_method(method, list(inputs)), reference(ep, inputs), kind)
    assert ok, message
    return edge, partitioner


class Boundaries(torch.nn.Module):
    """Elementwise math, a clamp, a three-way cat, slices, RMSNorm's mean (a matrix product), a
    softmax, a linear, a graph input returned, a value returned and read again, a constant."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(32, 32)
        self.register_buffer("scale", torch.linspace(0.5, 1.5, 32))

    def forward(self, x):
        norm = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.scale
        h = self.linear(norm).clamp(-2.0, 2.0)
        halves = torch.cat([h[..., 16:], -h[..., :16], torch.sigmoid(h[..., :8])], dim=-1)[..., :32]
        return x, h, torch.softmax(halves * 0.5, dim=-1) + h


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_elementwise_linear_and_shape_ops_are_light(dynamic):
    x = torch.randn(1, 5, 32)
    shapes = ({1: DYNAMIC},) if dynamic else None
    ep = torch.export.export(Boundaries().eval(), (x,), dynamic_shapes=shapes)
    edge, partitioner = check(ep, (x,), light=[True])
    assert partitioner.all_passes_reasons == {}
    inside = delegated_ops(edge)
    # (the mean is a linear with a 1/32 row: xnnpack.mean-over-last-dims, in a program with a linear)
    assert (
        inside["aten.linear"] == 2
        and "aten.mm" not in inside
        and inside["aten._softmax"] == 1
        and inside["aten.cat"] == 1
    )
    if dynamic:
        _, method = load_method(to_buffer(edge))
        for length in (1, 17):
            x = torch.randn(1, length, 32)
            ok, message, *_ = compare(run_method(method, [x]), reference(ep, (x,)), "fp32")
            assert ok, (length, message)


class WithRelu(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(16, 16), torch.nn.Linear(16, 16)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


class WithConv(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)

    def forward(self, x):
        return torch.tanh(self.conv(x)) * 2


class LongCat(torch.nn.Module):
    def forward(self, x):
        return torch.cat([x * (i + 1) for i in range(6)], dim=-1) + 1


class ChannelsLastInput(torch.nn.Module):
    """ExecuTorch's test_to_copy: the int16 -> fp32 channels-last copy stays outside, so the
    delegate's input is NHWC in memory; the layout pass converts it at the delegate's entry."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(3, 3)

    def forward(self, x):
        return self.linear(x.to(torch.float, memory_format=torch.channels_last))


@pytest.mark.parametrize(
    "module, inputs, reason",
    [
        (WithRelu(), (torch.randn(2, 16),), "aten.relu"),  # fused into the linear before it
        (WithConv(), (torch.randn(1, 3, 8, 8),), "aten.convolution"),  # channels-last layout
        (LongCat(), (torch.randn(2, 4),), "a concatenation of 6 tensors"),  # split into two
        (ChannelsLastInput(), (torch.randint(0, 10, (1, 3, 3, 3), dtype=torch.int16),), "not in contiguous dim order"),
    ],
    ids=["relu", "conv", "cat6", "channels-last-input"],
)
def test_ops_a_pass_rewrites_get_all_passes(module, inputs, reason):
    ep = torch.export.export(module.eval(), inputs)
    edge, partitioner = check(ep, inputs, light=[False])
    assert len(partitioner.all_passes_reasons) == 1
    assert reason in next(iter(partitioner.all_passes_reasons.values()))


def test_external_constant_tag_gets_all_passes():
    """A node with ``meta['custom']`` (external constant data) keeps the pass that copies it onto Q/DQ."""
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    y = graph.call_function(torch.ops.aten.neg.default, (x,))
    y.meta["custom"] = {"delegate_constant_tag": "weights"}
    graph.output(y)
    assert "meta['custom']" in why_all_passes(graph.nodes)


@pytest.mark.parametrize(
    "dtype, scheme",
    [(torch.float32, None), (torch.bfloat16, None), (torch.float32, "8da4w")],
    ids=["fp32", "bf16", "8da4w"],
)
def test_decoders_are_light(dtype, scheme):
    """A 1-layer Llama decode step (transformers' static export): every delegate light, the same
    bytes as with all passes, the logits at position 0 as eager's."""
    sizes = Sizes(hidden=64, intermediate=128, heads=4, vocab=128, cache=16, layers=1, prefill=4, steps=1)
    model = build_decoder("llama", sizes, dtype)
    if scheme:
        model = quantize_decoder(model, scheme)
    ep = export_decoder(model, sizes.cache, 1)
    edge, partitioner, full_bytes = both_ways(ep, enable_bf16=dtype == torch.bfloat16)
    modules = delegates(edge)
    assert [m.processed_bytes for m in modules] == full_bytes
    assert len(modules) == 2 and all(is_light(m) for m in modules), partitioner.all_passes_reasons
    inputs = (torch.tensor([[7]]), torch.tensor([0]))
    expected = copy.deepcopy(ep.module())(input_ids=inputs[0], cache_position=inputs[1])
    _, method = load_method(to_buffer(edge))
    actual = method.execute(list(inputs))[0]
    tolerance = {torch.bfloat16: 0.05}.get(dtype, 5e-3 if scheme else 1e-4)
    assert (actual.float() - expected.float()).abs().max().item() <= tolerance
    inside = delegated_ops(edge)
    # q/k/v as one (xnnpack.fuse-sibling-linears), o, gate, up, down, the head; RMSNorm's three means as
    # linears with a 1/64 row
    assert inside["aten.linear"] == 6 + 3 and not any(op.startswith("torchao.") for op in _outside(edge))
    if scheme:
        assert inside["torchao.choose_qparams_affine"] == 6


def _outside(edge):
    from xir_tools.harness import outside_ops

    return outside_ops(edge)


def test_report_names_the_delegates_that_get_all_passes():
    ep = torch.export.export(WithRelu().eval(), (torch.randn(2, 16),))
    _, partitioner = lower_edge(ep, "xir")
    assert "runs all its passes on 1 of 1 delegates" in partitioner.report()
    assert "aten.relu" in partitioner.report()
    ep = torch.export.export(Boundaries().eval(), (torch.randn(1, 5, 32),))
    _, partitioner = lower_edge(ep, "xir")
    assert "all its passes" not in partitioner.report()


class Clones(torch.nn.Module):
    def forward(self, x):
        t = (x * 2).transpose(1, 2).contiguous()  # a copy to the dim order its operand has
        return x.clone(), t + 1, t.clone()  # the input's clone returned, a clone of a value read twice


def test_clones_that_keep_the_dim_order_go():
    """xnnpack.remove-no-ops drops a ``_clone_dim_order`` that keeps its operand's dim order (XNNPACK's
    preprocessing would have), except the one that would make the graph input an output."""
    x = torch.randn(2, 3, 4)
    ep = torch.export.export(Clones().eval(), (x,))
    edge, partitioner = check(ep, (x,))
    clones = delegated_ops(edge)["dim_order_ops._clone_dim_order"] + _outside(edge)["dim_order_ops._clone_dim_order"]
    assert clones == 1  # (x.clone(): its result is an output and its operand the input)


class PatchEmbedding(torch.nn.Module):
    """A vision transformer's stem: a convolution with stride = kernel, flattened to tokens, read by
    a layer norm and a linear, the tokens also returned."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 32, 4, stride=4)
        self.norm, self.linear = torch.nn.LayerNorm(32), torch.nn.Linear(32, 16)

    def forward(self, x):
        tokens = self.conv(x).flatten(2).transpose(1, 2)
        return tokens, self.linear(self.norm(tokens))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_a_patch_embedding_is_a_matrix_product_and_light(dtype):
    """xnnpack.patch-conv-as-matmul: no convolution left, so the delegate is light; same bytes with all
    passes, eager's numbers on the runtime."""
    x = torch.randn(1, 3, 16, 16, dtype=dtype)
    ep = torch.export.export(PatchEmbedding().eval().to(dtype), (x,))
    edge, partitioner = check(
        ep, (x,), kind="bf16" if dtype == torch.bfloat16 else "fp32", light=[True], enable_bf16=dtype == torch.bfloat16
    )
    inside = delegated_ops(edge)
    assert "aten.convolution" not in inside and inside["aten.mm"] >= 1 and not _outside(edge), (inside, _outside(edge))
