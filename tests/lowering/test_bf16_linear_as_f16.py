"""bf16 linears as XNNPACK's fp16 GEMM (``XnnpackPartitioner(enable_bf16=True,
bf16_linears_as_f16=True)``, pass ``xnnpack.bf16-linear-as-f16``), end to end: one program
lowered with to_edge_transform_and_lower, written, loaded by the runtime, run, and compared with
eager bf16 (and with the fp32 model); the linears inside the delegates are fp16 linears reading
fp16 weights. At the boundaries: the linear reads a graph input, its result is a graph output and
is read again, a weight read by two linears and by an embedding (tied), a bias, a dynamic
sequence length; and the cases it leaves as they were."""

from __future__ import annotations

import copy
import functools

import pytest
import torch

from xir_tools.harness import delegate_count, delegated_linear_dtypes, lower_edge, outside_ops, run_pte, to_buffer

BF16 = torch.bfloat16


class TiedDecoderish(torch.nn.Module):
    """An embedding whose table is also the head's weight, a projection with a bias read by
    two users, an MLP, and the input read by a linear directly."""

    def __init__(self, vocab=64, dim=32, hidden=48):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, dim)
        self.q = torch.nn.Linear(dim, dim, bias=True)
        self.up = torch.nn.Linear(dim, hidden, bias=False)
        self.down = torch.nn.Linear(hidden, dim, bias=False)
        self.side = torch.nn.Linear(dim, 8, bias=False)

    def forward(self, tokens, x):
        h = self.embed(tokens)
        q = self.q(h)  # read by the MLP and returned
        m = self.down(torch.relu(self.up(q))) + h
        logits = torch.nn.functional.linear(m, self.embed.weight)  # tied head
        return logits, q, self.side(x)  # side: a linear of a graph input


@functools.lru_cache(maxsize=None)
def _lowered():
    torch.manual_seed(0)
    module = TiedDecoderish().eval().to(BF16)
    tokens = torch.randint(0, 64, (1, 7))
    x = torch.randn(1, 7, 32, dtype=BF16)
    seq = torch.export.Dim("seq", min=1, max=32)
    ep = torch.export.export(module, (tokens, x), dynamic_shapes=({1: seq}, {1: seq}))
    edge, partitioner = lower_edge(ep, enable_bf16=True, bf16_linears_as_f16=True)
    seen = {
        "linears": delegated_linear_dtypes(edge),
        "outside": outside_ops(edge),
        "delegates": delegate_count(edge),
        "embedding tables": [
            n.args[0].meta["val"].dtype
            for n in edge.exported_program().graph.nodes
            if n.op == "call_function" and "embedding" in str(n.target)
        ],
    }
    return module, seen, partitioner, to_buffer(edge)  # (to_buffer turns the edge program into ExecuTorch's)


def _inputs(length: int):
    g = torch.Generator().manual_seed(length)
    return torch.randint(0, 64, (1, length), generator=g), torch.randn(1, length, 32, generator=g).to(BF16)


def test_linears_run_in_fp16_inside_one_delegate():
    _, seen, partitioner, _ = _lowered()
    linears = seen["linears"]
    assert len(linears) == 5, linears  # q, up, down, the tied head, side
    assert all(result is torch.float16 and weight is torch.float16 for result, weight in linears), linears
    outside = seen["outside"]
    assert not any("linear" in op or "convert" in op for op in outside), dict(outside)
    assert seen["delegates"] == 1
    assert "xnnpack.bf16-linear-as-f16" in partitioner.rewrites_applied


@pytest.mark.parametrize("length", [1, 7, 32])
def test_matches_eager_bf16_and_fp32_at_several_lengths(length):
    module, _, _, buffer = _lowered()
    tokens, x = _inputs(length)
    outputs = run_pte(buffer, (tokens, x))
    with torch.no_grad():
        expected = module(tokens, x)
        exact = copy.deepcopy(module).float()(tokens, x.float())
    for out, ref, truth in zip(outputs, expected, exact):
        assert out.dtype is BF16 and out.shape == ref.shape
        scale = max(1.0, ref.float().abs().max().item())
        # within a few bf16 ulps of eager's bf16, and no further from the fp32 model than eager's bf16 is (+1 ulp)
        assert (out.float() - ref.float()).abs().max().item() <= 2**-6 * scale
        assert (out.float() - truth).abs().max().item() <= (ref.float() - truth).abs().max().item() + 2**-7 * scale


def test_tied_weight_is_converted_once_and_the_bf16_table_stays_for_the_embedding():
    _, seen, partitioner, buffer = _lowered()
    assert seen["outside"].get("aten.embedding", 0) == 1
    assert seen["embedding tables"] == [BF16]
    rewrite = next(p for p in partitioner.pipeline if p.name == "xnnpack.bf16-linear-as-f16")
    assert rewrite.last_stats.fired["bf16_linear_as_f16"] == 5
    graph = partitioner.last_graph  # the program xir handed back: one fp16 copy of the tied table
    f16_tables = [
        v for v in graph.inputs if v.is_constant and v.dtype.name == "f16" and tuple(v.type.shape) == (64, 32)
    ]
    assert len(f16_tables) == 1, [v.name for v in f16_tables]


def _lower_one_linear(weight: torch.Tensor, **options):
    linear = torch.nn.Linear(weight.shape[1], weight.shape[0], bias=False).to(BF16)
    linear.weight.data = weight.to(BF16)
    x = torch.randn(3, weight.shape[1], dtype=BF16)
    ep = torch.export.export(linear.eval(), (x,))
    edge, partitioner = lower_edge(ep, **options)
    return linear, x, edge, partitioner


def test_a_weight_beyond_fp16_range_stays_a_bf16_linear_and_runs():
    weight = torch.randn(4, 8)
    weight[1, 2] = 1.0e5  # a bf16 number, beyond fp16's 65504
    linear, x, edge, partitioner = _lower_one_linear(weight, enable_bf16=True, bf16_linears_as_f16=True)
    assert delegated_linear_dtypes(edge) == [(BF16, BF16)]
    out = run_pte(to_buffer(edge), (x,))[0]
    ref = linear(x)
    assert (out.float() - ref.float()).abs().max().item() <= 2**-6 * ref.float().abs().max().item()
    stats = next(p for p in partitioner.pipeline if p.name == "xnnpack.bf16-linear-as-f16").last_stats
    assert any("beyond fp16's range" in reason for reasons in stats.declined.values() for reason in reasons)


def test_fp32_linears_are_left_alone():
    fp32 = torch.nn.Linear(8, 4).eval()
    x32 = torch.randn(2, 8)
    edge32, _ = lower_edge(torch.export.export(fp32, (x32,)), enable_bf16=True, bf16_linears_as_f16=True)
    assert delegated_linear_dtypes(edge32) == [(torch.float32, torch.float32)]
    torch.testing.assert_close(run_pte(to_buffer(edge32), (x32,))[0], fp32(x32))


def test_the_option_needs_enable_bf16_and_places_the_pass_once():
    import lowering

    with pytest.raises(ValueError, match="needs enable_bf16=True"):
        lowering.XnnpackPartitioner(bf16_linears_as_f16=True)
    names = [p.name for p in lowering.XnnpackPartitioner(enable_bf16=True, bf16_linears_as_f16=True).pipeline]
    assert names.count("xnnpack.bf16-linear-as-f16") == 1
    assert names.index("xnnpack.bf16-linear-as-f16") == names.index("xnnpack.bf16-bmm-f32-output") + 1
    assert "xnnpack.bf16-linear-as-f16" not in [p.name for p in lowering.XnnpackPartitioner(enable_bf16=True).pipeline]
