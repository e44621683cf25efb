"""A rewrite that changes what a call without a schema reads: the KV-cache update of ExecuTorch's
LLM flow (``llama::update_cache``, exported inside ``auto_functionalized_v2``) reading a value a
pass replaces. The write-back rewires the call in place (it used to fail: Qwen3 in the flow,
static shapes)."""

import pytest
import torch

from xir_tools.harness import lower, reference


@pytest.fixture(scope="module", autouse=True)
def _custom_ops():
    import executorch.extension.llm.custom_ops.custom_ops  # noqa: F401  (registers llama::update_cache)


class CacheUpdate(torch.nn.Module):
    def __init__(self, returned: bool):
        super().__init__()
        self.returned = returned
        self.register_buffer("cache", torch.zeros(1, 8, 2, 4))

    def forward(self, x):
        v = x * 1.0  # xnnpack.remove-no-ops makes every reader read x
        torch.ops.llama.update_cache(v, self.cache, 0)
        outputs = (self.cache + 0.5, torch.relu(v))
        return (*outputs, v) if self.returned else outputs


@pytest.mark.parametrize("returned", [False, True], ids=["several-users", "also-an-output"])
def test_a_schemaless_reader_of_a_rewritten_value_is_rewired(returned):
    inputs = (torch.randn(1, 3, 2, 4),)
    ep = torch.export.export(CacheUpdate(returned), inputs)
    ours = lower(ep, inputs)
    assert ours.ran, ours.error
    # the returned cache proves the update wrote x (not zeros, not a stale value)
    assert ours.err(reference(ep, inputs)) == 0.0
    assert ours.outside == {"torch.ops.higher_order.auto_functionalized_v2": 1}
    assert ours.delegated["aten.relu"] == 1 and ours.delegated["aten.add.Tensor"] == 1
    if not returned:  # (returned, the multiply stays: a graph output is not made an input's alias)
        assert "aten.mul.Tensor" not in ours.delegated  # the no-op multiply is gone


class Bf16CacheUpdate(torch.nn.Module):
    """The flow's bf16 recipe: k computed in fp32 (its rotation), cast to bf16, written to the cache."""

    def __init__(self):
        super().__init__()
        self.register_buffer("cache", torch.zeros(1, 8, 2, 4, dtype=torch.bfloat16))

    def forward(self, x):
        k = (x.float() * 1.5 + 0.25).to(torch.bfloat16)
        torch.ops.llama.update_cache(k, self.cache, 0)
        return self.cache * 2, torch.relu(k)


def test_a_cast_the_cache_update_reads_becomes_a_convert_inside_the_delegate():
    """xnnpack.casts-as-converts rewrites the cast the update reads (it used to decline: the update
    has no schema) and the write-back rewires the update to the delegate's bf16 output: nothing but
    the update stays outside, and the cache holds exactly eager's bf16 values."""
    inputs = (torch.randn(1, 3, 2, 4).bfloat16(),)
    ep = torch.export.export(Bf16CacheUpdate(), inputs)
    ours = lower(ep, inputs, enable_bf16=True)
    assert ours.ran, ours.error
    assert ours.err(reference(ep, inputs)) == 0.0
    assert ours.outside == {"torch.ops.higher_order.auto_functionalized_v2": 1}
    assert ours.delegated["xir.convert"] >= 2 and "aten._to_copy" not in ours.delegated


class ShapedCacheUpdate(torch.nn.Module):
    """The cache update reads what a shape pass rewrites: an unsqueeze (shape-ops-as-views), a slice
    on a symbolic length (xnnpack.slices-as-xir-slices), a select (xnnpack.select-as-slice), a mean
    over the last dim (xnnpack.mean-over-last-dims); that value is read by a relu too."""

    def __init__(self, kind: str):
        super().__init__()
        self.kind = kind
        self.register_buffer("cache", torch.zeros(1, 8, 2, 4))

    def forward(self, x):
        y = x * 1.5
        if self.kind == "unsqueeze":  # x: [3, 2, 4]
            v = y.unsqueeze(0)
        elif self.kind == "slice":  # x: [1, s, 2, 6]
            v = y[..., 1:5]
        elif self.kind == "select":  # x: [1, s, 2, 4, 2]
            v = y[..., 1]
        else:  # mean, x: [1, s, 2, 4, 3]
            v = y.mean(-1)
        torch.ops.llama.update_cache(v, self.cache, 0)
        return self.cache + 0.5, torch.relu(v)


SHAPED = {  # kind: (input, dynamic dim 1, the rewrite's op inside the delegate)
    # (the mean as a linear with a 1/n row rounds as a dot product: within an fp32 ulp of eager's)
    "unsqueeze": (torch.randn(3, 2, 4), False, "aten.view_copy"),
    "slice": (torch.randn(1, 3, 2, 6), True, "xir.slice"),
    "select": (torch.randn(1, 3, 2, 4, 2), True, "xir.slice"),
    "mean": (torch.randn(1, 3, 2, 4, 3), True, "aten.mm"),
}


@pytest.mark.parametrize("kind", sorted(SHAPED))
def test_a_shape_op_the_cache_update_reads_is_rewritten_inside_the_delegate(kind):
    """Each of these passes used to decline a value read by a call without a schema; the write-back
    rewires the update to the rewritten value, so the op runs inside the delegate, and the cache
    (returned) and the relu hold eager's values; the program also runs at another length."""
    from xir_tools.harness import load_method

    x, dynamic, op = SHAPED[kind]
    shapes = ({1: torch.export.Dim("seq", min=1, max=8)},) if dynamic else None
    ep = torch.export.export(ShapedCacheUpdate(kind), (x,), dynamic_shapes=shapes)
    ours = lower(ep, (x,))
    assert ours.ran, ours.error
    tolerance = 1e-6 if kind == "mean" else 0.0
    assert ours.err(reference(ep, (x,))) <= tolerance
    assert ours.outside == {"torch.ops.higher_order.auto_functionalized_v2": 1}, ours.outside
    assert ours.delegated[op] >= 1, ours.delegated
    if dynamic:  # another length on the same program, from a fresh module (its own cache)
        longer = torch.randn(x.shape[0], 5, *x.shape[2:])
        _, method = load_method(ours.buffer)
        expected = ShapedCacheUpdate(kind)(longer)
        for got, want in zip(method.execute([longer]), expected):
            assert (got - want).abs().max().item() <= tolerance
