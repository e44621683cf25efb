"""An attention mask that masks nothing (transformers' encoders build one from an all-true
boolean mask: ``where(keep, 0, -inf)``, folded to a constant of zeros) is dropped from the
delegate by ``remove-no-ops``: lowered by xir, run on ExecuTorch's runtime, compared with eager;
a mask that does mask (causal) keeps its add. The boundaries (scores returned, read by several
ops, a graph input) are IR-text tests in ``tests/passes/test_remove_no_ops.py``."""

import pytest
import torch

from xir_tools.harness import export, lower, reference

ADD = "aten.add.Tensor"


class Attention(torch.nn.Module):
    def __init__(self, causal: bool, dim=32, heads=4, tokens=9):
        super().__init__()
        self.heads = heads
        self.qkv, self.o = torch.nn.Linear(dim, 3 * dim), torch.nn.Linear(dim, dim)
        keep = torch.ones(tokens, tokens, dtype=torch.bool)
        self.register_buffer("keep", torch.tril(keep) if causal else keep)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = (z.view(b, t, self.heads, -1).transpose(1, 2) for z in self.qkv(x).chunk(3, dim=-1))
        mask = torch.where(self.keep, 0.0, float("-inf"))
        scores = q @ k.transpose(-1, -2) * (d // self.heads) ** -0.5 + mask
        out = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, t, d)
        return self.o(out) + x


@pytest.mark.parametrize("causal", [False, True])
def test_a_mask_of_zeros_leaves_the_delegate(causal):
    torch.manual_seed(0)
    inputs = (torch.randn(1, 9, 32),)
    module = Attention(causal).eval()
    ep = export(module, inputs)
    result = lower(ep, inputs)
    assert result.ran, result.error
    assert result.err(reference(ep, inputs, module)) < 1e-5
    assert result.delegates == 1 and not result.outside, result.outside
    # the adds inside: the qkv and o biases are in the linears; the residual, and the mask's
    # add only where the mask masks something
    assert result.delegated[ADD] == (2 if causal else 1), result.delegated
