"""``xnnpack.scalar-operands-as-constants``: rewrite mul/add/sub/div by a Python scalar as the tensor op with a 0-D constant, and an"""

from __future__ import annotations

import attrs

from passes import Rewriter, rewrite_pattern
from xir import Node, TensorType
from xir.ops import aten

from ._base import _TORCH_DTYPES, DelegatedDtypeRewrite, _NotBf16

_SCALAR_TO_TENSOR = {
    aten.mul.Scalar: aten.mul.Tensor,
    aten.add.Scalar: aten.add.Tensor,
    aten.sub.Scalar: aten.sub.Tensor,
    aten.div.Scalar: aten.div.Tensor,
}


@rewrite_pattern(*_SCALAR_TO_TENSOR)
def scalar_operand_as_constant(node: Node, rewriter: Rewriter) -> bool:
    """x op scalar => x op constant (a 0-D tensor of x's dtype): XNNPACK takes only the tensor forms."""
    import torch

    x, other = node.input, node.attribute("other")
    if not isinstance(x.type, TensorType) or x.dtype not in _TORCH_DTYPES:
        return rewriter.notify_match_failure(node, "not a float tensor")
    if isinstance(other, bool) or not isinstance(other, (int, float)):
        return rewriter.notify_match_failure(node, f"the scalar {other!r} is not a number")
    alpha = node.attributes.get("alpha", 1)
    value = other * alpha  # x + alpha * other, folded
    constant = rewriter.add_constant(
        "scalar", TensorType(x.dtype, ()), torch.tensor(value, dtype=getattr(torch, _TORCH_DTYPES[x.dtype]))
    )
    rewriter.replace_node(node, [rewriter.op_before(node, _SCALAR_TO_TENSOR[node.op], [x, constant])])
    return True


@rewrite_pattern(aten.add.Tensor, aten.sub.Tensor)
def alpha_as_multiply(node: Node, rewriter: Rewriter) -> bool:
    """x + alpha * y => x + (y * alpha), the same for sub: XNNPACK's add has no alpha, and
    ExecuTorch's portable add/sub with an alpha are wrong when the first operand is the one
    broadcast (measured: add(x[1], y[3], alpha=2) off by 2.1; fuzz fp32 seed 10978)."""
    import torch

    alpha = node.attributes.get("alpha", 1)
    if alpha in (None, 1) or isinstance(alpha, bool) or not isinstance(alpha, (int, float)):
        return rewriter.notify_match_failure(node, "no alpha")
    x, y = node.input, node.other  # (None when other is a number given as an attribute)
    if y is None or not isinstance(y.type, TensorType) or y.dtype not in _TORCH_DTYPES or node.result.dtype != y.dtype:
        return rewriter.notify_match_failure(node, "not a float tensor operand")
    scale = rewriter.add_constant(
        "alpha", TensorType(y.dtype, ()), torch.tensor(alpha, dtype=getattr(torch, _TORCH_DTYPES[y.dtype]))
    )
    scaled = rewriter.op_before(node, aten.mul.Tensor, [y, scale])
    rewriter.replace_node(node, [rewriter.op_before(node, node.op, [x, scaled])])
    return True


@rewrite_pattern(aten.add.Tensor, aten.sub.Tensor)
def alpha_as_multiply_first_broadcast(node: Node, rewriter: Rewriter) -> bool:
    """``alpha_as_multiply`` where the first operand is broadcast, in any dtype: the op may stay
    outside XNNPACK (bf16 without enable_bf16), and the portable kernel gets this case wrong."""
    x = node.input
    if not isinstance(x.type, TensorType) or not isinstance(node.result.type, TensorType):
        return rewriter.notify_match_failure(node, "not a tensor")
    if x.type.shape == node.result.type.shape:
        return rewriter.notify_match_failure(node, "the first operand is not broadcast: the portable kernel is right")
    return alpha_as_multiply.match_and_rewrite(node, rewriter)


@attrs.frozen
class ScalarOperandsAsConstants(DelegatedDtypeRewrite):
    """Rewrite mul/add/sub/div by a Python scalar as the tensor op with a 0-D constant, and an
    add/sub's alpha as a multiply by a 0-D constant (XNNPACK runs those). Without ``enable_bf16`` a
    bf16 add/sub stays outside XNNPACK, and its alpha is rewritten only where the portable kernel
    errs (the first operand broadcast): elsewhere it would be two portable ops for one (fuzz fp32
    11044, 11140)."""

    name = "xnnpack.scalar-operands-as-constants"

    rules = (scalar_operand_as_constant, alpha_as_multiply)

    def patterns(self):
        if self.enable_bf16:
            return self.rules
        return (scalar_operand_as_constant, _NotBf16(alpha_as_multiply), alpha_as_multiply_first_broadcast)
