"""``xnnpack.select-as-slice``: rewrite ``select_copy`` (one index of a static dim) as a slice of
length 1 and a view that drops the dim: XNNPACK has both, and no select in ExecuTorch's XNNPACK
backend. Llama's rotary embedding picks the two halves of each pair this way (``unbind(-1)``)."""

from __future__ import annotations

import attrs

from passes import Rewriter, rewrite_pattern
from passes.shape_ops_as_views import view_size, view_to
from xir import Node, TensorType
from xir.ops import aten

from ..rules import MAX_RANK
from ._base import FLOATS, DelegatedDtypeRewrite


@rewrite_pattern(aten.select_copy.int)
def select_as_slice(node: Node, rewriter: Rewriter) -> bool:
    """select_copy(x) {dim, index} => view_copy(slice_copy(x) {dim, start=index, end=index+1}) to
    the select's result shape (-1 for one symbolic dim)."""

    x, result = node.input.type, node.result.type
    if not isinstance(x, TensorType) or not isinstance(result, TensorType) or x.dtype not in FLOATS:
        return rewriter.notify_match_failure(node, "not a float tensor (XNNPACK would not take it)")
    if not 2 <= x.rank <= MAX_RANK:
        return rewriter.notify_match_failure(
            node, f"{x.rank}-D: the slice would stay outside XNNPACK, or its view be 0-D"
        )
    dim = node.attribute("dim") % x.rank
    size, index = x.shape[dim], node.attribute("index")
    if not isinstance(size, int) or not isinstance(index, int):
        return rewriter.notify_match_failure(
            node, "a symbolic dim or index (the slice's offset would be computed at run time)"
        )
    if view_size(result.shape) is None:
        return rewriter.notify_match_failure(node, "two or more symbolic dims (a view infers one)")
    start = index % size
    one = rewriter.op_before(node, aten.slice_copy.Tensor, [node.input], dim=dim, start=start, end=start + 1, step=1)
    rewriter.replace_node(node, [view_to(rewriter, node, one, result)])
    return True


@attrs.frozen
class SelectAsSlice(DelegatedDtypeRewrite):
    """Rewrite select_copy on a static dim as a slice of length 1 and a view."""

    name = "xnnpack.select-as-slice"

    rules = (select_as_slice,)
