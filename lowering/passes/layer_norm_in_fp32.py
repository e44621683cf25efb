"""xnnpack.layer-norm-in-fp32: compute bf16/f16 layer norms (and group norms) in fp32.

ExecuTorch 1.5.1's portable bf16 layer norm kernel is numerically wrong (measured: a max error
of 2.34 on outputs of magnitude 3.77), and XNNPACK has no layer norm. Converting the input to
fp32, normalizing with fp32 weights, and converting back gives what eager bf16 computes (which
accumulates in fp32 too). A bf16 group norm the same way: XNNPACK has none, and both partitioners
left it outside; in fp32 it decomposes (``xnnpack.decompose-group-norm``) into ops XNNPACK runs.
"""

from __future__ import annotations

import attrs

from passes.rewriter import PatternRewritePass, Rewriter, rewrite_pattern
from xir import DType, Node, TensorType
from xir.ops import aten, dim_order_ops

LAYER_NORM = aten.native_layer_norm
GROUP_NORM = aten.native_group_norm
CONVERT = dim_order_ops._to_dim_order_copy
NARROW = (DType.bf16, DType.f16)


@rewrite_pattern(LAYER_NORM, GROUP_NORM)
def layer_norm_in_fp32(node: Node, rewriter: Rewriter) -> bool:
    """narrow layer (or group) norm => convert to fp32, the norm with fp32 weights, convert back."""
    x = node.input
    if not isinstance(x.type, TensorType) or x.dtype not in NARROW:
        return rewriter.notify_match_failure(node, "not a bf16/f16 norm")
    if not all(r.is_unused() for r in node.results[1:]):
        return rewriter.notify_match_failure(node, "its mean/rstd outputs are used")
    if any(not v.is_constant or v.data is None for v in node.operands[1:]):
        return rewriter.notify_match_failure(node, "its weight or bias is not a constant with data")
    wide_x = rewriter.insert_before(node, rewriter.create(CONVERT, [x], attributes={"dtype": DType.f32}))
    operands = [wide_x.result] + [
        rewriter.add_constant(f"{v.name}_f32", v.type.with_dtype(DType.f32), v.data.float().contiguous())
        for v in node.operands[1:]
    ]
    norm = rewriter.insert_before(node, rewriter.create(node.op, operands, attributes=dict(node.attributes)))
    narrow = rewriter.insert_before(node, rewriter.create(CONVERT, [norm.results[0]], attributes={"dtype": x.dtype}))
    rewriter.replace_node(node, [narrow.result, None, None])
    return True


@attrs.frozen
class LayerNormInFp32(PatternRewritePass):
    """Compute bf16/f16 layer and group norms in fp32 (convert in, normalize, convert out)."""

    name = "xnnpack.layer-norm-in-fp32"

    rules = (layer_norm_in_fp32,)
