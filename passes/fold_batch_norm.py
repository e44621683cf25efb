"""fold-batch-norm: fold an inference batch norm into the conv or linear before it, on the
right dim; rewrite the others as a per-channel multiply-add.

A batch norm normalizes dim 1 (the channel dim). It folds into the op before it only when
that dim is the op's output-channel dim:

* a convolution (not transposed): output channels are dim 1, weight rows are output channels;
* a linear with a 2-D output (N, C): output channels are dim 1 = the last dim.

A linear with a 3-D output (N, C, F) has its output channels on F, not C: folding there (as
ExecuTorch 1.5.1's XNNPACK does) scales the wrong dim. Such a batch norm, and any other one
that cannot fold (the op has other users, its weights are not constants, ...), becomes
``x * scale + shift`` with constants shaped to broadcast on dim 1, which XNNPACK runs in fp32
and bf16. The folded weights are checked for shape.
"""

from __future__ import annotations

from xir import DType, Graph, InputKind, Node, TensorType, Value

from .pass_base import function_pass

BATCH_NORM = "aten._native_batch_norm_legit_no_training"


def _constant_data(value: Value):
    return value.data if value.is_constant and value.data is not None else None


def _affine(norm: Node):
    """(scale, shift) per channel, computed in fp32, or None when a statistic is not a constant."""
    x, weight, bias, mean, var = (list(norm.operands) + [None] * 5)[:5]
    if var is None:
        return None
    datas = [_constant_data(v) for v in (weight, bias, mean, var)]
    if any(d is None for d in datas):
        return None
    w, b, m, v = (d.float() for d in datas)
    eps = norm.attributes.get("eps", 1e-5)
    scale = w / (v + eps).sqrt()
    return scale, b - m * scale


def _new_constant(graph: Graph, base: str, data, dtype) -> Value:
    name = graph.unique_input_name(base)
    data = getattr(data, _CAST[dtype])().contiguous()
    return graph.add_input(name, TensorType(dtype, tuple(data.shape)), InputKind.parameter, data)


# tensor methods that cast constant data to an IR float dtype
_CAST = {DType.f32: "float", DType.bf16: "bfloat16", DType.f16: "half", DType.f64: "double"}


def _try_fold(graph: Graph, norm: Node, scale, shift) -> bool:
    x = norm.operands[0]
    producer = x.producer
    if producer is None or len(x.uses) != 1:
        return False
    conv = producer.op == "aten.convolution" and not producer.attributes.get("transposed", False)
    linear_2d = producer.op == "aten.linear" and x.rank == 2  # (N, C): the last dim is dim 1
    if not (conv or linear_2d):
        return False
    weight = producer.operands[1]
    bias = producer.operands[2] if len(producer.operands) > 2 else None
    w = _constant_data(weight)
    if w is None or weight.dtype not in _CAST or (bias is not None and _constant_data(bias) is None):
        return False
    channels = x.shape[1]
    if w.shape[0] != channels or scale.shape[0] != channels:
        return False  # the op's output channels are not the normalized dim
    view = [channels] + [1] * (w.dim() - 1)
    folded_weight = w.float() * scale.reshape(view)
    old_bias = _constant_data(bias).float() if bias is not None else scale * 0
    folded_bias = old_bias * scale + shift
    if tuple(folded_weight.shape) != tuple(w.shape) or tuple(folded_bias.shape) != (channels,):
        raise AssertionError(f"fold-batch-norm: folded weight {tuple(folded_weight.shape)} does not match {tuple(w.shape)}")
    dtype = weight.dtype
    new_weight = _new_constant(graph, f"{weight.name}_bn", folded_weight, dtype)
    new_bias = _new_constant(graph, f"{(bias.name if bias is not None else weight.name)}_bn_bias", folded_bias, dtype)
    graph.set_operand(producer, 1, new_weight)
    if bias is not None:
        graph.set_operand(producer, 2, new_bias)
    else:
        producer.attributes.pop("bias", None)  # None, not a value: no use-list to update
        graph.set_operands(producer, [producer.operands[0], new_weight, new_bias])
    _replace_norm(graph, norm, x)
    return True


def _replace_norm(graph: Graph, norm: Node, value: Value) -> None:
    graph.replace_all_uses(norm.results[0], value)
    if any(r.uses for r in norm.results[1:]):
        raise AssertionError("fold-batch-norm: the batch norm's statistics outputs are still used")
    graph.erase(norm)


def _to_affine(graph: Graph, norm: Node, scale, shift) -> bool:
    x = norm.operands[0]
    if x.rank < 2 or not isinstance(x.shape[1], int) or x.dtype not in _CAST:
        return False
    view = [x.shape[1]] + [1] * (x.rank - 2)
    dtype = x.dtype
    scale_value = _new_constant(graph, "bn_scale", scale.reshape(view), dtype)
    shift_value = _new_constant(graph, "bn_shift", shift.reshape(view), dtype)
    mul = graph.create_node("aten.mul.Tensor", [x, scale_value], [x.type])
    graph.insert_before(norm, mul)
    add = graph.create_node("aten.add.Tensor", [mul.result, shift_value], [x.type])
    graph.insert_before(norm, add)
    _replace_norm(graph, norm, add.result)
    return True


@function_pass("fold-batch-norm")
def fold_batch_norm(graph: Graph, *, to_affine: bool = True) -> bool:
    """Fold batch norms into the conv/linear before them on the right dim; rewrite the rest as x * scale + shift."""
    changed = False
    for node in graph:
        if node.op != BATCH_NORM or any(r.uses for r in node.results[1:]):
            continue
        affine = _affine(node)
        if affine is None:
            continue
        scale, shift = affine
        if _try_fold(graph, node, scale, shift):
            changed = True
        elif to_affine:
            changed |= _to_affine(graph, node, scale, shift)
    return changed
