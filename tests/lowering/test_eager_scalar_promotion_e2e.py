"""End to end: a 0-D bf16 tensor combined with a Python number keeps eager's dtype and value with
xir (``xnnpack.eager-scalar-promotion``), where ExecuTorch's to_edge makes it fp32 (stock's
program returns fp32). Lowered through to_edge_transform_and_lower and through to_edge().to_backend
(xir's transform passes first), run on the runtime and compared with eager to the bit."""

from __future__ import annotations

import pytest
import torch

from xir_tools import harness


class Scalars(torch.nn.Module):
    def forward(self, x, z):
        s = x.sum()
        a = s / 2.0 / 3.0                # a chain of two promoted ops: bf16 in eager
        b = s.float() + 2.0              # the user's own cast: fp32 in eager too
        c = s * torch.tensor(2.0)        # a 0-D fp32 tensor the user wrote: fp32 in eager too
        d = torch.relu(z * (s - 0.5))    # read on by a bf16 tensor op, inside the delegate
        return a, b, c, d


@pytest.fixture(scope="module")
def case():
    torch.manual_seed(0)
    x, z = torch.randn(3, 4).to(torch.bfloat16), torch.randn(2, 3).to(torch.bfloat16)
    ep = torch.export.export(Scalars(), (x, z))
    return ep, [x, z], Scalars()(x, z)


@pytest.mark.parametrize("via", ["etal", "backend"])
def test_xir_keeps_eagers_dtype_and_value(case, via):
    ep, inputs, eager = case
    edge, partitioner = harness.lower_edge(ep, "xir", via, enable_bf16=True)
    assert "xnnpack.eager-scalar-promotion" in partitioner.rewrites_applied
    inside = harness.delegated_ops(edge)
    assert inside["aten.relu"] == 1 and inside["aten.mul.Tensor"] == 2 and inside["aten.div.Tensor"] == 2
    # (outside: the sum, and the casts: the rounding's, and the promotion's, 0-D, which XNNPACK converts only from 1-D)
    assert set(harness.outside_ops(edge)) == {"aten.sum.dim_IntList", "dim_order_ops._to_dim_order_copy"}
    outputs = harness.run_method(harness.load_method(harness.to_buffer(edge))[1], inputs)
    assert [t.dtype for t in outputs] == [t.dtype for t in eager] == [torch.bfloat16, torch.float32, torch.float32,
                                                                     torch.bfloat16]
    for ours, theirs in zip(outputs, eager):
        assert torch.equal(ours, theirs)


def test_stocks_program_returns_fp32(case):
    """What the pass repairs: ExecuTorch's to_edge (stock's lowering) returns the chain in fp32."""
    ep, inputs, eager = case
    edge, _ = harness.lower_edge(ep, "stock", "etal", enable_bf16=True)
    outputs = harness.run_method(harness.load_method(harness.to_buffer(edge))[1], inputs)
    assert outputs[0].dtype == torch.float32 and eager[0].dtype == torch.bfloat16
