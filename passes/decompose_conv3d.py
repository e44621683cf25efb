"""decompose-conv3d: a 3-D convolution as a sum of 2-D convolutions, which XNNPACK runs.

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

from xir import DType, Graph, InputKind, Node, TensorType, Value

from .pass_base import function_pass

DEQUANTIZE_WEIGHT_OPS = ("quantized_decomposed.dequantize_per_tensor", "quantized_decomposed.dequantize_per_channel")


def _float_weight(weight: Value):
    """The float data of a constant weight, or of a dequantized constant; None otherwise."""
    if weight.is_constant and weight.data is not None and weight.dtype is DType.f32:
        return weight.data
    producer = weight.producer
    if producer is None or producer.op not in DEQUANTIZE_WEIGHT_OPS or not producer.operands[0].is_constant:
        return None
    raw = producer.operands[0].data
    if raw is None:
        return None
    if producer.op.endswith("per_tensor"):
        return (raw.float() - producer.attributes["zero_point"]) * producer.attributes["scale"]
    scales, zeros = producer.operands[1].data, producer.operands[2].data
    if scales is None or zeros is None:
        return None
    axis = producer.attributes.get("axis", 0)
    shape = [1] * raw.dim()
    shape[axis] = -1
    return (raw.float() - zeros.reshape(shape).float()) * scales.reshape(shape).float()


def _out_size(size: int, kernel: int, stride: int, padding: int, dilation: int) -> int:
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


def _decompose(graph: Graph, conv: Node) -> bool:
    x, weight = conv.operands[0], conv.operands[1]
    bias = conv.operands[2] if len(conv.operands) > 2 else None
    attrs = conv.attributes
    if weight.rank != 5 or attrs.get("transposed", False) or not x.type.is_static:
        return False
    if not all(isinstance(v, int) for v in list(attrs.get("stride", [])) + list(attrs.get("padding", [])) + list(attrs.get("dilation", []))):
        return False
    data = _float_weight(weight)
    if data is None:
        return False
    if bias is not None and not bias.is_constant:
        return False
    n, c, d, h, w = x.shape
    o, _, kd, kh, kw = weight.shape
    sd, sh, sw = attrs["stride"]
    pd, ph, pw = attrs["padding"]
    dd, dh, dw = attrs["dilation"]
    groups = attrs.get("groups", 1)
    do, ho, wo = _out_size(d, kd, sd, pd, dd), _out_size(h, kh, sh, ph, dh), _out_size(w, kw, sw, pw, dw)
    dtype = x.dtype
    tensor = lambda *shape: TensorType(dtype, shape)  # noqa: E731

    def add(op, operands, type_, attributes):
        node = graph.create_node(op, operands, [type_], attributes)
        graph.insert_before(conv, node)
        return node.result

    frames = x
    depth = d
    if pd:
        depth = d + 2 * pd
        frames = add("aten.constant_pad_nd", [frames], tensor(n, c, depth, h, w), {"pad": [0, 0, 0, 0, pd, pd], "value": 0.0})
    frames = add("aten.permute_copy", [frames], tensor(n, depth, c, h, w), {"dims": [0, 2, 1, 3, 4]})
    frames = add("aten.view_copy", [frames], tensor(n * depth, c, h, w), {"size": [n * depth, c, h, w]})
    total = None
    base = weight.name or "conv3d_weight"
    for k in range(kd):
        tap = data[:, :, k].contiguous()
        slice_weight = graph.add_input(graph.unique_input_name(f"{base}_tap{k}"), TensorType(DType.f32, tuple(tap.shape)),
                                       InputKind.parameter, tap)
        operands = [frames, slice_weight] + ([bias] if bias is not None and k == 0 else [])
        conv_attributes = {"stride": [sh, sw], "padding": [ph, pw], "dilation": [dh, dw], "transposed": False,
                           "output_padding": [0, 0], "groups": groups}
        if len(operands) == 2:
            conv_attributes = {"bias": None, **conv_attributes}
        y = add("aten.convolution", operands, tensor(n * depth, o, ho, wo), conv_attributes)
        y = add("aten.view_copy", [y], tensor(n, depth, o, ho, wo), {"size": [n, depth, o, ho, wo]})
        start = k * dd
        y = add("aten.slice_copy.Tensor", [y], tensor(n, do, o, ho, wo),
                {"dim": 1, "start": start, "end": start + (do - 1) * sd + 1, "step": sd})
        total = y if total is None else add("aten.add.Tensor", [total, y], tensor(n, do, o, ho, wo), {})
    out = add("aten.permute_copy", [total], tensor(n, o, do, ho, wo), {"dims": [0, 2, 1, 3, 4]})
    graph.replace_node(conv, [out])
    return True



@function_pass("decompose-conv3d")
def decompose_conv3d(graph: Graph) -> bool:
    """Rewrite 3-D convolutions with constant weights as sums of 2-D convolutions."""
    changed = False
    for node in graph:
        if node.op == "aten.convolution" and len(node.operands) > 1 and node.operands[1].rank == 5:
            changed |= _decompose(graph, node)
    return changed
