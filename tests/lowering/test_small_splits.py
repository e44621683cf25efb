"""A small split of several rows stays on ExecuTorch's portable split (``xnnpack.split-as-slices``
declines it: its slices would each wake XNNPACK's threads for a copy of a few elements); a larger
one runs in XNNPACK as slices. End to end on the LSTM ExecuTorch's examples use
(``torch.nn.quantizable.LSTM``), whose gates are split four ways at each step: both programs match
eager, and nothing but the splits (and the selects at the delegates' edge) is left outside."""

from __future__ import annotations

import pytest
import torch
from torch.nn.quantizable.modules import rnn

from xir_tools import harness

STEPS, BATCH = 3, 2


def lowered(hidden: int, which: str):
    torch.manual_seed(0)
    model = rnn.LSTM(4, hidden, 1).eval()
    inputs = (torch.randn(STEPS, BATCH, 4), (torch.randn(1, BATCH, hidden), torch.randn(1, BATCH, hidden)))
    ep = torch.export.export(model, inputs, strict=False)
    with torch.no_grad():
        expected = torch.utils._pytree.tree_leaves(model(*inputs))
    return harness.lower(ep, harness.as_list(torch.utils._pytree.tree_leaves(inputs)), which), expected


@pytest.fixture(scope="module")
def small():
    """Gates of [2, 32] (64 elements in 2 rows), split at each of 3 steps."""
    return {which: lowered(8, which) for which in ("xir", "stock")}


def test_the_small_gate_splits_stay_on_executorchs_split_and_the_rest_is_delegated(small):
    ours, expected = small["xir"]
    assert ours.err(expected) < 1e-5
    # (the selects of x at each step, h0 and c0 at the delegates' edge: select-at-the-edge)
    assert dict(ours.kernels) == {"aten.split_with_sizes_copy": STEPS, "aten.slice_copy.Tensor": STEPS + 2}
    assert ours.delegated["aten.sigmoid"] == 3 * STEPS and ours.delegated["aten.tanh"] == 2 * STEPS


def test_the_small_splits_leave_no_more_delegates_or_ops_outside_than_stock(small):
    (ours, expected), (stock, _) = small["xir"], small["stock"]
    assert stock.err(expected) < 1e-5
    assert ours.delegates <= stock.delegates
    assert harness.compute_count(ours.kernels) <= harness.compute_count(stock.kernels)


def test_gates_past_the_small_split_run_as_slices_in_one_delegate():
    """Gates of [2, 160] (320 elements): the slices run in XNNPACK, and the LSTM is one delegate."""
    ours, expected = lowered(40, "xir")
    assert ours.err(expected) < 1e-5
    assert ours.delegates == 1 and dict(ours.kernels) == {"aten.slice_copy.Tensor": STEPS + 2}
    assert ours.delegated["aten.slice_copy.Tensor"] == 4 * STEPS, ours.partitioner.report()
