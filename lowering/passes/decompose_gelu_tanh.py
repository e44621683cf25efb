"""``xnnpack.decompose-gelu-tanh``: gELU with approximate='tanh' as the fp32 multiplies, adds and tanh XNNPACK runs (XNNPACK's own"""

from __future__ import annotations

import math

import attrs

from passes import Rewriter, rewrite_pattern
from xir import DType, Node, TensorType
from xir.ops import aten, dim_order_ops

from ..rules import MAX_RANK
from ._base import DelegatedDtypeRewrite


@rewrite_pattern(aten.gelu)
def decompose_gelu_tanh(node: Node, rewriter: Rewriter) -> bool:
    """gelu(approximate='tanh') => 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))), in fp32:
    a bf16 one between casts to fp32 and back, since bf16 eager computes it in fp32 and rounds once."""
    import torch

    x = node.input
    if node.attribute("approximate") != "tanh":
        return rewriter.notify_match_failure(node, "exact GELU (XNNPACK runs it as it is)")
    if not isinstance(x.type, TensorType) or x.dtype not in (DType.f32, DType.bf16):
        return rewriter.notify_match_failure(node, "not f32 or bf16")

    if x.rank > MAX_RANK:  # (decomposed, it would only be more ops outside)
        return rewriter.notify_match_failure(node, f"{x.rank}-D: it stays outside XNNPACK, whole")
    narrow = x.dtype if x.dtype is not DType.f32 else None
    if narrow is not None:
        x = rewriter.op_before(node, dim_order_ops._to_dim_order_copy, [x], dtype=DType.f32)

    def constant(label, number):
        return rewriter.add_constant(
            f"gelu_{label}", TensorType(DType.f32, ()), torch.tensor(number, dtype=torch.float32)
        )

    def op(name, *operands):
        return rewriter.op_before(node, name, operands)

    cube = op(aten.mul.Tensor, op(aten.mul.Tensor, x, x), x)
    inner = op(
        aten.mul.Tensor,
        op(aten.add.Tensor, x, op(aten.mul.Tensor, cube, constant("k1", 0.044715))),
        constant("k0", math.sqrt(2 / math.pi)),
    )
    tanh = op(aten.tanh, inner)
    result = op(
        aten.mul.Tensor, op(aten.mul.Tensor, x, op(aten.add.Tensor, tanh, constant("one", 1.0))), constant("half", 0.5)
    )
    if narrow is not None:
        result = rewriter.op_before(node, dim_order_ops._to_dim_order_copy, [result], dtype=narrow)
    rewriter.replace_node(node, [result])
    return True


@attrs.frozen
class DecomposeGeluTanh(DelegatedDtypeRewrite):
    """GELU with approximate='tanh' as the fp32 multiplies, adds and tanh XNNPACK runs (XNNPACK's own
    GELU is the exact one). A bf16 one only with ``enable_bf16``: without it the casts to fp32 and
    back stay outside XNNPACK, two portable ops more than the one GELU (fuzz fp32 97069)."""

    name = "xnnpack.decompose-gelu-tanh"

    rules = (decompose_gelu_tanh,)
