"""``xnnpack.merge-head-chains`` end to end: a Qwen3-style attention input (q and k projections
viewed to heads, each head RMS-normed with its own weights, then rotated with the Hugging Face
``rotate_half`` rotary embedding) exported with a symbolic sequence length, lowered with xir, loaded
once on ExecuTorch's runtime and run at lengths 1, 7 and 32 against eager PyTorch and against the
same program lowered without the pass (the merged chain must give the same numbers to the bit).

Boundaries: the normed q is also a graph output (a slice of the merged chain returns it), k's
rotated value is read by another op besides being returned (its slice feeds both), v (the same
heads as k, but no chain) stays as it was, the tables are graph inputs, the norm weights constants.
One lowering per program (a module-scoped fixture) shared by the tests."""

from __future__ import annotations

import pytest
import torch
from torch.export import Dim

from lowering.partitioner import DEFAULT_PIPELINE
from xir_tools import harness

WIDTH, HEADS, KV_HEADS, HEAD_DIM = 64, 4, 2, 16
LENGTHS = (1, 7, 32)
WITHOUT = ",".join(p for p in DEFAULT_PIPELINE.split(",") if p != "xnnpack.merge-head-chains")


class HeadNorm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(1.0 + 0.2 * torch.randn(HEAD_DIM))

    def forward(self, x):
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6) * self.weight


def rotate_half(t):
    return torch.cat([-t[..., HEAD_DIM // 2:], t[..., :HEAD_DIM // 2]], -1)


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


def inputs(length):
    angles = torch.arange(length, dtype=torch.float32)[:, None] * torch.linspace(0.1, 1.0, HEAD_DIM)[None]
    return [torch.randn(1, length, WIDTH), torch.cos(angles), torch.sin(angles)]


class Lowered:
    def __init__(self, pipeline=None):
        torch.manual_seed(0)
        self.module = QKNormRope().eval()
        seq = Dim("seq", min=1, max=128)
        ep = harness.export(self.module, tuple(inputs(7)), dynamic_shapes=({1: seq}, {0: seq}, {0: seq}))
        options = {} if pipeline is None else {"pipeline": pipeline}
        self.edge, self.partitioner = harness.lower_edge(ep, "xir", **options)
        self.inside, self.outside = harness.delegated_ops(self.edge), harness.outside_ops(self.edge)
        self.delegates = harness.delegate_count(self.edge)
        self.program, self.method = harness.load_method(harness.to_buffer(self.edge))


@pytest.fixture(scope="module")
def programs():
    return {"merged": Lowered(), "without": Lowered(WITHOUT)}


def test_q_and_k_chains_run_once_in_one_delegate(programs):
    merged, without = programs["merged"], programs["without"]
    assert "xnnpack.merge-head-chains" in merged.partitioner.rewrites_applied
    assert merged.delegates == 1 and not merged.outside, merged.outside
    # one norm (one rsqrt, one mean) and one rotation where there were two of each
    assert without.inside["aten.rsqrt"] == 2 and merged.inside["aten.rsqrt"] == 1
    assert sum(merged.inside.values()) < sum(without.inside.values()) - 5, (merged.inside, without.inside)


@pytest.mark.parametrize("length", LENGTHS)
def test_the_merged_program_matches_eager_and_the_unmerged_one_to_the_bit(programs, length):
    torch.manual_seed(length)
    args = inputs(length)
    with torch.no_grad():
        expected = harness.as_list(programs["merged"].module(*args))
    merged = harness.run_method(programs["merged"].method, args)
    without = harness.run_method(programs["without"].method, args)
    assert [tuple(a.shape) for a in merged] == [tuple(e.shape) for e in expected]
    assert harness.max_error(merged, expected) <= 1e-5
    for a, b in zip(merged, without):
        assert torch.equal(a, b)
