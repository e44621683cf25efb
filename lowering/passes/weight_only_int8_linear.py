"""``xnnpack.weight-only-int8-linear``: rewrite ExecuTorch's own int8 weight-only linear
(``linear(x, w_int8.to(float32)) * scales``) as a linear with a per-channel dequantized weight,
which XNNPACK runs as an fp32 x int8 (qc8w) fully connected."""

from __future__ import annotations

import math

import attrs

from passes import PatternRewritePass, Rewriter, rewrite_pattern
from xir import DType, Node, TensorType, Value
from xir.ops import aten, family, quantized_decomposed

# the casts an int8 weight is read through: ATen's ``Tensor.to`` (the program ExecuTorch asks
# ``ops_to_not_decompose`` about) and the edge dialect's copies
CASTS = (aten.to.dtype, *family("cast"))  # (aten.to.dtype: the program ops_to_not_decompose plans on)
QMIN, QMAX = -128, 127


def _cast_source(value: Value) -> Value:
    """``value``, or what it is cast from."""
    producer = value.producer
    return producer.input if producer is not None and producer.op in CASTS else value


def _scale_data(value: Value, channels: int):
    """The fp32 scales ``value`` holds, one per output channel, as a 1-D tensor; or the reason it
    does not: a constant (or a cast of one) of shape [N] or [1, ..., 1, N] (a bf16 or f16 one is
    promoted to fp32 by the multiply, exactly), every scale a positive normal number (XNNPACK refuses a channel scale that is zero, negative, subnormal or not finite)."""
    import torch

    source = _cast_source(value)
    if not source.is_constant or source.data is None:
        return "the scales are not a constant"
    shape = value.type.shape
    if not shape or shape[-1] != channels or any(d != 1 for d in shape[:-1]):
        return f"scales of shape {list(shape)}, not one per output channel ({channels})"
    data = source.data.reshape(-1).to(torch.float32)
    if not all(math.isfinite(s) and s > 0 and s >= torch.finfo(torch.float32).tiny for s in data.tolist()):
        return "a scale that is zero, negative, subnormal or not finite (XNNPACK refuses such a channel scale)"
    return data


@rewrite_pattern(aten.mul.Tensor)
def weight_only_int8_linear(node: Node, rewriter: Rewriter) -> bool:
    """mul(linear(x, cast(w)), s) => linear(x, dequantize_per_channel(w, s, 0)) for a constant int8
    weight ``w`` [N, K] cast to fp32, an fp32 ``x`` and fp32 scales ``s`` one per output channel:
    ``(x @ w.T) * s == x @ (w * s[:, None]).T`` up to rounding (what ExecuTorch's
    ``WeightOnlyInt8Linear``, the LLM flow's ``qmode int8``, computes). XNNPACK's fully connected
    runs an fp32 input with an int8 per-channel weight; the fp32 weight never exists."""
    import torch

    if len(node.operands) != 2:
        return rewriter.notify_match_failure(node, "a multiply by a Python scalar")
    for index in (0, 1):
        linear_out, scales = node.operands[index], node.operands[1 - index]
        linear = linear_out.producer
        if linear is not None and linear.op == aten.linear:
            break
    else:
        return rewriter.notify_match_failure(node, "no operand is a linear's result")
    if linear.operand("bias") is not None:
        return rewriter.notify_match_failure(node, "the linear has a bias (the scales would apply to it too)")
    if linear_out.users != [node] or any(u.is_return for u in linear_out.users):
        return rewriter.notify_match_failure(node, "the linear's result has other readers")
    if linear.input.dtype is not DType.f32 or node.result.type != linear_out.type:
        return rewriter.notify_match_failure(node, "not an fp32 linear scaled per output channel")
    cast = linear.weight.producer
    if cast is None or cast.op not in CASTS or linear.weight.dtype is not DType.f32:
        return rewriter.notify_match_failure(node, "the linear's weight is not a cast to fp32")
    weight = cast.input
    if not weight.is_constant or weight.dtype is not DType.i8 or weight.rank != 2 or not weight.type.is_static:
        return rewriter.notify_match_failure(node, "the cast weight is not a 2-D int8 constant")
    channels = weight.type.shape[0]
    data = _scale_data(scales, channels)
    if isinstance(data, str):
        return rewriter.notify_match_failure(node, data)
    scale = rewriter.add_constant("weight_scales", TensorType(DType.f32, (channels,)), data.clone())
    zero = rewriter.add_constant(
        "weight_zero_points", TensorType(DType.i64, (channels,)), torch.zeros(channels, dtype=torch.int64)
    )
    dequantized = rewriter.op_before(
        linear,
        quantized_decomposed.dequantize_per_channel,
        [weight, scale, zero],
        axis=0,
        quant_min=QMIN,
        quant_max=QMAX,
        dtype=DType.i8,
    )
    rewriter.set_operand(linear, 1, dequantized)
    rewriter.replace_node(node, [linear_out])
    return True


@attrs.frozen
class WeightOnlyInt8Linear(PatternRewritePass):
    """Rewrite ExecuTorch's int8 weight-only linear (``linear(x, w.to(float32)) * scales``, the LLM
    flow's ``qmode int8``) as a linear with a per-channel dequantized int8 weight, which XNNPACK runs
    (fp32 x qc8w). Before fold-constants, which would write the cast weight as fp32 (4x the bytes)."""

    name = "xnnpack.weight-only-int8-linear"
    # fold-constants would write the cast weight as an fp32 constant (4x the bytes)
    runs_before = ("fold-constants",)
    # ops_to_not_decompose runs it on its own import before planning, so to_edge keeps the linear whole
    runs_for_planning = True

    rules = (weight_only_int8_linear,)
