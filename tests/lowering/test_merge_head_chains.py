"""``xnnpack.merge-head-chains`` end to end: a Qwen3-style attention input (q and k projections
viewed to heads, each head RMS-normed with its own weights, then rotated with the Hugging Face
``rotate_half`` rotary embedding) and a Llama-style one (q and k rotated pair by pair as ExecuTorch's
Llama writes it, which ``xnnpack.rope-as-pair-swap`` makes a product with a pair-swap matrix over
rows that flatten heads and tokens), exported with a symbolic sequence length, lowered with xir,
loaded once on ExecuTorch's runtime and run at lengths 1, 7 and 32 against eager PyTorch and against
the same program lowered without the pass (the merged chain must give the same numbers to the bit).

Boundaries: the normed q is also a graph output (a slice of the merged chain returns it), k's
rotated value is read by another op besides being returned (its slice feeds both), v (the same
heads as k, but no chain) stays as it was, the tables are graph inputs, the norm weights constants.
One lowering per program (a module-scoped fixture) shared by the tests."""

from __future__ import annotations

import pytest
import torch
from torch.export import Dim

from tests.lowering.with_and_without import Lowered, check_same_numbers, pipeline_without

WIDTH, HEADS, KV_HEADS, HEAD_DIM = 64, 4, 2, 16
LENGTHS = (1, 7, 32)
WITHOUT = pipeline_without("xnnpack.merge-head-chains")


class HeadNorm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(1.0 + 0.2 * torch.randn(HEAD_DIM))

    def forward(self, x):
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6) * self.weight


def rotate_half(t):
    return torch.cat([-t[..., HEAD_DIM // 2 :], t[..., : HEAD_DIM // 2]], -1)


class QKNormRope(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.wq = torch.nn.Linear(WIDTH, HEADS * HEAD_DIM, bias=False)
        self.wk = torch.nn.Linear(WIDTH, KV_HEADS * HEAD_DIM, bias=False)
        self.wv = torch.nn.Linear(WIDTH, KV_HEADS * HEAD_DIM, bias=False)
        self.q_norm, self.k_norm = HeadNorm(), HeadNorm()

    def forward(self, x, cos, sin):
        q = self.q_norm(self.wq(x).view(1, -1, HEADS, HEAD_DIM))
        k = self.k_norm(self.wk(x).view(1, -1, KV_HEADS, HEAD_DIM))
        v = self.wv(x).view(1, -1, KV_HEADS, HEAD_DIM)
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        q_rot = q * cos + rotate_half(q) * sin
        k_rot = k * cos + rotate_half(k) * sin
        return q_rot, k_rot, v, q, torch.sigmoid(k_rot)


class PairRope(torch.nn.Module):
    """Llama's q and k rotations as ExecuTorch's example writes them (pairs unbound, rotated,
    stacked back), the tables buffers sliced to the length."""

    def __init__(self):
        super().__init__()
        self.wq = torch.nn.Linear(WIDTH, HEADS * HEAD_DIM, bias=False)
        self.wk = torch.nn.Linear(WIDTH, KV_HEADS * HEAD_DIM, bias=False)
        half = HEAD_DIM // 2
        angles = torch.outer(torch.arange(128.0), 1.0 / 10000 ** (torch.arange(half) / half))
        self.register_buffer("cos", torch.cos(angles))
        self.register_buffer("sin", torch.sin(angles))

    def rotate(self, t, cos, sin):
        r, i = t.reshape(t.shape[:-1] + (-1, 2)).unbind(-1)
        return torch.stack([r * cos - i * sin, r * sin + i * cos], dim=-1).flatten(3)

    def forward(self, x, cos_unused, sin_unused):
        s = x.shape[1]
        cos, sin = self.cos[:s].view(1, s, 1, -1), self.sin[:s].view(1, s, 1, -1)
        q = self.rotate(self.wq(x).view(1, s, HEADS, HEAD_DIM), cos, sin)
        k = self.rotate(self.wk(x).view(1, s, KV_HEADS, HEAD_DIM), cos, sin)
        return q, k, torch.sigmoid(k)


MODULES = {"qk-norm-rope": QKNormRope, "pair-rope": PairRope}


def inputs(length):
    angles = torch.arange(length, dtype=torch.float32)[:, None] * torch.linspace(0.1, 1.0, HEAD_DIM)[None]
    return [torch.randn(1, length, WIDTH), torch.cos(angles), torch.sin(angles)]


def lowered(make, pipeline=None):
    torch.manual_seed(0)
    seq = Dim("seq", min=1, max=128)
    return Lowered(make().eval(), inputs(7), ({1: seq}, {0: seq}, {0: seq}), pipeline)


@pytest.fixture(scope="module")
def programs():
    cache = {}

    def get(name):
        if name not in cache:
            cache[name] = {"merged": lowered(MODULES[name]), "without": lowered(MODULES[name], WITHOUT)}
        return cache[name]

    return get


def test_q_and_k_norms_and_rotations_run_once_in_one_delegate(programs):
    merged, without = programs("qk-norm-rope")["merged"], programs("qk-norm-rope")["without"]
    assert "xnnpack.merge-head-chains" in merged.partitioner.rewrites_applied
    assert merged.delegates == 1 and not merged.outside, merged.outside
    # one norm (one rsqrt, one mean) and one rotation where there were two of each
    assert without.inside["aten.rsqrt"] == 2 and merged.inside["aten.rsqrt"] == 1
    assert sum(merged.inside.values()) < sum(without.inside.values()) - 5, (merged.inside, without.inside)


def test_pair_rotations_run_once_over_rows_of_both_sets_of_heads(programs):
    merged, without = programs("pair-rope")["merged"], programs("pair-rope")["without"]
    assert "xnnpack.merge-head-chains" in merged.partitioner.rewrites_applied
    # (outside: the tables' slices to the length, a symbolic bound)
    assert merged.delegates == 1 and merged.outside == {"aten.slice_copy.Tensor": 2}, merged.outside
    # one pair-swap product where there were two (each over rows of heads x tokens)
    assert without.inside["aten.mm"] == 2 and merged.inside["aten.mm"] == 1, (merged.inside, without.inside)
    assert sum(merged.inside.values()) < sum(without.inside.values()), (merged.inside, without.inside)


@pytest.mark.parametrize("name", list(MODULES))
@pytest.mark.parametrize("length", LENGTHS)
def test_the_merged_program_matches_eager_and_the_unmerged_one_to_the_bit(programs, name, length):
    torch.manual_seed(length)
    both = programs(name)
    check_same_numbers(both["merged"], both["without"], inputs(length), 1e-5)


class RandomChains(torch.nn.Module):
    """q and k through one random chain of per-head ops (seeded): products with per-branch weights
    and with a table shared by the heads, shared shifts, unary ops, a per-head mean, a rotation."""

    STEPS = ("weight", "table", "shift", "sigmoid", "neg", "abs-rsqrt", "head-mean", "rotate")

    def __init__(self, seed: int):
        super().__init__()
        rng = torch.Generator().manual_seed(seed)
        self.steps = [self.STEPS[int(i)] for i in torch.randint(len(self.STEPS), (6,), generator=rng)]
        self.wq = torch.nn.Linear(WIDTH, HEADS * HEAD_DIM, bias=False)
        self.wk = torch.nn.Linear(WIDTH, KV_HEADS * HEAD_DIM, bias=False)
        self.q_weights = torch.nn.ParameterList(
            torch.nn.Parameter(1 + 0.2 * torch.randn(HEAD_DIM, generator=rng)) for _ in self.steps
        )
        self.k_weights = torch.nn.ParameterList(
            torch.nn.Parameter(1 + 0.2 * torch.randn(HEAD_DIM, generator=rng)) for _ in self.steps
        )
        self.shift = torch.nn.Parameter(torch.randn(HEAD_DIM, generator=rng))

    def chain(self, t, weights, table):
        for step, weight in zip(self.steps, weights):
            if step == "weight":
                t = t * weight
            elif step == "table":
                t = t * table
            elif step == "shift":
                t = t + self.shift
            elif step == "sigmoid":
                t = torch.sigmoid(t)
            elif step == "neg":
                t = -t
            elif step == "abs-rsqrt":
                t = t * torch.rsqrt(t.abs() + 1.0)
            elif step == "head-mean":
                t = t - t.mean(-1, keepdim=True)
            else:
                t = t + rotate_half(t)
        return t

    def forward(self, x, cos, sin):
        table = cos.unsqueeze(1)
        q = self.chain(self.wq(x).view(1, -1, HEADS, HEAD_DIM), self.q_weights, table)
        k = self.chain(self.wk(x).view(1, -1, KV_HEADS, HEAD_DIM), self.k_weights, table)
        return q, k


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_random_chains_merge_to_the_same_numbers(seed):
    """Each random chain (6 steps, at least 2 ops each) merges, and its program gives the unmerged
    program's numbers to the bit and eager's within fp32 rounding, at 1 and 7 tokens."""
    merged, without = lowered(lambda: RandomChains(seed)), lowered(lambda: RandomChains(seed), WITHOUT)
    assert "xnnpack.merge-head-chains" in merged.partitioner.rewrites_applied, merged.module.steps
    assert sum(merged.inside.values()) < sum(without.inside.values()), (merged.inside, without.inside)
    for length in (1, 7):
        check_same_numbers(merged, without, inputs(length), 1e-5, (merged.module.steps, length))
