"""Attention as decoder LMs and encoders export it, lowered with xir on the runtime and compared
with eager: the masked softmax (xnnpack.safe-softmax), grouped-query attention's repeat of K/V
heads (xnnpack.fold-repeat-into-bmm; xnnpack.expand-as-broadcast where the repeat is read elsewhere too)
and the rotary embeddings' cat of a tensor with itself all run inside one XNNPACK delegate, in
fp32 and bf16."""

import pytest
import torch
import torch.nn.functional as F

from xir_tools.harness import lower, reference

DTYPES = {"float32": 1e-5, "bfloat16": 2**-6}


def lowered(module, inputs, dtype_name):
    dtype = getattr(torch, dtype_name)
    module = module.eval().to(dtype)
    inputs = tuple(t.to(dtype) if t.is_floating_point() else t for t in inputs)
    ep = torch.export.export(module, inputs)
    expected = reference(ep, inputs)
    ours = lower(ep, inputs, "xir", enable_bf16=dtype is torch.bfloat16)
    assert ours.ran, ours.error
    for actual, wanted in zip(ours.outputs, expected):
        assert actual.dtype == wanted.dtype
        error = (actual.float() - wanted.float()).abs().max().item()
        assert error <= DTYPES[dtype_name] * max(1.0, wanted.float().abs().max().item()), error
    return ours, expected


class MaskedAttention(torch.nn.Module):
    """Scaled dot-product attention with an additive mask (a runtime input)."""

    def forward(self, q, k, v, mask):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


@pytest.mark.parametrize("dtype_name", DTYPES)
def test_masked_softmax_with_a_fully_masked_row_runs_inside(dtype_name):
    q, k, v = torch.randn(1, 2, 5, 8), torch.randn(1, 2, 5, 8), torch.randn(1, 2, 5, 8)
    mask = torch.zeros(5, 5).masked_fill(torch.ones(5, 5, dtype=torch.bool).triu(1), -torch.inf)
    mask[-1] = -torch.inf  # a padding row that masks every key: eager gives it zeros, not NaN
    ours, expected = lowered(MaskedAttention(), (q, k, v, mask), dtype_name)
    assert bool((expected[0][..., -1, :] == 0).all())  # the fully masked row
    assert ours.delegates == 1, ours.partitioner.report()
    assert ours.delegated["aten._softmax"] == 1 and ours.delegated["aten.clamp"] == 2
    assert not {
        "aten.where.self",
        "aten.any.dim",
        "aten.logical_not",
        "aten.eq.Scalar",
        "aten.full_like",
        "aten._softmax",
    } & set(ours.outside), dict(ours.outside)


class GroupedQueryAttention(torch.nn.Module):
    """transformers' repeat_kv: K/V heads expanded to the query heads, then reshaped; the repeated
    keys are also returned (a value that is both a graph output and read on)."""

    def forward(self, q, k, v):
        batch, kv_heads, length, dim = k.shape
        groups = q.shape[1] // kv_heads
        k = k[:, :, None].expand(batch, kv_heads, groups, length, dim).reshape(batch, kv_heads * groups, length, dim)
        v = v[:, :, None].expand(batch, kv_heads, groups, length, dim).reshape(batch, kv_heads * groups, length, dim)
        scores = torch.softmax(q @ k.transpose(-1, -2) * dim**-0.5, dim=-1)
        return scores @ v, k


@pytest.mark.parametrize("dtype_name", DTYPES)
def test_repeated_kv_heads_run_inside(dtype_name):
    q, k, v = torch.randn(1, 6, 3, 8), torch.randn(1, 2, 7, 8), torch.randn(1, 2, 7, 8)
    ours, _ = lowered(GroupedQueryAttention(), (q, k, v), dtype_name)
    assert ours.delegates == 1, ours.partitioner.report()
    assert "aten.expand_copy" not in ours.outside and "aten.expand_copy" not in ours.delegated
    assert ours.delegated["aten.mul.Tensor"] >= 2  # each repeat is a broadcasting multiply by ones
    assert not ours.outside, dict(ours.outside)  # (in bf16 the scale's cast to bf16 folds)


class RepeatedHeadsAttention(torch.nn.Module):
    """transformers' eager attention with repeat_kv, as its decoders export it (the scale on the scores)."""

    def forward(self, q, k, v):
        batch, kv_heads, length, dim = k.shape
        groups = q.shape[1] // kv_heads
        k = k[:, :, None].expand(batch, kv_heads, groups, length, dim).reshape(batch, kv_heads * groups, length, dim)
        v = v[:, :, None].expand(batch, kv_heads, groups, length, dim).reshape(batch, kv_heads * groups, length, dim)
        scores = torch.softmax(torch.matmul(q, k.transpose(2, 3)) * dim**-0.5, dim=-1)
        return torch.matmul(scores, v).transpose(1, 2).contiguous()


@pytest.mark.parametrize("dtype_name", DTYPES)
@pytest.mark.parametrize(
    "heads, kv_heads, queries",
    [(6, 2, 3), (4, 1, 1), (4, 2, 1), (2, 2, 4)],
    ids=["gqa-prefill", "mqa-decode", "gqa-decode", "mha"],
)
def test_repeated_kv_heads_are_not_copied(dtype_name, heads, kv_heads, queries):
    """xnnpack.fold-repeat-into-bmm: the query heads of a group are rows of one bmm with the group's K/V,
    so neither the repeat nor its multiply by ones is left, inside or outside."""
    q, k, v = torch.randn(2, heads, queries, 8), torch.randn(2, kv_heads, 7, 8), torch.randn(2, kv_heads, 7, 8)
    ours, _ = lowered(RepeatedHeadsAttention(), (q, k, v), dtype_name)
    assert ours.delegates == 1 and not ours.outside, (ours.partitioner.report(), dict(ours.outside))
    assert "aten.expand_copy" not in ours.delegated
    assert ours.delegated["aten.mul.Tensor"] == 1, dict(ours.delegated)  # the scale; no multiply by ones
    assert ours.delegated["aten.bmm"] + ours.delegated["xir.bmm_f32out"] == 2


class Rotary(torch.nn.Module):
    """The rotary table of HF decoders: freqs = positions x inverse frequencies, emb = cat(freqs, freqs)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, 8, 2).float() / 8)))

    def forward(self, positions, x):
        freqs = positions[:, :, None] * self.inv_freq
        emb = torch.cat((freqs, freqs), dim=-1)
        return x * emb.cos() + x.flip(-1) * emb.sin(), emb


def test_cat_of_a_tensor_with_itself_runs_inside():
    positions, x = torch.arange(5.0).reshape(1, 5), torch.randn(1, 5, 8)
    ours, _ = lowered(Rotary(), (positions, x), "float32")
    assert ours.delegated["aten.cat"] == 1 and "aten.cat" not in ours.outside
