"""``xnnpack.mean-over-last-dims``: rewrite a mean over a tensor's trailing dims as a 4-D spatial mean between two views (XNNPACK runs it)."""

from __future__ import annotations

import attrs

from passes import Rewriter, rewrite_pattern
from passes.rewriter import fixed_reader
from passes.shape_ops_as_views import symbolic_product, view_size
from xir import Node, TensorType
from xir.ops import aten

from ._base import DelegatedDtypeRewrite


@rewrite_pattern(aten.mean.dim)
def mean_over_last_dims(node: Node, rewriter: Rewriter) -> bool:
    """mean over the trailing dims of x => view (1, rows, 1, cols), mean over (2, 3) keepdim, view
    back: XNNPACK reduces 4-D tensors over dims 2 and 3 (RMSNorm's mean(-1, keepdim=True)).

    With a dynamic shape the reduced dims must be static; a symbolic dim among the others makes
    ``rows`` symbolic, written -1 in the first view, and the view back writes the result's one
    symbolic dim as -1 (a result with two declines: a view infers one)."""
    x = node.input
    if not isinstance(x.type, TensorType) or x.rank < 1:
        return rewriter.notify_match_failure(node, "not a tensor")
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
            if not isinstance(d, int) or not isinstance(cols, int):
                return rewriter.notify_match_failure(node, "a reduced dim is symbolic")
            cols *= d
        else:
            rows = rows * d if isinstance(d, int) and isinstance(rows, int) else None  # (None: symbolic)
    if fixed_reader(node.result) is not None:
        return rewriter.notify_match_failure(node, f"read by {fixed_reader(node.result).op}, which cannot read another value")
    result = node.result.type
    back = view_size(result.shape)
    if back is None:
        return rewriter.notify_match_failure(node, "two or more symbolic dims in the result (a view infers one)")
    if rows is None and cols == 0:
        return rewriter.notify_match_failure(node, "symbolic rows of an empty reduction (-1 would be ambiguous)")
    square_type = TensorType(x.dtype, (1, rows if rows is not None else symbolic_product(x.shape[:x.rank - len(dims)]), 1, cols))
    square = rewriter.insert_before(node, rewriter.create(aten.view_copy, [x], [square_type],
                                                          {"size": [1, -1 if rows is None else rows, 1, cols]})).result
    mean_type = TensorType(x.dtype, (1, square_type.shape[1], 1, 1))
    mean = rewriter.insert_before(node, rewriter.create(aten.mean.dim, [square], [mean_type],
                                                        {"dim": [2, 3], "keepdim": True})).result
    view = rewriter.create(aten.view_copy, [mean], [result], {"size": back})
    rewriter.replace_node(node, [rewriter.insert_before(node, view).result])
    return True


@attrs.frozen
class MeanOverLastDims(DelegatedDtypeRewrite):
    """Rewrite a mean over a tensor's trailing dims as a 4-D spatial mean between two views (XNNPACK runs it)."""

    name = "xnnpack.mean-over-last-dims"

    rules = (mean_over_last_dims,)
