"""``xnnpack.decompose-group-norm``: rewrite fp32 group norms (result only, static but for the batch, rank 2-6, constant weight and bias) as the views, means, multiplies and adds XNNPACK runs."""

from __future__ import annotations

import math

import attrs

from passes import PatternRewritePass, Rewriter, rewrite_pattern
from passes.shape_ops_as_views import view_size
from xir import DType, Node, TensorType
from xir.ops import aten

from ._base import _norm_input_problem, _normalize


@rewrite_pattern(aten.native_group_norm)
def decompose_group_norm(node: Node, rewriter: Rewriter) -> bool:
    """fp32 group norm of x (N, C, *spatial) => view (N, G, C/G * spatial), mean, subtract, mean of
    squares, add eps, rsqrt, multiply, view back, multiply by the weight and add the bias (as
    (C, 1, ...) constants): XNNPACK has no group norm but runs each of these (the means through
    xnnpack.mean-over-last-dims, which runs after this pass). ExecuTorch's portable group norm,
    where it stays otherwise, is also less accurate (fuzz fp32 11651: off by 2.6e-4 of the
    output's size). A symbolic batch is the views' one inferred (-1) dim; symbolic channels or
    spatial dims would make the reduced group symbolic, and stay a group norm."""
    if len(node.operands) not in (1, 3):  # (the input; with a weight and a bias)
        return rewriter.notify_match_failure(node, "a weight without a bias, or a bias without a weight")
    x, weight, bias = (list(node.operands) + [None, None])[:3]
    problem = _norm_input_problem(node, x, 2, "group norm", static_from=1)
    if problem:
        return rewriter.notify_match_failure(node, problem)
    n, c, groups = x.shape[0], x.shape[1], int(node.attribute("group"))
    if groups < 1 or c % groups:
        return rewriter.notify_match_failure(node, f"{c} channels in {groups} groups")
    if any(v is not None and (not v.is_constant or v.data is None) for v in (weight, bias)):
        return rewriter.notify_match_failure(node, "a weight or bias that is not a constant")
    size = math.prod(x.shape[1:])
    grouped_type = TensorType(DType.f32, (n, groups, size // groups))
    grouped = rewriter.insert_before(
        node, rewriter.create(aten.view_copy, [x], [grouped_type], {"size": view_size(grouped_type.shape)})
    ).result
    normed = _normalize(node, rewriter, grouped, [2], "group_norm_eps")
    result = rewriter.insert_before(
        node, rewriter.create(aten.view_copy, [normed], [x.type], {"size": view_size(x.shape)})
    ).result
    per_channel = (c,) + (1,) * (x.rank - 2)
    for value, name, base in (
        (weight, aten.mul.Tensor, "group_norm_weight"),
        (bias, aten.add.Tensor, "group_norm_bias"),
    ):
        if value is not None:
            constant = rewriter.add_constant(base, TensorType(DType.f32, per_channel), value.data.reshape(per_channel))
            result = rewriter.op_before(node, name, [result, constant])
    rewriter.replace_node(node, [result, None, None])
    return True


@attrs.frozen
class DecomposeGroupNorm(PatternRewritePass):
    """Rewrite fp32 group norms (result only, static but for the batch, rank 2-6, constant weight
    and bias) as the views, means, multiplies and adds XNNPACK runs."""

    name = "xnnpack.decompose-group-norm"
    # its means become linears after it
    runs_before = ("xnnpack.mean-over-last-dims",)

    rules = (decompose_group_norm,)
