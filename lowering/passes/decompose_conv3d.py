"""xnnpack.decompose-conv3d: a 3-D convolution as a sum of 2-D convolutions, which XNNPACK runs.

XNNPACK (and ExecuTorch 1.5.1's portable kernels) have no 3-D convolution. With depth folded
into the batch, each depth tap ``k`` of the kernel is a 2-D convolution over all frames; its
output frames, sliced to the output depths that tap contributes to, are summed:

    x (N,C,D,H,W) -> [pad depth] -> permute (N,D',C,H,W) -> view (N*D',C,H,W)
    y_k = conv2d(x', w[:, :, k])            (bias only on k = 0)
    s_k = view (N,D',O,Ho,Wo) -> slice dim 1 [k*dD : k*dD + (Do-1)*sD + 1 : sD]
    out = permute(s_0 + s_1 + ..., (0,2,1,3,4))

A weight behind a dequantize (a quantized Conv3d) is dequantized here, once, into float
slices: the computation is the one the quantized reference does in float.
"""

from __future__ import annotations

import attrs

from passes.data import CAST_METHODS, cast_data
from passes.rewriter import PatternRewritePass, Rewriter, rewrite_pattern
from xir import DType, Node, TensorType, Value
from xir.ops import aten, quantized_decomposed

DEQUANTIZE_WEIGHT_OPS = (quantized_decomposed.dequantize_per_tensor, quantized_decomposed.dequantize_per_channel)


def _float_weight(weight: Value):
    """The float data of a constant weight, or of a dequantized constant; None otherwise."""
    if weight.is_constant and weight.data is not None and weight.dtype in CAST_METHODS:
        return weight.data
    producer = weight.producer
    if producer is None or producer.op not in DEQUANTIZE_WEIGHT_OPS or not producer.input.is_constant:
        return None
    raw = producer.input.data
    if raw is None:
        return None
    if producer.op.endswith("per_tensor"):
        return (raw.float() - producer.attribute("zero_point")) * producer.attribute("scale")
    scales, zeros = producer.scales.data, producer.zero_points.data if producer.zero_points is not None else None
    if scales is None or zeros is None:
        return None
    axis = producer.attribute("axis")
    shape = [1] * raw.dim()
    shape[axis] = -1
    return (raw.float() - zeros.reshape(shape).float()) * scales.reshape(shape).float()


def _out_size(size: int, kernel: int, stride: int, padding: int, dilation: int) -> int:
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


@rewrite_pattern(aten.convolution)
def decompose_conv3d(conv: Node, rewriter: Rewriter) -> bool:
    """3-D convolution with a constant (or dequantized constant) weight => 2-D convolutions summed."""
    x, weight, bias = conv.input, conv.weight, conv.bias
    if weight.rank != 5:
        return rewriter.notify_match_failure(conv, f"not a 3-D convolution ({weight.rank}-D weight)")
    if conv.attribute("transposed"):
        return rewriter.notify_match_failure(conv, "transposed")
    if not x.type.is_static:
        return rewriter.notify_match_failure(conv, "symbolic input shape")
    stride, padding, dilation = conv.attribute("stride"), conv.attribute("padding"), conv.attribute("dilation")
    if (
        not all(isinstance(v, int) for v in list(stride) + list(padding) + list(dilation))
        or not len(stride) == len(padding) == len(dilation) == 3
    ):
        return rewriter.notify_match_failure(conv, "stride, padding or dilation is not three static ints")
    data = _float_weight(weight)
    if data is None:
        return rewriter.notify_match_failure(conv, "weight is not a constant (or a dequantized constant) with data")
    if bias is not None and not bias.is_constant:
        return rewriter.notify_match_failure(conv, "bias is not a constant")
    # matched completely: edit
    tap_dtype = weight.dtype if weight.is_constant else DType.f32  # a dequantized weight is f32
    n, c, d, h, w = x.shape
    o, _, kd, kh, kw = weight.shape
    sd, sh, sw = stride
    pd, ph, pw = padding
    dd, dh, dw = dilation
    do = _out_size(d, kd, sd, pd, dd)

    def add(op, operands, attributes):
        return rewriter.insert_before(conv, rewriter.create(op, operands, attributes=attributes)).result

    frames, depth = x, d
    if pd:
        depth = d + 2 * pd
        frames = add(aten.constant_pad_nd, [frames], {"pad": [0, 0, 0, 0, pd, pd], "value": 0.0})
    frames = add(aten.permute_copy, [frames], {"dims": [0, 2, 1, 3, 4]})
    frames = add(aten.view_copy, [frames], {"size": [n * depth, c, h, w]})
    total = None
    base = weight.name or "conv3d_weight"
    for k in range(kd):
        tap = cast_data(data[:, :, k], tap_dtype)
        slice_weight = rewriter.add_constant(f"{base}_tap{k}", TensorType(tap_dtype, tuple(tap.shape)), tap)
        operands = [frames, slice_weight] + ([bias] if bias is not None and k == 0 else [])
        attributes = {
            "stride": [sh, sw],
            "padding": [ph, pw],
            "dilation": [dh, dw],
            "transposed": False,
            "output_padding": [0, 0],
            "groups": conv.attribute("groups"),
        }
        y = add(aten.convolution, operands, attributes)
        y = add(aten.view_copy, [y], {"size": [n, depth, *y.shape[1:]]})
        start = k * dd
        y = add(aten.slice_copy.Tensor, [y], {"dim": 1, "start": start, "end": start + (do - 1) * sd + 1, "step": sd})
        total = y if total is None else add(aten.add.Tensor, [total, y], {})
    out = add(aten.permute_copy, [total], {"dims": [0, 2, 1, 3, 4]})
    rewriter.replace_node(conv, [out])
    return True


@attrs.frozen
class DecomposeConv3d(PatternRewritePass):
    """Rewrite 3-D convolutions with constant weights as sums of 2-D convolutions."""

    name = "xnnpack.decompose-conv3d"

    rules = (decompose_conv3d,)
