"""``xnnpack.mean-over-last-dims``: rewrite a mean over a tensor's trailing dims as a 4-D spatial mean between two views (XNNPACK runs it)."""

from __future__ import annotations

import attrs

from passes import Rewriter, rewrite_pattern
from xir import Node, TensorType
from xir.ops import aten

from ._base import DelegatedDtypeRewrite


@rewrite_pattern(aten.mean.dim)
def mean_over_last_dims(node: Node, rewriter: Rewriter) -> bool:
    """mean over the trailing dims of x => view (1, rows, 1, cols), mean over (2, 3) keepdim, view
    back: XNNPACK reduces 4-D tensors over dims 2 and 3 (RMSNorm's mean(-1, keepdim=True))."""
    x = node.input
    if not isinstance(x.type, TensorType) or not x.type.is_static or x.rank < 1:
        return rewriter.notify_match_failure(node, "not a static tensor")
    if node.attribute("dtype") is not None:
        return rewriter.notify_match_failure(node, "a dtype argument")
    dims = sorted({d % x.rank for d in (node.attribute("dim") or range(x.rank))})
    if dims != list(range(x.rank - len(dims), x.rank)):
        return rewriter.notify_match_failure(node, f"dims {node.attribute('dim')} are not the trailing dims")
    if x.rank == 4 and dims == [2, 3]:
        return rewriter.notify_match_failure(node, "already a spatial mean XNNPACK takes")
    rows, cols = 1, 1
    for i, d in enumerate(x.shape):
        if i in dims:
            cols *= d
        else:
            rows *= d
    square = rewriter.op_before(node, aten.view_copy, [x], size=[1, rows, 1, cols])
    mean = rewriter.op_before(node, aten.mean.dim, [square], dim=[2, 3], keepdim=True)
    rewriter.replace_node(node, [rewriter.op_before(node, aten.view_copy, [mean], size=list(node.result.shape))])
    return True


@attrs.frozen
class MeanOverLastDims(DelegatedDtypeRewrite):
    """Rewrite a mean over a tensor's trailing dims as a 4-D spatial mean between two views (XNNPACK runs it)."""

    name = "xnnpack.mean-over-last-dims"

    rules = (mean_over_last_dims,)
