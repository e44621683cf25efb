"""``xnnpack.safe-softmax``: rewrite a softmax whose all--inf rows are set to 0 (attention with a mask) as ops XNNPACK runs."""

from __future__ import annotations

import math

import attrs

from passes import PatternRewritePass, Rewriter, rewrite_pattern
from xir import Node, TensorType
from xir.ops import aten

from ._base import _TORCH_DTYPES, _float_constant


def _producer(value, *ops):
    node = value.producer
    return node if node is not None and node.op in ops else None


def _is_zero_fill(value) -> bool:
    node = _producer(value, aten.full_like, aten.zeros_like)
    return node is not None and (node.op == aten.zeros_like or node.attribute("fill_value") == 0)


def _all_masked_rows(condition, x, dim) -> bool:
    """condition == not any(not (x == -inf), dim, keepdim): the rows of x that are all -inf."""
    outer = _producer(condition, aten.logical_not)
    any_ = outer and _producer(outer.input, aten.any.dim)
    inner = any_ and _producer(any_.input, aten.logical_not)
    eq = inner and _producer(inner.input, aten.eq.Scalar)
    if not eq or eq.input is not x or eq.attributes.get("other") != -math.inf:
        return False
    return bool(any_.attributes.get("keepdim")) and any_.attributes.get("dim") % x.rank == dim % x.rank


@rewrite_pattern(aten.where.self)
def safe_softmax(node: Node, rewriter: Rewriter) -> bool:
    """where(row all -inf, 0, softmax(x)) (PyTorch's _safe_softmax, which attention with a mask
    exports) => softmax(clamp(x, min=lowest)) * clamp(x/2 + highest, 0, 1). The clamp keeps a
    fully masked row finite (uniform instead of NaN) and the factor is 0 exactly where x is -inf
    and 1 elsewhere, so a fully masked row gives 0; in a row with any finite entry the -inf
    entries were already 0. All of it XNNPACK runs."""
    import torch

    condition, zeros, probabilities = node.operands
    softmax = _producer(probabilities, aten._softmax)
    if softmax is None or not isinstance(softmax.input.type, TensorType):
        return rewriter.notify_match_failure(node, "not a where over a softmax")
    x = softmax.input
    if x.dtype not in _TORCH_DTYPES:  # (a symbolic shape is fine: every op made is elementwise or the softmax)
        return rewriter.notify_match_failure(node, "not a float softmax")
    if not _is_zero_fill(zeros) or zeros.type != probabilities.type or node.result.type != probabilities.type:
        return rewriter.notify_match_failure(node, "the other branch is not zeros like the softmax")
    if not _all_masked_rows(condition, x, softmax.attribute("dim")):
        return rewriter.notify_match_failure(node, "the condition is not 'the row is all -inf'")
    info = torch.finfo(getattr(torch, _TORCH_DTYPES[x.dtype]))

    def op(name, operands, **attributes):
        return rewriter.op_before(node, name, operands, **attributes)

    finite = op(aten.clamp, [x], min=float(info.min), max=None)
    new_softmax = op(
        aten._softmax, [finite], dim=softmax.attribute("dim"), half_to_float=softmax.attribute("half_to_float")
    )
    half = op(aten.mul.Tensor, [x, _float_constant(rewriter, "softmax_half", x.type, 0.5)])
    shifted = op(aten.add.Tensor, [half, _float_constant(rewriter, "softmax_highest", x.type, float(info.max))])
    keep = op(aten.clamp, [shifted], min=0.0, max=1.0)
    rewriter.replace_node(node, [op(aten.mul.Tensor, [new_softmax, keep])])
    return True


@attrs.frozen
class SafeSoftmax(PatternRewritePass):
    """Rewrite a softmax whose all--inf rows are set to 0 (attention with a mask) as ops XNNPACK runs."""

    name = "xnnpack.safe-softmax"

    rules = (safe_softmax,)
