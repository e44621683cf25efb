"""Dynamic sequence lengths end to end: small decoder blocks exported with a symbolic sequence dim
(``torch.export.Dim("seq", min=1, max=128)``), lowered with xir, loaded once on ExecuTorch's
runtime and run at lengths 1, 7 and 128 against eager PyTorch.

What makes them whole in XNNPACK: a view whose new shape has one symbolic dim is written with -1
(XNNPACK's reshape infers it at run time: ``shape-ops-as-views``, also for squeeze/unsqueeze at a
middle dim), RMSNorm's mean over the last dim as a product with a constant column between two such views
(``xnnpack.mean-over-last-dims``), bf16 <-> f32 casts as XNNPACK converts
(``xnnpack.casts-as-converts``), a slice of a static dim of a tensor with a symbolic dim as
``xir::slice`` (its XNNPACK slice takes the symbolic dims whole, at their run-time size; stock's
serializer writes their upper bound), a select of a static dim as such a slice and a view
(``xnnpack.select-as-slice``). A slice of the symbolic dim itself stays outside, with its reason.

One program per module, lowered once (a module-scoped fixture) and shared by its tests."""

from __future__ import annotations

import pytest
import torch
from torch.export import Dim

from lowering.rules import SYMBOLIC_SLICE
from xir_tools import harness

LENGTHS = (1, 7, 128)
WIDTH = 64


class RMSNorm(torch.nn.Module):
    """x * rsqrt(mean(x^2, -1, keepdim) + eps) * w (Llama's, in fp32)."""

    def __init__(self, dim=WIDTH, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = torch.nn.Parameter(1.0 + 0.1 * torch.randn(dim))

    def forward(self, x):
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + self.eps) * self.weight


class RMSNormBf16(RMSNorm):
    """Llama's bf16 RMSNorm: upcast, normalize in fp32, downcast, times a bf16 weight."""

    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(self.weight.detach().to(torch.bfloat16))

    def forward(self, x):
        h = x.float()
        return (h * torch.rsqrt((h * h).mean(-1, keepdim=True) + self.eps)).type_as(x) * self.weight


class QKV(torch.nn.Module):
    """q, k, v projections viewed to heads and transposed; v's first half of each head sliced."""

    def __init__(self, heads=4):
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v = (torch.nn.Linear(WIDTH, WIDTH) for _ in range(3))

    def forward(self, x):
        b, s, _ = x.shape
        d = WIDTH // self.heads
        q = self.q(x).view(b, s, self.heads, d).transpose(1, 2)
        k = self.k(x).view(b, s, self.heads, d).transpose(1, 2)
        v = self.v(x).view(b, s, self.heads, d).transpose(1, 2)
        return q, k, v[..., : d // 2]


class CastPair(torch.nn.Module):
    """A bf16 round trip with bf16 work between the casts, the upcast read by an fp32 add."""

    def forward(self, x):
        h = x.to(torch.bfloat16)
        return (h * h).to(torch.float32) + x


class MiddleDims(torch.nn.Module):
    """unsqueeze and squeeze at a middle dim (XNNPACK's visitors take the last dim only); the
    unsqueezed value is also returned."""

    def forward(self, x):
        u = x.unsqueeze(2)
        r = torch.relu(u) * 3.0
        return r.squeeze(2) + x, u


class Boundaries(torch.nn.Module):
    """A view of a graph input (its size computed from the input's symbolic length) whose result is
    returned and read by two ops."""

    def forward(self, x):
        a = x.view(1, x.shape[1], 4, WIDTH // 4)
        return a, a * 2.0 + torch.relu(a)


class Rotary(torch.nn.Module):
    """Llama's rotary embedding as ExecuTorch's example writes it: pairs unbound (two selects),
    rotated by cos/sin tables sliced to the length, stacked back and flattened."""

    def __init__(self, heads=4):
        super().__init__()
        self.heads, half = heads, WIDTH // heads // 2
        angles = torch.outer(torch.arange(128.0), 1.0 / 10000 ** (torch.arange(half) / half))
        self.register_buffer("cos", torch.cos(angles))
        self.register_buffer("sin", torch.sin(angles))

    def forward(self, x):
        b, s, _ = x.shape
        q = x.view(b, s, self.heads, -1)
        r, i = q.reshape(q.shape[:-1] + (-1, 2)).unbind(-1)
        cos, sin = self.cos[:s].view(1, s, 1, -1), self.sin[:s].view(1, s, 1, -1)
        out = torch.stack([r * cos - i * sin, r * sin + i * cos], dim=-1).flatten(3)
        return out.view(b, s, -1)


class RotateHalf(torch.nn.Module):
    """The Hugging Face rotary embedding (``rotate_half``: halves swapped, the upper one negated) of
    q and k of two head counts, one table pair sliced to the length and shared; q also returned."""

    def __init__(self, heads=4, kv_heads=2):
        super().__init__()
        self.heads, self.kv_heads, width = heads, kv_heads, WIDTH // heads
        angles = torch.outer(torch.arange(128.0), 1.0 / 10000 ** (torch.arange(width // 2) / (width // 2)))
        angles = torch.cat((angles, angles), -1)
        self.register_buffer("cos", torch.cos(angles))
        self.register_buffer("sin", torch.sin(angles))

    def forward(self, x):
        b, s, _ = x.shape
        q = x.view(b, s, self.heads, -1)
        k = x[..., : WIDTH // 2].view(b, s, self.kv_heads, -1) * 0.5
        cos, sin = self.cos[:s].unsqueeze(1), self.sin[:s].unsqueeze(1)

        def rotate_half(t):
            half = t.shape[-1] // 2
            return torch.cat((-t[..., half:], t[..., :half]), dim=-1)

        return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin, q


class Slices(torch.nn.Module):
    """Slices of a graph input at its boundaries: one returned and read by two ops, one of a
    negative start, and the first token (of the symbolic dim, a static length)."""

    def forward(self, x):
        a = x[..., 8:24]
        b = x[..., -8:]
        return a, torch.relu(a) + a * 2.0, b * 3.0, x[:, :1] + 1.0


class MaskedAttention(torch.nn.Module):
    """Grouped-query attention of a symbolic number of queries over a static cache with a float
    mask, through ATen's SDPA, as ExecuTorch's LLM flow writes it without its custom SDPA: K/V heads
    repeated with repeat_interleave (xnnpack.fold-repeat-into-bmm makes no repeat), the masked
    softmax setting all--inf rows to 0 (xnnpack.safe-softmax)."""

    def __init__(self, heads=4, kv_heads=2, cache=16):
        super().__init__()
        self.heads, self.repeats, self.kv_shape = heads, heads // kv_heads, (1, kv_heads, cache, WIDTH // heads)
        mask = torch.zeros(128, cache)
        mask[:, cache // 2 :] = float("-inf")
        mask[0] = float("-inf")  # (a fully masked row: the first query sees nothing)
        self.register_buffer("mask", mask)

    def static_inputs(self):  # the K/V cache: inputs, as the flow's mutable buffers (not constants)
        return torch.randn(self.kv_shape), torch.randn(self.kv_shape)

    def forward(self, x, k, v):
        b, s, _ = x.shape
        q = x.view(b, s, self.heads, -1).transpose(1, 2)
        k, v = k.repeat_interleave(self.repeats, dim=1), v.repeat_interleave(self.repeats, dim=1)
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=self.mask[:s])
        return out.transpose(1, 2).reshape(b, s, WIDTH)


class Norms(torch.nn.Module):
    """torch's layer norm (with weight and bias, and without), group norm and RMSNorm over rows of
    a symbolic count (the group norm's batch: the rows viewed (rows, WIDTH))."""

    def __init__(self):
        super().__init__()
        self.ln, self.bare = torch.nn.LayerNorm(WIDTH), torch.nn.LayerNorm(WIDTH, elementwise_affine=False)
        self.gn, self.rms = torch.nn.GroupNorm(4, WIDTH), torch.nn.RMSNorm(WIDTH, eps=1e-6)
        for norm in (self.ln, self.gn, self.rms):
            norm.weight.data = 1.0 + 0.1 * torch.randn(WIDTH)
            if getattr(norm, "bias", None) is not None:
                norm.bias.data = 0.1 * torch.randn(WIDTH)

    def forward(self, x):
        h = self.ln(x)
        g = self.gn(h.view(-1, WIDTH)).view(1, -1, WIDTH)
        return self.rms(self.bare(g) + h)


class NoOps(torch.nn.Module):
    """Qwen3's q/k norm and rotary in ExecuTorch's flow: an alias, and a cat with an empty
    pass-through part (a cat of one tensor once it is dropped), on a symbolic length."""

    def forward(self, x):
        a = torch.ops.aten.alias.default(x) * 2.0
        return torch.relu(torch.cat([a, x[..., :0]], dim=-1))


class LinearMeans(torch.nn.Module):
    """In a program that keeps linears, fp32 means over the last dim are linears with a 1/cols row
    (xnnpack.mean-over-last-dims): RMSNorm's, of the graph input, returned; and one without
    keepdim of a linear's output that is also returned (a view after it)."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(WIDTH, WIDTH)
        self.scale = torch.nn.Parameter(torch.rand(WIDTH) + 0.5)

    def forward(self, x):
        m = x.pow(2).mean(-1, keepdim=True)
        h = self.proj(x * torch.rsqrt(m + 1e-6) * self.scale)
        return h, m, h.mean(-1)


class Means(torch.nn.Module):
    """fp32 means over trailing dims at the boundaries (xnnpack.mean-over-last-dims makes each a
    product with a constant 1/cols column): of the graph input, returned and read by two ops; per
    head without keepdim. Over the last two dims of a 4-D tensor it is XNNPACK's own spatial mean
    and stays one; a parameter's mean is folded."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(WIDTH))

    def forward(self, x):
        m = x.mean(-1, keepdim=True)
        h = x.view(1, x.shape[1], 4, WIDTH // 4)
        return m, x * m + m, (h * h).mean(-1), h.mean((-1, -2)) * self.w.mean(0, keepdim=True)


MODULES = {
    "rms-norm": (RMSNorm, torch.float32, {}),
    "means": (Means, torch.float32, {}),
    "linear-means": (LinearMeans, torch.float32, {}),
    "rms-norm-bf16": (RMSNormBf16, torch.bfloat16, {"enable_bf16": True}),
    "qkv": (QKV, torch.float32, {}),
    "cast-pair": (CastPair, torch.float32, {"enable_bf16": True}),
    "middle-dims": (MiddleDims, torch.float32, {}),
    "boundaries": (Boundaries, torch.float32, {}),
    "rotary": (Rotary, torch.float32, {}),
    "rotate-half": (RotateHalf, torch.float32, {}),
    "slices": (Slices, torch.float32, {}),
    "masked-attention": (MaskedAttention, torch.float32, {}),
    "no-ops": (NoOps, torch.float32, {}),
    "norms": (Norms, torch.float32, {}),
}


class Lowered:
    def __init__(self, name):
        make, self.dtype, options = MODULES[name]
        torch.manual_seed(0)
        self.module = make().eval()
        # (a module may take static inputs after x: the same tensors at every length)
        self.static = tuple(self.module.static_inputs()) if hasattr(self.module, "static_inputs") else ()
        sample = (torch.randn(1, 7, WIDTH, dtype=self.dtype), *self.static)
        dynamic = ({1: Dim("seq", min=1, max=128)}, *(None for _ in self.static))
        self.ep = harness.export(self.module, sample, dynamic_shapes=dynamic)
        self.edge, self.partitioner = harness.lower_edge(self.ep, "xir", **options)
        self.inside, self.outside = harness.delegated_ops(self.edge), harness.outside_ops(self.edge)
        self.rejected = {(r.node.op, r.reason) for r in self.partitioner.last_plan.rejected}
        self.program, self.method = harness.load_method(harness.to_buffer(self.edge))  # loaded once

    def run(self, length):
        x = torch.randn(1, length, WIDTH, dtype=self.dtype)
        with torch.no_grad():
            expected = harness.as_list(self.module(x, *self.static))
        return harness.run_method(self.method, [x, *self.static]), expected


@pytest.fixture(scope="module")
def lowered():
    cache = {}

    def get(name):
        if name not in cache:
            cache[name] = Lowered(name)
        return cache[name]

    return get


@pytest.mark.parametrize("name", list(MODULES))
def test_one_program_runs_every_length_and_matches_eager(lowered, name):
    program = lowered(name)
    kind = "bf16" if program.dtype is torch.bfloat16 or name == "cast-pair" else "fp32"
    for length in LENGTHS:
        actual, expected = program.run(length)
        assert [tuple(a.shape) for a in actual] == [tuple(e.shape) for e in expected], length
        assert harness.max_error(actual, expected) <= harness.allowed_error(expected, kind), length


def _views_written_with_integers(edge):
    """Every view_copy in the delegates: its size all ints with at most one -1, and its FX value's
    symbolic shape the one its size gives."""
    ep = edge.exported_program()
    views = []
    for _, module in ep.graph_module.named_children():
        original = getattr(module, "original_module", None)
        for node in original.graph.nodes if original is not None else ():
            if node.op == "call_function" and "view_copy" in str(node.target):
                size, shape = list(node.args[1]), list(node.meta["val"].shape)
                assert all(isinstance(d, int) for d in size) and size.count(-1) <= 1, size
                assert len(size) == len(shape)
                for d, s in zip(size, shape):
                    assert d == -1 if not isinstance(s, int) else d == s, (size, shape)
                views.append(size)
    return views


def test_rms_norm_is_one_delegate_with_its_mean(lowered):
    program = lowered("rms-norm")
    assert not program.outside, program.outside
    # xnnpack.mean-over-last-dims: the fp32 mean as a product with a 1/WIDTH column, between views
    assert program.inside["aten.mm"] == 1 and "aten.mean.dim" not in program.inside
    assert harness.delegate_count(program.edge) == 1
    assert [-1, WIDTH] in _views_written_with_integers(program.edge)


def test_norms_of_symbolic_rows_are_one_delegate(lowered):
    """Layer norms and the group norm decomposed (xnnpack.decompose-layer-norm/-group-norm), the
    RMSNorm's mean a product: every norm inside, nothing outside."""
    program = lowered("norms")
    assert not program.outside, program.outside
    assert harness.delegate_count(program.edge) == 1
    assert not [op for op in program.inside if "norm" in op], program.inside
    assert program.inside["aten.rsqrt"] == 4  # two layer norms, the group norm, the RMSNorm


def test_fp32_means_are_products_with_a_column_inside(lowered):
    program = lowered("means")
    assert not program.outside, program.outside
    assert harness.delegate_count(program.edge) == 1
    assert program.inside["aten.mm"] == 2 and program.inside["aten.mean.dim"] == 1  # (the 4-D spatial one)


def test_means_in_a_program_with_linears_are_linears_inside(lowered):
    program = lowered("linear-means")
    assert not program.outside, program.outside
    assert harness.delegate_count(program.edge) == 1
    assert program.inside["aten.linear"] == 3 and "aten.mm" not in program.inside, program.inside
    assert "aten.mean.dim" not in program.inside
    assert program.inside["aten.view_copy"] == 1  # (only the mean without keepdim: [1, s, 1] -> [1, s])


def test_bf16_rms_norm_converts_inside(lowered):
    program = lowered("rms-norm-bf16")
    assert not program.outside, program.outside
    assert program.inside["xir.convert"] == 2 and program.inside["aten.mm"] == 1  # (the fp32 mean)


def test_cast_pair_converts_inside(lowered):
    program = lowered("cast-pair")
    assert not program.outside, program.outside
    # the casts, and the product computed in fp32 between converts: the upcast reads it inside
    # XNNPACK, which would read it unrounded (xnnpack.bf16-rounded-arithmetic)
    assert program.inside["xir.convert"] == 4 and program.inside["aten.mul.Tensor"] == 1, program.inside


def _slices_written(edge):
    """(offsets, sizes) of every xir::slice in the delegates, as its visitor writes them."""
    from lowering.fx.xnnpack_ops import static_slice_sizes

    ep, written = edge.exported_program(), []
    for _, module in ep.graph_module.named_children():
        original = getattr(module, "original_module", None)
        for node in original.graph.nodes if original is not None else ():
            if node.op == "call_function" and "xir.slice" in str(node.target):
                written.append(static_slice_sizes(node.args[0].meta["val"].shape, *node.args[1:4]))
    return written


def test_qkv_views_and_the_slice_inside(lowered):
    program = lowered("qkv")
    assert not program.outside, program.outside
    # q, k and v one linear (xnnpack.fuse-sibling-linears), its output viewed as their 12 heads and
    # sliced into each one's 4 along the heads; then v's half of each head
    assert program.inside["aten.linear"] == 1 and program.inside["aten.permute_copy"] >= 3
    assert program.inside["xir.slice"] == 4 and harness.delegate_count(program.edge) == 1
    assert [1, -1, 12, WIDTH // 4] in _views_written_with_integers(program.edge)
    # the symbolic dims' sizes are 0 (the whole dim at run time), the sliced one its length
    heads = [([0, 0, start, 0], [0, 0, 4, 0]) for start in (0, 4, 8)]
    assert _slices_written(program.edge) == heads + [([0, 0, 0, 0], [0, 0, 0, WIDTH // 8])]
    # (the sym_size that fed the views is gone from the program)
    assert "aten.sym_size.int" not in program.outside


def test_rotary_is_one_delegate(lowered):
    program = lowered("rotary")
    # the cos/sin tables are sliced to the length (a symbolic end): outside, with the reason
    assert program.outside == {"aten.slice_copy.Tensor": 2}, program.outside
    assert ("aten.slice_copy.Tensor", SYMBOLIC_SLICE) in program.rejected
    # the rotation itself as a pair swap (xnnpack.rope-as-pair-swap): no strided slice, no select,
    # no interleaving concatenation
    assert not any(op in program.inside for op in ("aten.select_copy.int", "xir.slice", "aten.cat")), program.inside
    assert program.inside["aten.mm"] == 1
    assert harness.delegate_count(program.edge) == 1


def test_rotate_half_without_its_negation(lowered):
    program = lowered("rotate-half")
    # rotate_half as cat([x, x]) and one slice, its sign in the shared sine table
    # (xnnpack.rotate-half-sign-in-sin): no negation, one concatenation and one slice per rotation
    # (and k's own slice of x)
    assert "aten.neg" not in program.inside, program.inside
    assert program.inside["aten.cat"] == 2 and program.inside["xir.slice"] == 3, program.inside
    assert harness.delegate_count(program.edge) == 1
    assert program.outside == {"aten.slice_copy.Tensor": 2}, program.outside  # the tables, to the length
    for length in LENGTHS:  # the same numbers as eager: the sign moved, not rounded
        actual, expected = program.run(length)
        assert harness.max_error(actual, expected) == 0, length


def test_slices_at_the_boundaries(lowered):
    program = lowered("slices")
    assert not program.outside, program.outside
    assert program.inside["xir.slice"] == 3 and harness.delegate_count(program.edge) == 1
    assert sorted(_slices_written(program.edge)) == [
        ([0, 0, 0], [0, 1, 0]),
        ([0, 0, 8], [0, 0, 16]),
        ([0, 0, WIDTH - 8], [0, 0, 8]),
    ]


def test_grouped_query_attention_of_a_symbolic_length_is_inside(lowered):
    program = lowered("masked-attention")
    # outside: the mask's slice to the length (a symbolic end) and nothing of the softmax's fix-up
    assert set(program.outside) == {"aten.slice_copy.Tensor"}, program.outside
    assert program.inside["aten._softmax"] == 1 and harness.delegate_count(program.edge) == 1
    # the K/V heads are not repeated: each bmm reads the cache's 2 heads, 2 query heads as rows of
    # each (repeated, each of K and V would be a multiply by ones, xnnpack.expand-as-broadcast, and a copy)
    assert program.inside["aten.bmm"] == 2 and program.inside["aten.mul.Tensor"] == 4
    assert "aten.expand_copy" not in program.inside
    # the copy reshape() makes of the transposed output keeps its dim order: xnnpack.remove-no-ops drops it
    # (XNNPACK's preprocessing would), and the delegate gets only the linear rebuild (lowering.fx.backend_passes)
    assert "dim_order_ops._clone_dim_order" not in program.inside
    assert program.partitioner.all_passes_reasons == {}


def test_alias_and_one_input_cat_go(lowered):
    program = lowered("no-ops")
    assert not program.outside, program.outside
    assert "aten.alias_copy" not in program.inside and "aten.cat" not in program.inside
    assert harness.delegate_count(program.edge) == 1


def test_squeeze_and_unsqueeze_at_a_middle_dim_are_views(lowered):
    program = lowered("middle-dims")
    assert not program.outside, program.outside
    assert "aten.unsqueeze_copy" not in program.inside and "aten.squeeze_copy.dims" not in program.inside
    assert sorted(_views_written_with_integers(program.edge)) == [[1, -1, 1, WIDTH], [1, -1, WIDTH]]


def test_a_view_of_an_input_returned_and_read_twice(lowered):
    program = lowered("boundaries")
    assert not program.outside, program.outside
    assert _views_written_with_integers(program.edge) == [[1, -1, 4, WIDTH // 4]]
