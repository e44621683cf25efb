"""Quantized linears lowered for fp32 only, as ExecuTorch's op tests do (test_linear.py's
``test_linear_qs8_as_fp32``, ``test_linear_qc8_as_fp32``, ``test_linear_qd8_as_fp32``:
``_test_linear_overwrite_precision`` with ``XnnpackFloatingPointPartitioner``, i.e.
``config_precisions=FP32``).

Stock's LinearConfig then overwrites the quantized linear's precision to fp32: with
``to_edge_transform_and_lower`` the ``aten.linear`` is delegated reading its dequantized input and
its dequantized weight as run-time fp32 tensors, the Q/DQ left outside (ExecuTorch's quantized
kernels run them); with ``to_edge().to_backend()`` only the ``permute_copy`` of the dequantized
weight is delegated, the addmm/mm stays outside. xir does the same (``capability.fp32_of_dequantized_weight``).
Each case runs on ExecuTorch's runtime and is compared with the converted pt2e module (eager).

With the default precisions, the same programs are still delegated as quantized linears, their
Q/DQ inside the delegate.
"""

from __future__ import annotations

import functools

import pytest
import torch
from executorch.backends.xnnpack.partition.config.xnnpack_config import ConfigPrecisionType

from lowering.fx.quantizer import quantize_pt2e
from xir_tools.harness import lower, max_error, run_pte

FP32 = ConfigPrecisionType.FP32
QUANT_TYPES = ("per_tensor", "per_channel", "per_channel_dynamic")  # qs8, qc8, qd8
SHAPES = ((3, 4, 4), (4, 37, 17))  # (batch, in, out), two of the op test's
OUTSIDE = {  # the Q/DQ of the op test's quant_node_checks (dynamic: with its choose_qparams)
    "per_tensor": {"quantized_decomposed.quantize_per_tensor": 2, "quantized_decomposed.dequantize_per_tensor": 3},
    "per_channel": {
        "quantized_decomposed.quantize_per_tensor": 2,
        "quantized_decomposed.dequantize_per_tensor": 2,
        "quantized_decomposed.dequantize_per_channel": 1,
    },
    "per_channel_dynamic": {
        "quantized_decomposed.choose_qparams.tensor": 1,
        "quantized_decomposed.quantize_per_tensor.tensor": 1,
        "quantized_decomposed.dequantize_per_tensor.tensor": 1,
        "quantized_decomposed.dequantize_per_channel": 1,
    },
}


@functools.lru_cache(maxsize=None)
def _program(quant_type: str, shape: tuple, bias: bool):
    torch.manual_seed(0)
    batch, in_size, out_size = shape
    module = torch.nn.Linear(in_size, out_size, bias=bias).eval()
    inputs = (torch.randn(batch, in_size),)
    converted = quantize_pt2e(
        module, inputs, is_per_channel="per_channel" in quant_type, is_dynamic="dynamic" in quant_type
    )
    return converted, inputs


def _export(quant_type, shape, bias):
    converted, inputs = _program(quant_type, shape, bias)
    return torch.export.export(converted, inputs, strict=True), converted, inputs


def _assert_matches(result, converted, inputs):
    assert result.ran, result.error
    other = (torch.randn_like(inputs[0]) * 3,)
    assert max_error(result.outputs, [converted(*inputs)]) <= 1e-5
    assert max_error(run_pte(result.buffer, other), [converted(*other)]) <= 1e-5


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("quant_type", QUANT_TYPES)
def test_fp32_partitioner_delegates_the_linear_with_its_dequantized_weight(quant_type, shape, bias):
    ep, converted, inputs = _export(quant_type, shape, bias)
    result = lower(ep, inputs, "xir", config_precisions=FP32)
    assert result.delegated == {"aten.linear": 1} and result.delegates == 1
    assert result.outside == OUTSIDE[quant_type]
    _assert_matches(result, converted, inputs)


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
@pytest.mark.parametrize("quant_type", QUANT_TYPES)
def test_fp32_partitioner_on_decomposed_linear_delegates_the_weight_permute_only(quant_type, bias):
    """The legacy path: the addmm/mm (its weight not a constant) stays outside; the transposition
    of the dequantized weight is delegated, as stock does."""
    ep, converted, inputs = _export(quant_type, SHAPES[1], bias)
    result = lower(ep, inputs, "xir", via="backend", config_precisions=FP32)
    assert result.delegated == {"aten.permute_copy": 1} and result.delegates == 1
    assert result.outside == {**OUTSIDE[quant_type], ("aten.addmm" if bias else "aten.mm"): 1}
    _assert_matches(result, converted, inputs)


@pytest.mark.parametrize("quant_type", QUANT_TYPES)
def test_default_precisions_still_delegate_a_quantized_linear(quant_type):
    ep, converted, inputs = _export(quant_type, SHAPES[1], True)
    result = lower(ep, inputs, "xir")
    assert result.delegated.get("aten.linear") == 1 and result.delegates == 1
    assert not any("quantized_decomposed" in op for op in result.outside), result.outside
    assert any("quantized_decomposed" in op for op in result.delegated), result.delegated  # the Q/DQ folded in
    assert result.ran, result.error
    scale = 1e-3 if "dynamic" in quant_type else 1e-3 + float(ep.graph.output_node().args[0][0].args[1])
    assert max_error(result.outputs, [converted(*inputs)]) <= max(scale, 5e-2 if "dynamic" in quant_type else 0)


def test_fp32_with_dynamic_precision_is_not_overwritten():
    """Precision is overwritten to fp32 only when fp32 is the only precision (as stock): with the
    dynamic one too, a statically quantized linear stays outside."""
    ep, converted, inputs = _export("per_tensor", SHAPES[0], True)
    result = lower(ep, inputs, "xir", config_precisions=[FP32, ConfigPrecisionType.DYNAMIC_QUANT])
    assert "aten.linear" not in result.delegated
    assert result.ran and max_error(result.outputs, [converted(*inputs)]) == 0.0
