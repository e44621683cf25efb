"""A 1x1 conv on a one-channel channels-last graph input (ExecuTorch issue #19153).

``[N, 1, H, W]`` in channels-last has the strides ``(HW, 1, W, 1)``, which ExecuTorch writes as
the dim order (0, 2, 1, 3): the program then failed at its first run with both partitioners
("Propagating input shapes failed"), and on portable kernels (0x12). xir declares such values
contiguous (``lowering/fx/dim_orders.py``): the same bytes."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from xir_tools.harness import load_method, lower, reference, run_method


class Conv(nn.Module):
    def __init__(self, out_channels):
        super().__init__()
        self.conv = nn.Conv2d(1, out_channels, 1)

    def forward(self, x):
        y = self.conv(x)
        return y, torch.relu(y) * 2  # the conv's result both a graph output and read inside


@pytest.mark.parametrize("out_channels", [4, 1])
def test_a_1x1_conv_on_a_one_channel_channels_last_input_runs_in_xnnpack(out_channels):
    torch.manual_seed(0)
    x = torch.randn(1, 1, 8, 8).to(memory_format=torch.channels_last)
    module = Conv(out_channels).eval()
    ep = torch.export.export(module, (x,))
    expected = reference(ep, (x,))
    stock = lower(ep, (x,), "stock")
    assert stock.outputs is None, "stock runs it now: ExecuTorch fixed #19153"
    ours = lower(ep, (x,), "xir")
    assert ours.outputs is not None, ours.error
    assert ours.delegates == 1 and not ours.outside, (ours.delegated, ours.outside)
    assert ours.delegated["aten.convolution"] == 1 and ours.delegated["aten.relu"] == 1
    assert ours.err(expected) <= 1e-5
    _, method = load_method(ours.buffer)
    for layout in (torch.channels_last, torch.contiguous_format):  # the same bytes: either runs
        x = torch.randn(1, 1, 8, 8).to(memory_format=layout)
        got = run_method(method, [x])
        want = module(x)
        assert all((g - w).abs().max().item() <= 1e-5 for g, w in zip(got, want))


def test_a_one_channel_channels_last_input_runs_on_portable_kernels():
    """Nothing delegated (per_op_mode aside, an op XNNPACK refuses): the portable add of the input."""
    from executorch.exir import to_edge

    from lowering.fx.dim_orders import contiguous_dim_orders_pass
    from xir_tools.harness import run_pte, to_buffer

    class Add(nn.Module):
        def forward(self, x):
            return x + 1, x * x

    x = torch.randn(1, 1, 8, 8).to(memory_format=torch.channels_last)
    ep = torch.export.export(Add(), (x,))
    edge = to_edge(ep).transform([contiguous_dim_orders_pass()])
    got = run_pte(to_buffer(edge), [x])
    assert (got[0] - (x + 1)).abs().max().item() == 0 and (got[1] - x * x).abs().max().item() == 0
