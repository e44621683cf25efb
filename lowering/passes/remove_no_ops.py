"""``xnnpack.remove-no-ops``: remove-no-ops, keeping the views around a linear that ``to_edge``
decomposed.

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
    drop_identity_reshape,
    fold_view_of_view,
)
from passes.rewriter import RewritePattern
from xir import Node
from xir.ops import aten

DECOMPOSED_LINEAR_OPS = (aten.addmm, aten.mm)
KEEPS_VIEW = "a view of a decomposed linear (XNNPACK rebuilds the linear from it)"


def next_to_decomposed_linear(node: Node) -> bool:
    """Whether ``node`` (a view) reads a decomposed linear's matrix multiply or is read by one."""
    producer = node.input.producer if node.operands else None
    return (producer is not None and producer.op in DECOMPOSED_LINEAR_OPS) or \
        any(user.op in DECOMPOSED_LINEAR_OPS for user in node.users)


def _identity_view_of_a_linear(node: Node) -> bool:
    return node.op in VIEW_OPS and next_to_decomposed_linear(node)


def _view_chain_of_a_linear(node: Node) -> bool:
    inner = node.input.producer
    return inner is not None and inner.op in VIEW_OPS and (next_to_decomposed_linear(node) or next_to_decomposed_linear(inner))


class _KeepingLinearViews(RewritePattern):
    """``rule``, declined on the views a decomposed linear's rebuild reads (``keeps(node)``)."""

    def __init__(self, rule: RewritePattern, keeps):
        self.rule, self.keeps, self.ops, self.name = rule, keeps, rule.ops, rule.name

    def match_and_rewrite(self, node: Node, rewriter: Rewriter) -> bool:
        if self.keeps(node):
            return rewriter.notify_match_failure(node, KEEPS_VIEW)
        return self.rule.match_and_rewrite(node, rewriter)


_GUARDS = {drop_identity_reshape: _identity_view_of_a_linear, fold_view_of_view: _view_chain_of_a_linear}


@attrs.frozen
class XnnpackRemoveNoOps(PatternRewritePass):
    """remove-no-ops, keeping the views of a decomposed linear (XNNPACK's preprocessing rebuilds the linear from them)."""

    name = "xnnpack.remove-no-ops"
    rules = tuple(_KeepingLinearViews(rule, _GUARDS[rule]) if rule in _GUARDS else rule for rule in RemoveNoOps.rules)
