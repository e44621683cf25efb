"""``xnnpack.expand-as-broadcast``: rewrite an expand that repeats elements (float, static, rank 1-6) as a broadcasting multiply by ones."""

from __future__ import annotations

import attrs

from passes import PatternRewritePass, Rewriter, rewrite_pattern
from xir import Node, TensorType
from xir.ops import aten

from ..rules import MAX_RANK
from ._base import _TORCH_DTYPES, _float_constant


@rewrite_pattern(aten.expand_copy)
def expand_as_broadcast(node: Node, rewriter: Rewriter) -> bool:
    """An expand that repeats elements => x * ones, the ones only as large as the repeated dims:
    XNNPACK has no expand but broadcasts a multiply (grouped-query attention's repeat_kv, the
    masks of encoders). Exact: x * 1 == x."""

    x, result = node.input.type, node.result.type
    if not isinstance(x, TensorType) or not isinstance(result, TensorType) or x.dtype not in _TORCH_DTYPES:
        return rewriter.notify_match_failure(node, "not a float tensor")
    if not x.is_static or not result.is_static:
        return rewriter.notify_match_failure(node, "symbolic shape")
    if not 1 <= result.rank <= MAX_RANK or result.numel() == 0:
        return rewriter.notify_match_failure(node, f"a {result.rank}-D or empty result: it would stay outside XNNPACK")
    if x.numel() == result.numel():
        return rewriter.notify_match_failure(node, "adds no elements (shape-ops-as-views makes it a view)")
    aligned = (1,) * (result.rank - x.rank) + tuple(x.shape)
    ones_shape = [size if have == 1 else 1 for have, size in zip(aligned, result.shape)]
    ones = _float_constant(rewriter, "expand_ones", result, 1.0, ones_shape)
    rewriter.replace_node(node, [rewriter.op_before(node, aten.mul.Tensor, [node.input, ones])])
    return True


@attrs.frozen
class ExpandAsBroadcast(PatternRewritePass):
    """Rewrite an expand that repeats elements (float, static, rank 1-6) as a broadcasting multiply by ones."""

    name = "xnnpack.expand-as-broadcast"

    rules = (expand_as_broadcast,)
