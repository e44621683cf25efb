"""ExecuTorch's own int8 weight-only linear (the LLM flow's ``qmode int8``:
``examples/models/llama/source_transformation/quantize.py``, ``WeightOnlyInt8Linear``), lowered,
serialized, run on ExecuTorch's runtime and compared with the quantized module run eagerly.

Its forward is ``linear(x, weight_int8.to(x.dtype)) * scales``. Stock leaves the cast weight's
matmul outside (the weight is not a constant) and the flow's ``to_executorch`` then fails in
XNNPACK's ConvertToLinearPass. xir's ``xnnpack.weight-only-int8-linear`` rewrites it as
``linear(x, dequantize_per_channel(weight_int8, scales, 0))``, which XNNPACK runs as an fp32 x
qc8w fully connected: the weight stays int8 in the program (no fp32 copy, no cast at run time).
Where the rewrite does not apply (the linear's result also read unscaled, scales computed at run
time, a zero scale XNNPACK would refuse), the program still runs and matches eager.
"""

from __future__ import annotations

import torch

from xir_tools.harness import lower

IN, OUT = 64, 32
DQ = "quantized_decomposed.dequantize_per_channel"


def _int8(module: torch.nn.Module, zero_row: bool = False) -> torch.nn.Module:
    from executorch.examples.models.llama.source_transformation.quantize import WeightOnlyInt8QuantHandler

    torch.manual_seed(0)
    if zero_row:
        module.first.weight.data[3] = 0.0
    return WeightOnlyInt8QuantHandler(module.eval(), precision=torch.float32).quantized_model()


class TwoLinears(torch.nn.Module):
    """Two int8 weight-only linears with a ReLU between them."""

    def __init__(self):
        super().__init__()
        self.first = torch.nn.Linear(IN, OUT, bias=False)
        self.second = torch.nn.Linear(OUT, 16, bias=False)

    def forward(self, x):
        return self.second(torch.relu(self.first(x)))


class UnscaledAlsoReturned(torch.nn.Module):
    """The linear's result is returned before its scaling too: the rewrite would change that output."""

    def __init__(self):
        super().__init__()
        self.first = torch.nn.Linear(IN, OUT, bias=False)

    def forward(self, x):
        unscaled = torch.nn.functional.linear(x, self.first.weight.to(x.dtype))
        return unscaled * self.first.scales, unscaled


class SharedWeight(torch.nn.Module):
    """One int8 linear applied to two inputs (its weight and scales read twice)."""

    def __init__(self):
        super().__init__()
        self.first = torch.nn.Linear(IN, OUT, bias=False)

    def forward(self, x):
        return self.first(x) + self.first(2 * x)


class ScalesFromInput(torch.nn.Module):
    """The scales are computed at run time (not a constant): not a per-channel weight."""

    def __init__(self):
        super().__init__()
        self.first = torch.nn.Linear(IN, OUT, bias=False)

    def forward(self, x, s):
        return torch.nn.functional.linear(x, self.first.weight.to(x.dtype)) * s


def _run(model, inputs, dynamic=None):
    ep = torch.export.export(model, inputs, dynamic_shapes=dynamic)
    result = lower(ep, inputs, "xir")
    assert result.ran, result.error
    with torch.no_grad():
        expected = model(*inputs)
    expected = expected if isinstance(expected, tuple) else (expected,)
    for got, want in zip(result.outputs, expected):
        assert (got - want).abs().max().item() < 1e-4 * max(1.0, want.abs().max().item())
    return result, ep


def test_int8_linears_in_one_delegate_at_every_length():
    """A dynamic row count (the flow's sequence length): one program, run at 1, 7 and 100 rows."""
    model = _int8(TwoLinears())
    seq = torch.export.Dim("seq", max=128)
    result, ep = _run(model, (torch.randn(1, 7, IN),), ({1: seq},))
    assert result.delegates == 1 and not result.outside, dict(result.outside)
    assert result.delegated["aten.linear"] == 2 and result.delegated[DQ] == 2
    assert "aten.mul.Tensor" not in result.delegated  # the scales are in the weight's dequantize
    from xir_tools.harness import run_pte

    for rows in (1, 100):
        x = torch.randn(1, rows, IN)
        (got,) = run_pte(result.buffer, (x,))
        assert (got - model(x)).abs().max().item() < 1e-4
    # the weights stay int8 in the program: well under the fp32 weights' bytes
    assert len(result.buffer) < (IN * OUT + OUT * 16) * 4


def test_two_dimensional_input():
    result, _ = _run(_int8(TwoLinears()), (torch.randn(5, IN),))
    assert result.delegates == 1 and result.delegated[DQ] == 2 and not result.outside


def test_weight_read_twice():
    result, _ = _run(_int8(SharedWeight()), (torch.randn(3, IN),))
    assert result.delegated["aten.linear"] == 2 and result.delegated[DQ] == 2
    assert not result.outside, dict(result.outside)


def test_unscaled_result_also_returned_is_not_rewritten():
    result, _ = _run(_int8(UnscaledAlsoReturned()), (torch.randn(3, IN),))
    assert DQ not in result.delegated  # the linear's own result is an output: computed as written


def test_scales_computed_at_run_time_are_not_rewritten():
    model = _int8(ScalesFromInput())
    result, _ = _run(model, (torch.randn(3, IN), torch.rand(OUT) + 0.5))
    assert DQ not in result.delegated


def test_zero_scale_is_not_rewritten():
    """A weight row of zeros: the flow's quantizer clamps its scale to a positive eps, so it is
    rewritten. A scale of exactly zero (XNNPACK refuses it) is declined, and the program computes
    the cast and the multiply as written. (to_edge then decomposes every linear of the program,
    since ExecuTorch keeps an op whole for all its nodes or none, so neither is rewritten.)"""
    model = _int8(TwoLinears(), zero_row=True)
    result, _ = _run(model, (torch.randn(3, IN),))
    assert result.delegated[DQ] == 2  # clamped to a positive eps by the flow's quantizer
    model.first.scales.data[3] = 0.0
    result, _ = _run(model, (torch.randn(3, IN),))
    assert DQ not in result.delegated and "aten.linear" not in result.delegated
