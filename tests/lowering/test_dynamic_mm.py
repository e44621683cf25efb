"""An ``mm`` of two computed matrices runs in XNNPACK as a one-batch ``bmm`` between views
(``xnnpack.dynamic-mm-as-bmm``); stock leaves it outside (ExecuTorch's ``add_mul`` example), since
XNNPACK's fully connected takes only a constant weight. Lowered, run on the runtime, compared
with eager."""

from __future__ import annotations

import pytest
import torch

from xir_tools.harness import lower, reference


class Products(torch.nn.Module):
    """Graph inputs as both operands, a product that is a graph output and read twice (as both
    operands of the next), a constant first operand, and a computed second operand."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(3, 3, generator=torch.Generator().manual_seed(5)))

    def forward(self, a, x, b):
        p = torch.mm(a, x)
        q = torch.mm(p, p)
        r = torch.mm(self.w, torch.relu(b))
        return p, q + r


def inputs(dtype=torch.float32):
    g = torch.Generator().manual_seed(0)
    return tuple(torch.randn(*s, generator=g).to(dtype) for s in ((3, 4), (4, 3), (3, 3)))


@pytest.fixture(scope="module")
def fp32():
    example = inputs()
    ep = torch.export.export(Products().eval(), example)
    return ep, example, lower(ep, example, "xir")


def test_every_product_runs_in_one_delegate(fp32):
    ep, example, ours = fp32
    # before: the three mm stayed outside (as stock leaves them), splitting the program in two delegates
    assert ours.ran, ours.error
    assert ours.err(reference(ep, example)) <= 1e-5
    assert not ours.outside, ours.outside
    assert ours.delegates == 1 and ours.delegated["aten.bmm"] == 3


def test_through_to_backend():
    example = inputs()
    ep = torch.export.export(Products().eval(), example)
    ours = lower(ep, example, "xir", via="backend")
    assert ours.ran, ours.error
    assert ours.err(reference(ep, example)) <= 1e-5
    assert not ours.outside and ours.delegated["aten.bmm"] == 3


def test_bf16_with_enable_bf16_is_computed_in_fp32():
    example = inputs(torch.bfloat16)
    ep = torch.export.export(Products().to(torch.bfloat16).eval(), example)
    ours = lower(ep, example, "xir", enable_bf16=True)
    assert ours.ran, ours.error
    ref = reference(ep, example)
    assert ours.err(ref) <= 0.02 * max(r.abs().max().item() for r in ref)
    assert ours.delegated["xir.bmm_f32out"] == 3 and not ours.outside


def test_bf16_without_enable_bf16_stays_outside_as_mm():
    example = inputs(torch.bfloat16)
    ep = torch.export.export(Products().to(torch.bfloat16).eval(), example)
    ours = lower(ep, example, "xir")
    assert ours.ran, ours.error
    assert ours.outside["aten.mm"] == 3 and "aten.bmm" not in ours.outside


def test_a_symbolic_row_count():
    class Mm(torch.nn.Module):
        def forward(self, a, x):
            return torch.mm(a, x)

    example = (torch.randn(6, 4), torch.randn(4, 5))
    ep = torch.export.export(Mm(), example, dynamic_shapes=({0: torch.export.Dim("m", min=2, max=64)}, None))
    ours = lower(ep, example, "xir")
    assert ours.ran, ours.error
    assert ours.err(reference(ep, example)) <= 1e-5
    assert ours.delegated["aten.bmm"] == 1 and not ours.outside
