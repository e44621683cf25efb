"""hoist-row-select end to end: a decoder layer on a dynamic number of rows whose output's last row
goes to the head (ExecuTorch's LLM flow does ``h[:, -1, :]`` after its last layer). With the pass,
the ops after the attention's row mixing (the second matmul, the output projection, the residuals,
the norm, the feed-forward) compute the last row only; the program matches eager on every length,
in fp32 and in bf16 (bf16 to the bit)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from executorch.examples.models.llama.norm import RMSNorm

from tests.lowering.with_and_without import Lowered, pipeline_without
from xir_tools import harness

WIDTH, HIDDEN, VOCAB = 32, 96, 48
SEQ = torch.export.Dim("seq", min=1, max=64)


class LayerThenLastRow(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.wq, self.wk, self.wv, self.wo = (torch.nn.Linear(WIDTH, WIDTH, bias=False) for _ in range(4))
        self.w1, self.w3 = torch.nn.Linear(WIDTH, HIDDEN, bias=False), torch.nn.Linear(WIDTH, HIDDEN, bias=False)
        self.w2, self.out = torch.nn.Linear(HIDDEN, WIDTH, bias=False), torch.nn.Linear(WIDTH, VOCAB, bias=False)
        self.norm = RMSNorm(WIDTH)
        self.norm.weight.data = torch.randn(WIDTH) * 0.2 + 1

    def forward(self, x):
        scores = self.wq(x) @ self.wk(x).transpose(1, 2) / math.sqrt(WIDTH)
        h = x + self.wo(scores.softmax(-1) @ self.wv(x))
        n = self.norm(h)
        h = h + self.w2(F.silu(self.w1(n)) * self.w3(n))
        return self.out(self.norm(h[:, -1, :]))


def _input(rows: int, seed: int, dtype) -> torch.Tensor:
    return torch.randn(1, rows, WIDTH, generator=torch.Generator().manual_seed(seed)).to(dtype)


@pytest.fixture(scope="module", params=["fp32", "bf16"])
def programs(request):
    dtype = torch.float32 if request.param == "fp32" else torch.bfloat16
    module = LayerThenLastRow().to(dtype).eval()
    options = {"enable_bf16": True} if dtype is torch.bfloat16 else {}
    sample, dynamic = [_input(8, 1, dtype)], ({1: SEQ},)
    return (
        request.param,
        Lowered(module, sample, dynamic, **options),
        Lowered(module, sample, dynamic, pipeline=pipeline_without("hoist-row-select"), **options),
    )


def _linear_rows(graph) -> dict[str, object]:
    """The rows dim of each 3-D linear's result in xir's graph, by its weight's name."""
    return {
        node.operands[1].name: node.results[0].type.shape[1]
        for node in graph
        if node.op == "aten.linear" and node.results[0].type.rank == 3
    }


def test_the_rows_after_the_mixing_are_one_and_match_eager(programs):
    recipe, hoisted, without = programs
    rows, rows_without = _linear_rows(hoisted.partitioner.last_graph), _linear_rows(without.partitioner.last_graph)
    # fp32: k and v are read by the scores, which mix the rows, and stay whole; from q on (the
    # scores' rows, the softmax, the second matmul), one row. bf16: the walk stops at the second
    # matmul (XNNPACK's bf16 matmul on one row rounds differently), and q stays whole too. (The
    # norm's mean is a linear with a row of 1/WIDTH.)
    whole = {name for name, size in rows.items() if size != 1}
    assert whole == {"p_wk_weight", "p_wv_weight"} | ({"p_wq_weight"} if recipe == "bf16" else set()), rows
    assert len(rows) == 8 and all(size != 1 for size in rows_without.values()), (rows, rows_without)
    # outside: the picks of the last row (fp32: the input's, read by q and the residual; bf16: also
    # the second matmul's), where the one select was
    picks = 1 if recipe == "fp32" else 2
    assert hoisted.outside == {"aten.select_copy.int": picks} and without.outside == {"aten.select_copy.int": 1}, (
        hoisted.outside,
        without.outside,
    )
    # fp32: the layer and the head in one delegate (the head was a second one)
    assert (hoisted.delegates, without.delegates) == ((1, 2) if recipe == "fp32" else (2, 2))
    assert hoisted.inside["aten.linear"] == without.inside["aten.linear"], (hoisted.inside, without.inside)
    tolerance = 0 if recipe == "bf16" else 1e-5
    for seed, length in enumerate((1, 5, 8, 33)):
        x = _input(length, 10 + seed, hoisted.module.wq.weight.dtype)
        with torch.no_grad():
            expected = hoisted.module(x)
        (got,), (reference,) = harness.run_method(hoisted.method, [x]), harness.run_method(without.method, [x])
        assert got.shape == expected.shape == (1, VOCAB)
        assert harness.max_error([got], [expected]) <= tolerance, (recipe, length)
        assert harness.max_error([reference], [expected]) <= tolerance, (recipe, length)


class QuantizedThenRow(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(1)
        self.linear = torch.nn.Linear(32, 8)

    def forward(self, x):
        return torch.relu(self.linear(x).select(0, 2))


def test_a_pt2e_dynamically_quantized_linear_keeps_its_pattern():
    """Fuzz dynamic 97034: a pt2e dynamically quantized linear (choose_qparams, quantize and
    dequantize of the whole activation, then the linear), then one row. The walk does not take the
    linear: a row picked between the dequantize and the linear would break the pattern and leave
    its Q/DQ on portable kernels. Everything is in one delegate, as in stock's program, and matches
    eager (the quantized module)."""
    from xir_tools.examples import quantize_module

    x = torch.randn(3, 5, 32, generator=torch.Generator().manual_seed(2))
    module = quantize_module(QuantizedThenRow().eval(), (x,), mode="dynamic", per_channel=True)
    ep = torch.export.export(module, (x,))
    edge, _ = harness.lower_edge(ep, "xir", "etal")
    assert harness.delegate_count(edge) == 1 and not harness.outside_ops(edge), harness.outside_ops(edge)
    inside = harness.delegated_ops(edge)
    assert inside["aten.linear"] == 1 and inside["quantized_decomposed.choose_qparams.tensor"] == 1, inside
    (out,) = harness.run_method(harness.load_method(harness.to_buffer(edge))[1], [x])
    expected = module(x)
    assert out.shape == expected.shape and torch.allclose(out, expected, atol=0.05), (out - expected).abs().max()
