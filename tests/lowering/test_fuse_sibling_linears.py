"""``xnnpack.fuse-sibling-linears`` end to end: an attention input (q, k and v projections of one
normed activation, viewed as heads; q and k then rotated with ``rotate_half``), in fp32 and quantized
as ExecuTorch's LLM flow quantizes it (torchao 8da4w: per-token int8 activations, int4 weights in
groups of 32), exported with a symbolic sequence length, lowered with xir, loaded on ExecuTorch's
runtime and run at lengths 1, 7 and 32 against eager PyTorch and against the same program lowered
without the pass (stacked weights must give the same numbers to the bit).

Boundaries: v is a graph output as it is (a slice of the stacked heads), k is read twice (returned
and rotated), q's projection has a bias in the biased variant (the biases stack too). One lowering
per program (a module-scoped fixture) shared by the tests."""

from __future__ import annotations

import pytest
import torch
from torch.export import Dim

from bench.llm import quantize_decoder
from tests.lowering.with_and_without import Lowered, check_same_numbers, pipeline_without

WIDTH, HEADS, KV_HEADS, HEAD_DIM = 64, 4, 2, 32
LENGTHS = (1, 7, 32)
WITHOUT = pipeline_without("xnnpack.fuse-sibling-linears")


def rotate_half(t):
    return torch.cat([-t[..., HEAD_DIM // 2 :], t[..., : HEAD_DIM // 2]], -1)


class Attention(torch.nn.Module):
    def __init__(self, bias: bool = False):
        super().__init__()
        self.norm = torch.nn.RMSNorm(WIDTH, eps=1e-6)
        self.wq = torch.nn.Linear(WIDTH, HEADS * HEAD_DIM, bias=bias)
        self.wk = torch.nn.Linear(WIDTH, KV_HEADS * HEAD_DIM, bias=bias)
        self.wv = torch.nn.Linear(WIDTH, KV_HEADS * HEAD_DIM, bias=bias)

    def forward(self, x, cos, sin):
        h = self.norm(x)
        q = self.wq(h).view(1, -1, HEADS, HEAD_DIM)
        k = self.wk(h).view(1, -1, KV_HEADS, HEAD_DIM)
        v = self.wv(h).view(1, -1, KV_HEADS, HEAD_DIM)
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin, v, k


def inputs(length):
    angles = torch.arange(length, dtype=torch.float32)[:, None] * torch.linspace(0.1, 1.0, HEAD_DIM)[None]
    return [torch.randn(1, length, WIDTH), torch.cos(angles), torch.sin(angles)]


def make(variant: str):
    torch.manual_seed(0)
    module = Attention(bias=variant == "fp32-bias").eval()
    with torch.no_grad():
        module.norm.weight.copy_(1 + 0.2 * torch.randn(WIDTH))
    return quantize_decoder(module, "8da4w") if variant == "8da4w" else module


def lowered(variant: str, pipeline=None):
    seq = Dim("seq", min=1, max=128)
    return Lowered(make(variant), inputs(7), ({1: seq}, {0: seq}, {0: seq}), pipeline)


VARIANTS = ("fp32", "fp32-bias", "8da4w")


@pytest.fixture(scope="module")
def programs():
    cache = {}

    def get(variant):
        if variant not in cache:
            cache[variant] = {"fused": lowered(variant), "without": lowered(variant, WITHOUT)}
        return cache[variant]

    return get


@pytest.mark.parametrize("variant", VARIANTS)
def test_q_k_and_v_are_one_linear_in_one_delegate(programs, variant):
    fused, without = programs(variant)["fused"], programs(variant)["without"]
    assert "xnnpack.fuse-sibling-linears" in fused.partitioner.rewrites_applied
    assert fused.delegates == 1 and not fused.outside, fused.outside
    # (plus RMSNorm's mean, a linear with a 1/64 row: xnnpack.mean-over-last-dims)
    assert without.inside["aten.linear"] == 3 + 1 and fused.inside["aten.linear"] == 1 + 1, (
        fused.inside,
        without.inside,
    )
    if variant == "8da4w":  # one per-token quantization of the activation where there were three
        assert (
            without.inside["torchao.choose_qparams_affine"] == 3 and fused.inside["torchao.choose_qparams_affine"] == 1
        )
    # q's and k's heads adjacent in the stacked output: their rotation reads one slice, no concatenation of heads
    assert fused.inside["aten.cat"] < without.inside["aten.cat"], (fused.inside, without.inside)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("length", LENGTHS)
def test_the_fused_program_matches_eager_and_the_unfused_one_to_the_bit(programs, variant, length):
    torch.manual_seed(length)
    both = programs(variant)
    # 8da4w: XNNPACK's per-token int8 rounding against torchao's reference, about 0.005 on values of
    # about 2 (measured; the same with and without the pass: the comparison to the bit is the
    # fusion's check)
    check_same_numbers(both["fused"], both["without"], inputs(length), 1e-2 if variant == "8da4w" else 1e-5)
