"""``xnnpack.remove-no-ops``: remove-no-ops, keeping the views around a linear that ``to_edge``
decomposed, and dropping the dim-order clones that keep their operand's dim order.

A linear that to_backend decomposed reads ``view -> addmm/mm -> view``; ExecuTorch's XNNPACK
preprocessing finds those nodes by their source module and rebuilds a linear from the pattern's
first input and last output, so the views next to a 2-D matrix multiply must stay as they are.
"""

from __future__ import annotations

import attrs

from passes import PatternRewritePass, Rewriter
from passes.remove_no_ops import (
    VIEW_OPS,
    RemoveNoOps,
    bypass,
    drop_identity_reshape,
    fold_view_of_view,
)
from passes.rewriter import RewritePattern, rewrite_pattern
from xir import Node
from xir.ops import aten, dim_order_ops, family, quantized_decomposed

from ..rules import dim_order_of

DECOMPOSED_LINEAR_OPS = tuple(op for op in family("linear") if op != aten.linear)  # (addmm, mm)
KEEPS_VIEW = "a view of a decomposed linear (XNNPACK rebuilds the linear from it)"


def next_to_decomposed_linear(node: Node) -> bool:
    """Whether ``node`` (a view) reads a decomposed linear's matrix multiply or is read by one."""
    producer = node.input.producer if node.operands else None
    return (producer is not None and producer.op in DECOMPOSED_LINEAR_OPS) or any(
        user.op in DECOMPOSED_LINEAR_OPS for user in node.users
    )


def _identity_view_of_a_linear(node: Node) -> bool:
    return node.op in VIEW_OPS and next_to_decomposed_linear(node)


def _view_chain_of_a_linear(node: Node) -> bool:
    inner = node.input.producer
    return (
        inner is not None
        and inner.op in VIEW_OPS
        and (next_to_decomposed_linear(node) or next_to_decomposed_linear(inner))
    )


class _KeepingLinearViews(RewritePattern):
    """``rule``, declined on the views a decomposed linear's rebuild reads (``keeps(node)``)."""

    def __init__(self, rule: RewritePattern, keeps):
        self.rule, self.keeps, self.ops, self.name = rule, keeps, rule.ops, rule.name

    def match_and_rewrite(self, node: Node, rewriter: Rewriter) -> bool:
        if self.keeps(node):
            return rewriter.notify_match_failure(node, KEEPS_VIEW)
        return self.rule.match_and_rewrite(node, rewriter)


_GUARDS = {drop_identity_reshape: _identity_view_of_a_linear, fold_view_of_view: _view_chain_of_a_linear}


@rewrite_pattern(dim_order_ops._clone_dim_order)
def drop_clone_keeping_dim_order(node: Node, rewriter: Rewriter) -> bool:
    """A ``_clone_dim_order`` to the dim order its operand has (as torch.export traced it) copies
    nothing a functional program can tell apart. XNNPACK's preprocessing removes such clones itself
    (``RemoveCloneOpsTransform``); removed here, the delegate needs none of its other passes
    (``lowering.fx.backend_passes``). A clone to another dim order, or from an unknown one, stays."""
    wanted = node.attributes.get("dim_order")
    if wanted is None or node.results[0].type != node.input.type:
        return rewriter.notify_match_failure(node, "no dim order, or it changes the type")
    source = dim_order_of(node.input)
    if source is None:
        return rewriter.notify_match_failure(node, "its operand's dim order is unknown")
    if tuple(wanted) != source:
        return rewriter.notify_match_failure(node, f"changes the dim order from {list(source)} to {list(wanted)}")
    return bypass(node, rewriter)


@rewrite_pattern(quantized_decomposed.quantize_per_tensor)
def drop_requantize_to_the_same_grid(node: Node, rewriter: Rewriter) -> bool:
    """quantize(dequantize(q)) on the same grid (scale, zero point, range, dtype) gives q back: each
    integer in the range, scaled and divided by the same scale, rounds to itself. What a dropped
    clone or identity between the two leaves (ExecuTorch's ds_cnn example in int8): XNNPACK would
    run the pair as two converts, int8 to fp32 and back; stock's preprocessing removes the clone
    with its pair."""
    inner = node.input.producer
    if inner is None or inner.op != quantized_decomposed.dequantize_per_tensor:
        return rewriter.notify_match_failure(node, "its operand is not a per-tensor dequantize")
    if len(node.operands) != 1 or len(inner.operands) != 1 or node.attributes != inner.attributes:
        return rewriter.notify_match_failure(node, "quantizes to another grid than its operand was dequantized from")
    if node.results[0].type != inner.input.type:
        return rewriter.notify_match_failure(node, "its result's type is not the dequantized tensor's")
    return bypass(node, rewriter, inner.input)


@attrs.frozen
class XnnpackRemoveNoOps(PatternRewritePass):
    """remove-no-ops, keeping the views of a decomposed linear (XNNPACK's preprocessing rebuilds the
    linear from them), dropping dim-order clones that keep their operand's dim order, and a
    quantize of a dequantize on the same grid."""

    name = "xnnpack.remove-no-ops"
    rules = tuple(
        _KeepingLinearViews(rule, _GUARDS[rule]) if rule in _GUARDS else rule for rule in RemoveNoOps.rules
    ) + (drop_clone_keeping_dim_order, drop_requantize_to_the_same_grid)
