"""``xnnpack.pow-as-products``: an fp32 cube (``x ** 3``, as GELU's tanh approximation written out by hand computes it: ALBERT's ``gelu_new``) as two multiplies, which XNNPACK runs; XNNPACK has no pow but a square."""

from __future__ import annotations

import attrs

from passes import PatternRewritePass, Rewriter, rewrite_pattern
from xir import DType, Node, TensorType
from xir.ops import aten


@rewrite_pattern(aten.pow.Tensor_Scalar)
def cube_as_products(node: Node, rewriter: Rewriter) -> bool:
    """fp32 ``pow(x, 3)`` => ``(x * x) * x``. PyTorch's CPU kernel computes a cube as these two
    products too, so the result is eager's to the bit. Not for bf16/f16, where eager computes the
    power in fp32 and rounds once (two narrow products would round twice)."""
    x = node.input
    if not isinstance(x.type, TensorType) or x.dtype is not DType.f32 or node.result.type != x.type:
        return rewriter.notify_match_failure(node, "not an f32 power of the same type")
    exponent = node.attribute("exponent")
    if isinstance(exponent, bool) or exponent != 3:
        return rewriter.notify_match_failure(node, f"exponent {exponent!r} (a cube only; XNNPACK squares an integer 2)")
    square = rewriter.op_before(node, aten.mul.Tensor, [x, x])
    rewriter.replace_node(node, [rewriter.op_before(node, aten.mul.Tensor, [square, x])])
    return True


@attrs.frozen
class PowAsProducts(PatternRewritePass):
    """Rewrite fp32 cubes (``pow(x, 3)``) as two multiplies XNNPACK runs."""

    name = "xnnpack.pow-as-products"

    rules = (cube_as_products,)
