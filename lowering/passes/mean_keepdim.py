"""xnnpack.mean-keepdim: a spatial mean that drops its dims becomes a mean that keeps them, then a view.

XNNPACK reduces a 4-D tensor over dims (2, 3) only with keepdim=True; the global average pool at
the end of most CNNs (``x.mean((2, 3))``) drops them. ``mean(x, (2, 3), keepdim=True)`` followed
by a view to (N, C) computes the same and runs in XNNPACK (fp32; XNNPACK has no bf16 mean).
"""

from __future__ import annotations

import attrs

from passes.rewriter import PatternRewritePass, Rewriter, rewrite_pattern
from passes.shape_ops_as_views import view_size
from xir import Node, TensorType
from xir.ops import aten


@rewrite_pattern(aten.mean.dim)
def keep_spatial_dims(node: Node, rewriter: Rewriter) -> bool:
    x = node.input
    dims = node.attributes.get("dim") or []
    if node.attributes.get("keepdim", False):
        return rewriter.notify_match_failure(node, "already keeps its dims")
    if x.rank != 4 or sorted(d % 4 for d in dims) != [2, 3] or node.attributes.get("dtype") is not None:
        return rewriter.notify_match_failure(node, "not a mean over the spatial dims of a 4-D tensor")
    n, c = x.shape[0], x.shape[1]
    size = view_size((n, c))  # (a symbolic batch or channel dim is written -1)
    if size is None:
        return rewriter.notify_match_failure(node, "symbolic batch and channel dims (a view infers one)")
    kept = rewriter.create(aten.mean.dim, [x], [TensorType(x.dtype, (n, c, 1, 1))], {"dim": [2, 3], "keepdim": True})
    rewriter.insert_before(node, kept)
    view = rewriter.create(aten.view_copy, [kept.result], [node.result.type], {"size": size})
    rewriter.insert_before(node, view)
    rewriter.replace_node(node, [view.result])
    return True


@attrs.frozen
class MeanKeepdim(PatternRewritePass):
    """Rewrite spatial means that drop their dims as keepdim means plus a view (XNNPACK runs those)."""

    name = "xnnpack.mean-keepdim"

    rules = (keep_spatial_dims,)
