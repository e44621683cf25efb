"""An ``mm`` of two computed matrices runs in XNNPACK as a one-batch ``bmm`` between views
(``xnnpack.dynamic-mm-as-bmm``); stock leaves it outside (ExecuTorch's ``add_mul`` example), since
XNNPACK's fully connected takes only a constant weight. A small product stays an ``mm`` outside, as
stock leaves it (below ``SMALL_MM`` multiply-adds, where ExecuTorch's kernel is faster). Lowered, run
on the runtime, compared with eager."""

from __future__ import annotations

import pytest
import torch

from xir_tools.harness import lower, reference


class Products(torch.nn.Module):
    """Graph inputs as both operands, a product that is a graph output and read twice (as both
    operands of the next), a constant first operand, and a computed second operand."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(N, N, generator=torch.Generator().manual_seed(5)) / N**0.5)

    def forward(self, a, x, b):
        p = torch.mm(a, x)
        q = torch.mm(p, p)
        r = torch.mm(self.w, torch.relu(b))
        return p, q + r


N = 128  # (N**3 multiply-adds per product: past SMALL_MM, so inside)


def inputs(dtype=torch.float32):
    g = torch.Generator().manual_seed(0)
    return tuple((torch.randn(N, N, generator=g) / N**0.25).to(dtype) for _ in range(3))


def peak(ref) -> float:
    return max(r.abs().max().item() for r in ref)


@pytest.fixture(scope="module")
def fp32():
    example = inputs()
    ep = torch.export.export(Products().eval(), example)
    return ep, example, lower(ep, example, "xir")


def test_every_product_runs_in_one_delegate(fp32):
    ep, example, ours = fp32
    # before: the three mm stayed outside (as stock leaves them), splitting the program in two delegates
    assert ours.ran, ours.error
    ref = reference(ep, example)
    assert ours.err(ref) <= 1e-5 * peak(ref)
    assert not ours.outside, ours.outside
    assert ours.delegates == 1 and ours.delegated["aten.bmm"] == 3


def test_through_to_backend():
    example = inputs()
    ep = torch.export.export(Products().eval(), example)
    ours = lower(ep, example, "xir", via="backend")
    assert ours.ran, ours.error
    ref = reference(ep, example)
    assert ours.err(ref) <= 1e-5 * peak(ref)
    assert not ours.outside and ours.delegated["aten.bmm"] == 3


def test_bf16_with_enable_bf16_is_computed_in_fp32():
    example = inputs(torch.bfloat16)
    ep = torch.export.export(Products().to(torch.bfloat16).eval(), example)
    ours = lower(ep, example, "xir", enable_bf16=True)
    assert ours.ran, ours.error
    ref = reference(ep, example)
    assert ours.err(ref) <= 0.02 * peak(ref)
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


def test_a_small_product_stays_outside_as_stock_leaves_it():
    """ExecuTorch's add_mul example (2 x 2 matrices): the mm outside, the add inside, stock's program."""
    from executorch.examples.models.toy_model import AddMulModule

    model = AddMulModule()
    example = model.get_example_inputs()
    ep = torch.export.export(model.eval(), example)
    ours, stock = lower(ep, example, "xir"), lower(ep, example, "stock")
    assert ours.ran and stock.ran, (ours.error, stock.error)
    assert ours.err(reference(ep, example)) == 0
    assert ours.outside == stock.outside and ours.outside["aten.mm"] == 1
    assert ours.delegates == stock.delegates == 1 and ours.delegated["aten.add.Tensor"] == 1
    assert "aten.bmm" not in ours.delegated
