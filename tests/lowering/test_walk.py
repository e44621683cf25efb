"""xir_tools.walk: the first op where a lowered program departs from its reference."""

from __future__ import annotations

import torch
from torch import nn

from lowering.fx.quantizer import quantize_pt2e
from xir_tools.examples import ConvOnly, quantize_module
from xir_tools.walk import walk


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.expand, self.project = nn.Conv2d(8, 16, 1), nn.Conv2d(16, 8, 1)

    def forward(self, x):
        h = nn.functional.relu6(self.stem(x))
        return h + self.project(nn.functional.relu6(self.expand(h)))


def test_a_quantized_block_walks_within_a_few_steps_with_both_partitioners():
    torch.manual_seed(0)
    inputs = (torch.randn(1, 3, 8, 8),)
    result = walk(quantize_pt2e(Block().eval(), inputs, is_per_channel=True), inputs)
    ops = [step.op for step in result.steps]
    assert ops == ["input", "conv2d", "relu6", "conv2d", "relu6", "conv2d", "add"], ops
    for which in ("xir", "stock"):
        assert not result.failures, result.failures
        assert result.departs(which) is None, result.table()
        assert all(step.errors[which] <= 2.01 * step.scale for step in result.steps), result.table()
    assert "first departure over 0.05 of peak (and 2 steps): none" in result.table()


def test_stock_s_quantized_conv_with_a_float_output_departs_at_the_conv():
    """Stock folds the conv's input Q/DQ into a conv it then leaves in float (README: the demo's
    quantized-conv): the walk names that conv; xir's program does not depart."""
    torch.manual_seed(0)
    inputs = (torch.randn(1, 3, 8, 8),)
    result = walk(quantize_module(ConvOnly().eval(), inputs, float_output=True), inputs)
    assert [step.op for step in result.steps] == ["input", "conv2d"]
    assert result.departs("xir") is None, result.table()
    assert result.departs("stock") == 1 and result.steps[1].relative("stock") > 0.5, result.table()
    assert result.steps[1].relative("xir") < 0.01


def test_xir_walk_prints_the_table(tmp_path, capsys):
    from xir_tools.cli import main

    torch.manual_seed(0)
    path = tmp_path / "block.pt2"
    torch.export.save(torch.export.export(Block().eval(), (torch.randn(1, 3, 8, 8),)), path)
    assert main(["walk", str(path), "--quantize", "static", "--limit", "3"]) == 0
    out = capsys.readouterr().out
    rows = [line.split() for line in out.splitlines() if line[:1].isdigit()]
    assert [row[2] for row in rows] == ["input", "conv2d", "relu6"], out
    assert "xir: first departure over 0.05 of peak (and 2 steps): none" in out
    assert "stock: first departure" in out
