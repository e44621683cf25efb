"""``xnnpack.pow-as-multiplies``: rewrite ``pow(x, 3)`` as ``(x * x) * x`` and ``pow(x, 2.0)`` as
``x * x`` on fp32 tensors. XNNPACK only squares (an integer exponent 2), so both partitioners left
GPT-2's and Phi's ``gelu_new`` (``x + 0.044715 * torch.pow(x, 3.0)``) outside. PyTorch computes
these two exponents on the CPU with exactly these multiplies (its fast paths for 2 and 3), so the
result is eager's to the bit. Other dtypes stay: a bf16 product rounds after each multiply, eager's
after the whole power."""

from __future__ import annotations

import attrs

from passes import PatternRewritePass, Rewriter, rewrite_pattern
from xir import DType, Node, TensorType
from xir.ops import aten


@rewrite_pattern(aten.pow.Tensor_Scalar)
def pow_as_multiplies(node: Node, rewriter: Rewriter) -> bool:
    """pow(x) {exponent=3 or 3.0} => mul(mul(x, x), x); pow(x) {exponent=2.0} => mul(x, x)."""
    x, exponent = node.input, node.attribute("exponent")
    if not isinstance(x.type, TensorType) or x.type.dtype is not DType.f32:
        return rewriter.notify_match_failure(node, "not fp32 (eager rounds a bf16 or f16 power once, not per multiply)")
    if isinstance(exponent, bool) or not isinstance(exponent, (int, float)) or exponent not in (2, 3):
        return rewriter.notify_match_failure(node, f"exponent {exponent!r}: only 2.0 and 3 are multiplies in eager")
    if exponent == 2 and isinstance(exponent, int):
        return rewriter.notify_match_failure(node, "an integer square: XNNPACK runs it as it is")
    square = rewriter.op_before(node, aten.mul.Tensor, [x, x])
    rewriter.replace_node(node, [square if exponent == 2 else rewriter.op_before(node, aten.mul.Tensor, [square, x])])
    return True


@attrs.frozen
class PowAsMultiplies(PatternRewritePass):
    """Rewrite an fp32 cube (and a float-exponent square) as the multiplies eager computes."""

    name = "xnnpack.pow-as-multiplies"

    rules = (pow_as_multiplies,)
