"""``xnnpack.weight-only-linear-bias``: add the bias of a torchao int8 weight-only linear after it (XNNPACK's qc8w fully connected"""

from __future__ import annotations

import attrs

from passes import PatternRewritePass, Rewriter, rewrite_pattern
from xir import Node
from xir.ops import aten

from ..capability import weight_only_linear_reason


@rewrite_pattern(aten.linear)
def weight_only_linear_bias(node: Node, rewriter: Rewriter) -> bool:
    """linear(x, dequantize_affine(w), b) => linear(x, dequantize_affine(w)) + b, for torchao's int8
    weight-only linears XNNPACK runs as an fp32 x qc8w fully connected (ExecuTorch's serializer
    quantizes the bias of a linear whose weight is quantized, and refuses it with an fp32 input)."""

    bias = node.operand("bias")
    if bias is None:
        return rewriter.notify_match_failure(node, "no bias")
    reason = weight_only_linear_reason(node)
    if reason is not None:
        return rewriter.notify_match_failure(node, reason)
    product = rewriter.op_before(node, aten.linear, [node.input, node.weight])
    rewriter.replace_node(node, [rewriter.op_before(node, aten.add.Tensor, [product, bias])])
    return True


@attrs.frozen
class WeightOnlyLinearBias(PatternRewritePass):
    """Add the bias of a torchao int8 weight-only linear after it (XNNPACK's qc8w fully connected
    with an fp32 input takes no bias through ExecuTorch's serializer)."""

    name = "xnnpack.weight-only-linear-bias"
    # the plan counts the bias as added where this pass is in the pipeline (capability's options.rewrites)
    planned_as_done = True

    rules = (weight_only_linear_bias,)
