"""``xnnpack.patch-conv-as-matmul``: a convolution whose stride is its kernel (a vision transformer's
patch embedding) as the matrix product it is.

Each output pixel of such a convolution reads its own ``kh x kw`` patch of the input, and no patch
overlaps another, so:

    y = conv2d(x, w, b, stride=(kh, kw))                x: [N, C, H, W], w: [O, C, kh, kw]
 => p = view(x, [N, C, H/kh, kh, W/kw, kw])
    p = permute(p, [0, 2, 4, 1, 3, 5])                  [N, H/kh, W/kw, C, kh, kw]
    y = mm(view(p, [N*H/kh*W/kw, C*kh*kw]), w2) + b     w2 = w.reshape(O, C*kh*kw).T, a new constant
    y = permute(view(y, [N, H/kh, W/kw, O]), [0, 3, 1, 2])

The numbers are the same products, summed in another order (fp32 rounding). What it buys: a
delegate without a convolution needs none of ExecuTorch's XNNPACK layout passes
(``lowering.fx.backend_passes``), which is most of a ViT's or SigLIP's lowering time; XNNPACK runs the
transposes the convolution's channels-last layout needed anyway.

Matched on fp32, ungrouped, not transposed, no padding or dilation, a static input whose height
and width the kernel divides, kernels of at least 2 x 2, constant weights (and bias), and not
quantized. Declined otherwise, with the reason.
"""

from __future__ import annotations

import attrs

from passes import PatternRewritePass, Rewriter, rewrite_pattern
from xir import DType, Node, TensorType
from xir.ops import aten

from ..rules import QUANTIZE_OPS, dequantized_source


def _problem(node: Node) -> str | None:
    operands = node.operands
    x, w = operands[0], operands[1]
    bias = operands[2] if len(operands) > 2 else None
    if not isinstance(x.type, TensorType) or x.rank != 4 or x.dtype is not DType.f32:
        return "not a 4-D f32 input"
    if not x.type.is_static:
        return "a symbolic input dim"
    if node.attribute("transposed") or node.attribute("groups") != 1:
        return "transposed or grouped"
    if any(node.attribute("padding") or [0]) or any(d != 1 for d in node.attribute("dilation") or [1]):
        return "padded or dilated"
    if (
        not w.is_constant
        or w.data is None
        or w.rank != 4
        or (bias is not None and (not bias.is_constant or bias.data is None))
    ):
        return "weights (or bias) that are not constants"
    kh, kw = w.type.shape[2], w.type.shape[3]
    if list(node.attribute("stride") or []) != [kh, kw]:
        return f"stride {node.attribute('stride')} is not the kernel {[kh, kw]}"
    if kh < 2 or kw < 2:
        return "a kernel under 2 x 2 (not a patch embedding)"
    if x.type.shape[2] % kh or x.type.shape[3] % kw:
        return "the kernel does not divide the input's height and width"
    if dequantized_source(x) is not None or any(use.op in QUANTIZE_OPS for use in node.result.users):
        return "quantized"
    return None


@rewrite_pattern(aten.convolution)
def patch_conv_as_matmul(node: Node, rewriter: Rewriter) -> bool:
    """conv2d with stride == kernel => view, permute, view, mm with the flattened weight, add the
    bias, view, permute."""
    problem = _problem(node)
    if problem:
        return rewriter.notify_match_failure(node, problem)
    x, w = node.operands[0], node.operands[1]
    bias = node.operands[2] if len(node.operands) > 2 else None
    n, c, h, width = x.type.shape
    o, _, kh, kw = w.type.shape
    ho, wo = h // kh, width // kw
    rows, cols = n * ho * wo, c * kh * kw

    def op(name, operands, shape, **attributes):
        made = rewriter.create(name, operands, [TensorType(DType.f32, tuple(shape))], attributes)
        return rewriter.insert_before(node, made).result

    patches = op(aten.view_copy, [x], (n, c, ho, kh, wo, kw), size=[n, c, ho, kh, wo, kw])
    patches = op(aten.permute_copy, [patches], (n, ho, wo, c, kh, kw), dims=[0, 2, 4, 1, 3, 5])
    patches = op(aten.view_copy, [patches], (rows, cols), size=[rows, cols])
    weight = rewriter.add_constant(
        f"{w.name}_as_matrix", TensorType(DType.f32, (cols, o)), w.data.detach().reshape(o, cols).t().contiguous()
    )
    y = op(aten.mm, [patches, weight], (rows, o))
    if bias is not None:
        y = op(aten.add.Tensor, [y, bias], (rows, o))
    y = op(aten.view_copy, [y], (n, ho, wo, o), size=[n, ho, wo, o])
    y = op(aten.permute_copy, [y], (n, o, ho, wo), dims=[0, 3, 1, 2])
    rewriter.replace_node(node, [y])
    return True


@attrs.frozen
class PatchConvAsMatmul(PatternRewritePass):
    """A convolution whose stride is its kernel (a patch embedding) as views, permutes and a
    matrix product with the flattened weight: the delegate then needs none of XNNPACK's layout passes."""

    name = "xnnpack.patch-conv-as-matmul"
    # a bf16 patch convolution is an fp32 one between converts by then
    runs_after = ("xnnpack.bf16-in-fp32",)

    rules = (patch_conv_as_matmul,)
