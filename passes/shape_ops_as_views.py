"""shape-ops-as-views: ``unsqueeze``, ``squeeze`` and an ``expand`` that adds no elements only
change a tensor's shape; with static shapes each is a ``view_copy`` to its result shape, which
backends (XNNPACK among them) run as a reshape. ExecuTorch's decoder LLM exports are full of
them (attention masks, rotary embeddings, KV-cache heads)."""

from __future__ import annotations

import attrs

from xir import Node, TensorType
from xir.ops import aten

from .rewriter import PatternRewritePass, Rewriter, rewrite_pattern

SHAPE_OPS = (aten.unsqueeze_copy, aten.squeeze_copy.dims, aten.squeeze_copy.dim, aten.squeeze_copy,
             aten.expand_copy)


@rewrite_pattern(*SHAPE_OPS)
def shape_op_as_view(node: Node, rewriter: Rewriter) -> bool:
    """unsqueeze/squeeze/no-op expand with static shapes => view_copy to the result shape."""
    source, result = node.input.type, node.result.type
    if not isinstance(source, TensorType) or not isinstance(result, TensorType):
        return rewriter.notify_match_failure(node, "not a tensor")
    if not source.is_static or not result.is_static:
        return rewriter.notify_match_failure(node, "symbolic shape")
    if source.numel() != result.numel():
        return rewriter.notify_match_failure(node, "an expand that repeats elements (not a reshape)")
    view = rewriter.insert_before(node, rewriter.create(aten.view_copy, [node.input], attributes={"size": list(result.shape)}))
    rewriter.replace_node(node, [view.result])
    return True


@attrs.frozen
class ShapeOpsAsViews(PatternRewritePass):
    """Rewrite unsqueeze, squeeze and element-preserving expand (static shapes) as view_copy."""

    name = "shape-ops-as-views"

    rules = (shape_op_as_view,)
