"""bf16 programs compute what eager bf16 computes, to the bit (``xnnpack.bf16-rounded-arithmetic``).

Eager PyTorch rounds every bf16 op's result to bf16; XNNPACK, as ExecuTorch 1.5.1 builds it, reads
a bf16 add's or multiply's result unrounded when another op of the same delegate reads it. Each
module here is lowered by xir with bf16 enabled, serialized, loaded on ExecuTorch's runtime and run
against eager bf16: every element equal, the whole module in one delegate. Without the pass, the
first module's program differs from eager on about a quarter of its elements (asserted too: it is
what makes the pass necessary, and it tells when a later XNNPACK makes it unnecessary)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from executorch.examples.models.llama.norm import RMSNorm

from tests.lowering.with_and_without import Lowered, pipeline_without

torch.manual_seed(0)
WIDTH, HIDDEN = 64, 192


class Products(torch.nn.Module):
    """(a * b) * a: the product a * b read by the second product."""

    def forward(self, a, b):
        return (a * b) * a


class NormThenLinear(torch.nn.Module):
    """ExecuTorch's RMSNorm (its weight multiplies the rounded norm) read by a linear."""

    def __init__(self):
        super().__init__()
        self.norm = RMSNorm(WIDTH)
        self.norm.weight.data = torch.randn(WIDTH) * 0.2 + 1
        self.linear = torch.nn.Linear(WIDTH, 96, bias=False)

    def forward(self, x):
        return self.linear(self.norm(x))


class ResidualFeedForward(torch.nn.Module):
    """h = x + w2(silu(w1 x) * w3 x), read by a linear: the gate's product and the residual sum are
    read inside."""

    def __init__(self):
        super().__init__()
        self.w1, self.w3 = torch.nn.Linear(WIDTH, HIDDEN, bias=False), torch.nn.Linear(WIDTH, HIDDEN, bias=False)
        self.w2, self.out = torch.nn.Linear(HIDDEN, WIDTH, bias=False), torch.nn.Linear(WIDTH, 32, bias=False)

    def forward(self, x):
        h = x + self.w2(F.silu(self.w1(x)) * self.w3(x))
        return self.out(h)


def _inputs(count, rows, seed):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(1, rows, WIDTH, generator=g) * 2).to(torch.bfloat16) for _ in range(count)]


SEQ = torch.export.Dim("seq", min=1, max=64)
CASES = {
    "products": (Products, 2, None),
    "norm-then-linear": (NormThenLinear, 1, None),
    "residual-feed-forward": (ResidualFeedForward, 1, ({1: SEQ},)),
}


@pytest.fixture(scope="module", params=list(CASES))
def lowered(request):
    cls, count, dynamic = CASES[request.param]
    torch.manual_seed(0)  # (the weights: not whatever the worker's earlier tests left the generator at)
    module = cls().to(torch.bfloat16).eval()
    return request.param, Lowered(module, _inputs(count, 8, 1), dynamic, enable_bf16=True)


def _mismatched(program: Lowered, args) -> int:
    from xir_tools import harness

    with torch.no_grad():
        expected = program.module(*args)
    (got,) = harness.run_method(program.method, args)
    assert got.dtype is torch.bfloat16 and got.shape == expected.shape
    return int((got != expected).sum())


def test_equals_eager_bf16_to_the_bit(lowered):
    name, program = lowered
    count = CASES[name][1]
    assert program.delegates == 1 and not program.outside, (program.delegates, program.outside)
    assert program.inside["xir.convert"] >= 2 and program.inside["aten.mul.Tensor"] >= 1, program.inside
    rows = (8, 1, 5, 33) if CASES[name][2] else (8,)
    for seed, length in enumerate(rows):
        assert _mismatched(program, _inputs(count, length, 10 + seed)) == 0, (name, length)


def test_without_the_pass_xnnpack_reads_the_product_unrounded():
    module = Products().to(torch.bfloat16).eval()
    without = Lowered(
        module, _inputs(2, 8, 1), None, pipeline=pipeline_without("xnnpack.bf16-rounded-arithmetic"), enable_bf16=True
    )
    assert without.delegates == 1 and "xir.convert" not in without.inside, without.inside
    mismatched = _mismatched(without, _inputs(2, 8, 10))
    assert mismatched > 8 * WIDTH // 10, mismatched
