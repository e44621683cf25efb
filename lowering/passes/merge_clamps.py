"""``xnnpack.merge-clamps``: merge consecutive relu/hardtanh into one (see :func:`merge_clamps`)."""

from __future__ import annotations

import math

import attrs

from passes import PatternRewritePass, Rewriter, rewrite_pattern
from xir import Node
from xir.ops import aten

_CLAMPS = (aten.relu, aten.hardtanh)


def _clamp_bounds(node: Node) -> tuple[float, float]:
    if node.op == aten.relu:
        return 0.0, math.inf
    return float(node.attribute("min_val")), float(node.attribute("max_val"))


@rewrite_pattern(*_CLAMPS)
def merge_clamps(node: Node, rewriter: Rewriter) -> bool:
    """relu/hardtanh of a relu/hardtanh => one hardtanh (or relu) with the bounds of both. XNNPACK's
    preprocessing fuses an activation into the add, sub, mul, conv or linear before it by writing
    its bounds on that op, and a second activation after it then overwrites them: relu(relu6(x + b))
    ran as relu(x + b), without the upper bound (measured: wrong by up to 0.8; fuzz fp32 seed 11037)."""
    first = node.input.producer
    if first is None or first.op not in _CLAMPS:
        return rewriter.notify_match_failure(node, "not an activation of an activation")
    (lo1, hi1), (lo2, hi2) = _clamp_bounds(first), _clamp_bounds(node)
    lo, hi = max(lo1, lo2), min(hi1, hi2)
    if lo > hi:
        return rewriter.notify_match_failure(node, f"the bounds [{lo1}, {hi1}] and [{lo2}, {hi2}] do not overlap")
    x = first.input
    if lo == 0.0 and hi == math.inf:
        merged = rewriter.op_before(node, aten.relu, [x])
    else:
        merged = rewriter.op_before(node, aten.hardtanh, [x], min_val=lo, max_val=hi)
    rewriter.replace_node(node, [merged])
    if not first.results[0].uses:
        rewriter.erase(first)  # (read by nothing else)
    return True


@attrs.frozen
class MergeClamps(PatternRewritePass):
    """Merge consecutive relu/hardtanh into one (see :func:`merge_clamps`)."""

    name = "xnnpack.merge-clamps"

    rules = (merge_clamps,)
