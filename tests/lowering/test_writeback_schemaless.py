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
