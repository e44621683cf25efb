"""``xnnpack.bmm-distinct-operands``: give a bmm that reads one permute twice a second permute (see :func:`bmm_distinct_operands`)."""

from __future__ import annotations

import attrs

from passes import Rewriter, rewrite_pattern
from xir import Node
from xir.ops import aten

from ._base import DelegatedDtypeRewrite


@rewrite_pattern(aten.bmm)
def bmm_distinct_operands(node: Node, rewriter: Rewriter) -> bool:
    """bmm(p, p) with ``p`` a permute => bmm(p, p') with ``p'`` a second permute of the same input.
    XNNPACK multiplies wrong when one transpose it computes feeds both operands of a batch matmul and
    moves the batch dim (measured on 3x3x3: every permutation but the identity and (0, 2, 1) wrong,
    by up to 11, in fp32 and bf16, with stock too; fuzz bf16 seed 20645). Two transposes are right."""
    a, b = node.operands
    if a is not b:
        return rewriter.notify_match_failure(node, "reads two different values")
    permute = a.producer
    if permute is None or permute.op != aten.permute_copy:
        return rewriter.notify_match_failure(node, "the operand read twice is not a permute's result")
    second = rewriter.op_before(node, permute.op, list(permute.operands), **dict(permute.attributes))
    rewriter.set_operand(node, 1, second)
    return True


@attrs.frozen
class BmmDistinctOperands(DelegatedDtypeRewrite):
    """Give a bmm that reads one permute twice a second permute (see :func:`bmm_distinct_operands`)."""

    name = "xnnpack.bmm-distinct-operands"
    rules = (bmm_distinct_operands,)
