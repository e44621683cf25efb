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
        a = s / 2.0 / 3.0  # a chain of two promoted ops: bf16 in eager
        b = s.float() + 2.0  # the user's own cast: fp32 in eager too
        c = s * torch.tensor(2.0)  # a 0-D fp32 tensor the user wrote: fp32 in eager too
        d = torch.relu(z * (s - 0.5))  # read on by a bf16 tensor op, inside the delegate
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
    assert (
        [t.dtype for t in outputs]
        == [t.dtype for t in eager]
        == [torch.bfloat16, torch.float32, torch.float32, torch.bfloat16]
    )
    for ours, theirs in zip(outputs, eager):
        assert torch.equal(ours, theirs)


def test_stocks_program_returns_fp32(case):
    """What the pass repairs: ExecuTorch's to_edge (stock's lowering) returns the chain in fp32."""
    ep, inputs, eager = case
    edge, _ = harness.lower_edge(ep, "stock", "etal", enable_bf16=True)
    outputs = harness.run_method(harness.load_method(harness.to_buffer(edge))[1], inputs)
    assert outputs[0].dtype == torch.float32 and eager[0].dtype == torch.bfloat16


class Numbers(torch.nn.Module):
    def forward(self, x):
        a = x * 1.7  # a number bf16 cannot hold: eager multiplies by it in fp32
        b = (x / 3.3 + 0.1) * x  # eager divides by 3.3 itself but adds 0.1 rounded to bf16, as
        # ExecuTorch's cast does; each result read on inside the delegate
        c = x * 0.5  # a bf16 number: the cast rounded nothing, nothing to repair
        d = a * x + a  # the repaired product is a graph output and has several readers
        return a, b, c, d


@pytest.fixture(scope="module")
def numbers():
    x = (torch.randn(4, 64, generator=torch.Generator().manual_seed(1)) * 3).to(torch.bfloat16)
    return torch.export.export(Numbers(), (x,)), [x], Numbers()(x)


@pytest.mark.parametrize("via", ["etal", "backend"])
def test_a_python_number_in_a_bf16_op_is_not_rounded_first(numbers, via):
    """Eager computes ``x * 1.7`` and ``x / 3.3`` (x bf16, rank >= 1) in fp32 with the number itself
    and rounds once; ExecuTorch's to_edge casts the number to bf16 first (1.703125), which changes a
    third of the products (stock's program: asserted below). xir computes those ops in fp32 on the
    number (and leaves ``+ 0.1``, whose number eager rounds too): every element eager's, everything
    in one delegate."""
    ep, inputs, eager = numbers
    edge, partitioner = harness.lower_edge(ep, "xir", via, enable_bf16=True)
    assert "xnnpack.eager-scalar-promotion" in partitioner.rewrites_applied
    assert harness.delegate_count(edge) == 1 and not harness.outside_ops(edge), harness.outside_ops(edge)
    outputs = harness.run_method(harness.load_method(harness.to_buffer(edge))[1], inputs)
    for ours, theirs in zip(outputs, eager):
        assert ours.dtype == torch.bfloat16 and torch.equal(ours, theirs)


def test_stock_rounds_the_number_first(numbers):
    ep, inputs, eager = numbers
    edge, _ = harness.lower_edge(ep, "stock", "etal", enable_bf16=True)
    outputs = harness.run_method(harness.load_method(harness.to_buffer(edge))[1], inputs)
    x = inputs[0]
    assert torch.equal(outputs[0], x * torch.tensor(1.7).to(torch.bfloat16))
    assert int((outputs[0] != eager[0]).sum()) > x.numel() // 10


class TwoScalars(torch.nn.Module):
    def forward(self, x, z):
        s = x @ x  # a dot product: a 0-D bf16 tensor
        a = s + 0.25 * s  # the product is rounded, then the sum of two bf16 scalars
        b = s * 0.5 + s * 0.75  # two rounded products: fp32 in the edge program, bf16 in eager
        c = torch.relu(z * a)  # the rounded sum read on by a bf16 tensor op
        d = torch.exp(b * 0.1)  # an elementwise op of a rounded value: bf16 in eager too
        return a, b, c, d


@pytest.mark.parametrize("via", ["etal", "backend"])
def test_two_bf16_scalars_combined_keep_eagers_dtype_and_value(via):
    """Fuzz bf16 97001 (``exp(x @ x + 0.25 * (x @ x))``, x 1-D): to_edge leaves the sum of two 0-D
    bf16 values, and an op of it, fp32, in stock's program too (asserted); xir rounds them where
    eager does."""
    x = torch.randn(14, generator=torch.Generator().manual_seed(9700190)).to(torch.bfloat16)
    z = torch.randn(2, 3, generator=torch.Generator().manual_seed(3)).to(torch.bfloat16)
    ep, eager = torch.export.export(TwoScalars(), (x, z)), TwoScalars()(x, z)
    edge, partitioner = harness.lower_edge(ep, "xir", via, enable_bf16=True)
    assert "xnnpack.eager-scalar-promotion" in partitioner.rewrites_applied
    assert harness.delegated_ops(edge)["aten.relu"] == 1
    outputs = harness.run_method(harness.load_method(harness.to_buffer(edge))[1], [x, z])
    assert [t.dtype for t in outputs] == [t.dtype for t in eager] == [torch.bfloat16] * 4
    for ours, theirs in zip(outputs, eager):
        assert torch.equal(ours, theirs), (ours, theirs)
    if via == "etal":
        stock, _ = harness.lower_edge(ep, "stock", "etal", enable_bf16=True)
        theirs = harness.run_method(harness.load_method(harness.to_buffer(stock))[1], [x, z])
        assert theirs[0].dtype == theirs[1].dtype == theirs[3].dtype == torch.float32
