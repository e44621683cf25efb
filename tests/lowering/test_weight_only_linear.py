"""torchao int8 weight-only linears (issue 14): ``IntxWeightOnlyConfig(weight_dtype=torch.int8,
granularity=PerAxis(0), intx_choose_qparams_algorithm="hqq_scale_only")``, ExecuTorch's "8w"
(extension/llm/export/quantize.py), lowered, serialized, run on ExecuTorch's runtime and compared
with the quantized model run eagerly.

The exported program reads ``linear(x, torchao.dequantize_affine(int8 weight, scale, zero point))``.
XNNPACK runs that as a fully connected with an fp32 input and a per-channel int8 (qc8w) filter (the
weight's dequantize folded into it; measured within 1e-6 of eager), provided ExecuTorch's
serializer sees ``aten.linear`` itself (xir keeps it from decomposition) and no bias (its serializer
quantizes the bias of a linear whose weight is quantized and refuses it with an fp32 input: xir's
``xnnpack.weight-only-linear-bias`` adds the bias after the linear).

Stock delegates the decomposed ``dequantize_affine -> permute -> addmm``, and XNNPACK's
ConvertToLinearPass rebuilds the linear by walking from the addmm's weight back to the placeholder,
through the dequantize: the linear gets the raw int8 weight, its scales dropped, and the result is
off by ~1000x (equal to ``x @ int8_weight.T + bias``). The torchao dequantize has no ExecuTorch
kernel, so a weight-only linear that cannot be delegated is ``NotLowerable``, never a program that
fails in ``to_executorch``.
"""

from __future__ import annotations

import pytest
import torch

from lowering.partition import NotLowerable
from xir_tools.harness import lower

IN, OUT = 64, 32


def _weight_only(model: torch.nn.Module) -> torch.nn.Module:
    from torchao.quantization import IntxWeightOnlyConfig, quantize_
    from torchao.quantization.granularity import PerAxis

    quantize_(
        model,
        IntxWeightOnlyConfig(
            weight_dtype=torch.int8, granularity=PerAxis(0), intx_choose_qparams_algorithm="hqq_scale_only"
        ),
    )
    return model


def _linear(bias: bool) -> torch.nn.Module:
    torch.manual_seed(0)
    return _weight_only(torch.nn.Sequential(torch.nn.Linear(IN, OUT, bias=bias)).eval())


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
@pytest.mark.parametrize("shape", [(1, IN), (5, IN), (2, 3, IN)], ids=["1-row", "5-rows", "3-D"])
def test_weight_only_linear_is_a_qc8w_fully_connected(bias, shape):
    model = _linear(bias)
    x = torch.randn(*shape)
    ep = torch.export.export(model, (x,))
    result = lower(ep, (x,), "xir")
    assert result.ran, result.error
    assert (result.outputs[0] - model(x)).abs().max().item() < 1e-5
    assert result.delegates == 1
    assert result.delegated["aten.linear"] == 1 and result.delegated["torchao.dequantize_affine"] == 1
    assert result.delegated["aten.add.Tensor"] == (1 if bias else 0)  # the bias, added after the linear
    assert not result.outside, dict(result.outside)


def test_stock_drops_the_weight_scales():
    """Stock's program runs and is wrong: it computes with the int8 values as weights."""
    model = _linear(True)
    x = torch.randn(4, IN)
    ep = torch.export.export(model, (x,))
    stock = lower(ep, (x,), "stock")
    assert stock.ran, stock.error
    assert (stock.outputs[0] - model(x)).abs().max().item() > 100
    w = model[0].weight
    unscaled = x @ w.qdata.float().T + model[0].bias
    assert (stock.outputs[0] - unscaled).abs().max().item() < 1e-2


@pytest.mark.parametrize("via", ["backend", "bare"])
def test_not_lowerable_without_xir_s_rewrites(via):
    """``to_edge().to_backend()`` decomposes the linear (XNNPACK would rebuild it without its scales);
    ExecuTorch's own ``to_edge_transform_and_lower`` without xir's transform passes leaves the bias
    on the linear. Either way the dequantize could run nowhere: NotLowerable, naming the linear."""
    model = _linear(True)
    x = torch.randn(4, IN)
    ep = torch.export.export(model, (x,))
    result = lower(ep, (x,), "xir", via=via)
    assert result.error is not None and result.error.startswith(NotLowerable.__name__), result.error
    assert "aten." in result.error or "XNNPACK cannot run" in result.error


def test_int4_weight_only_is_not_lowerable():
    """int4 weight-only ("4w", groups of 32): not a form XNNPACK takes with an fp32 input here (xir
    runs int8 weights per channel only); NotLowerable rather than a crash in to_executorch."""
    from torchao.quantization import IntxWeightOnlyConfig, quantize_
    from torchao.quantization.granularity import PerGroup

    import lowering

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(IN, OUT)).eval()
    quantize_(model, IntxWeightOnlyConfig(weight_dtype=torch.int4, granularity=PerGroup(32)))
    ep = torch.export.export(model, (torch.randn(4, IN),))
    with pytest.raises(NotLowerable, match="int8 weight-only linear: an int4 or group-wise weight"):
        lowering.to_edge_transform_and_lower(ep, partitioner=[lowering.XnnpackPartitioner()])
