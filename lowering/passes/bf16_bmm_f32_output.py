"""``xnnpack.bf16-bmm-f32-output``: rewrite bf16 bmm as XNNPACK computes it: bf16 x bf16 -> fp32, then a convert to bf16."""

from __future__ import annotations

import attrs

from passes import Rewriter, rewrite_pattern
from xir import DType, Node
from xir.ops import aten

from ..ops import xir_ops
from ._base import Bf16Rewrite


@rewrite_pattern(aten.bmm)
def bf16_bmm_f32_output(node: Node, rewriter: Rewriter) -> bool:
    """bf16 bmm => xir.bmm_f32out (bf16 x bf16 -> fp32) then xir.convert to bf16."""
    a, b = node.operands
    if node.result.dtype is not DType.bf16 or a.dtype is not DType.bf16 or b.dtype is not DType.bf16:
        return rewriter.notify_match_failure(node, "not a bf16 x bf16 -> bf16 bmm")
    wide = rewriter.op_before(node, xir_ops.bmm_f32out, [a, b])
    rewriter.replace_node(node, [rewriter.op_before(node, xir_ops.convert, [wide], dtype=DType.bf16)])
    return True


@attrs.frozen
class Bf16BmmF32Output(Bf16Rewrite):
    """Rewrite bf16 bmm as XNNPACK computes it: bf16 x bf16 -> fp32, then a convert to bf16."""

    name = "xnnpack.bf16-bmm-f32-output"
    rules = (bf16_bmm_f32_output,)
