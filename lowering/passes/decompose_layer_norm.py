"""``xnnpack.decompose-layer-norm``: rewrite fp32 layer norms (result only, rank 1-6, normalized dims static) as the means, multiplies and adds XNNPACK runs."""

from __future__ import annotations

import attrs

from passes import PatternRewritePass, Rewriter, rewrite_pattern
from xir import Node, TensorType
from xir.ops import aten

from ._base import _norm_input_problem, _normalize


@rewrite_pattern(aten.native_layer_norm)
def decompose_layer_norm(node: Node, rewriter: Rewriter) -> bool:
    """fp32 layer norm => mean, subtract, mean of squares, add eps, rsqrt, multiply (weight),
    add (bias): XNNPACK has no layer norm but runs each of these (the means over the trailing dims
    through xnnpack.mean-over-last-dims, which runs after this pass). bf16 layer norms are fp32
    ones by then (layer-norm-in-fp32). The dims before the normalized ones (the rows) may be
    symbolic: a dynamic batch or sequence length; every op here broadcasts over them, and the
    means reduce the static normalized dims (xnnpack.mean-over-last-dims writes symbolic rows as a
    view's -1, or reads them whole in a linear)."""
    x = node.input
    if not isinstance(x.type, TensorType):
        return rewriter.notify_match_failure(node, "not a tensor")
    first = x.rank - len(node.attribute("normalized_shape"))
    problem = _norm_input_problem(
        node, x, 1, "layer norm (layer-norm-in-fp32 widens bf16 ones first)", static_from=first
    )
    if problem:
        return rewriter.notify_match_failure(node, problem)
    dims = list(range(first, x.rank))
    result = _normalize(node, rewriter, x, dims, "layer_norm_eps")
    weight, bias = node.operand("weight"), node.operand("bias")
    if weight is not None:
        result = rewriter.op_before(node, aten.mul.Tensor, [result, weight])
    if bias is not None:
        result = rewriter.op_before(node, aten.add.Tensor, [result, bias])
    rewriter.replace_node(node, [result, None, None])
    return True


@attrs.frozen
class DecomposeLayerNorm(PatternRewritePass):
    """Rewrite fp32 layer norms (result only, rank 1-6, symbolic rows allowed) as the means, multiplies and adds XNNPACK runs."""

    name = "xnnpack.decompose-layer-norm"
    # bf16 layer norms are fp32 ones by then; its means become linears after it
    runs_after = ("xnnpack.layer-norm-in-fp32",)
    runs_before = ("xnnpack.mean-over-last-dims",)

    rules = (decompose_layer_norm,)
