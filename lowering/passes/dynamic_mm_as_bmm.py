"""``xnnpack.dynamic-mm-as-bmm``: rewrite a matrix product of two computed (or input) matrices,
``mm(a, b)`` with ``b`` not a constant, as a batch matrix product of one batch between views:
view ``a`` to ``(1, M, K)``, ``b`` to ``(1, K, N)``, ``bmm``, view back to ``(M, N)``.

XNNPACK's fully connected operator takes only a constant weight, so both partitioners leave such
an ``mm`` outside (ExecuTorch's ``add_mul`` example: ``torch.mm`` of two inputs), while XNNPACK's
batch matrix multiply takes two dynamic operands. An ``mm`` with a constant second operand is a
linear (decomposed or written as ``mm``) and stays as it is, as does one reading a dequantized
tensor (a quantized pattern).

A small product stays an ``mm``, on ExecuTorch's kernel: XNNPACK packs the dynamic operand at every
run and hands the product to its threads. Measured in fresh processes (``mm(a, x) + b`` of n x n
matrices, xir's program against stock's, which runs the ``mm`` outside): on two threads 1.04x at
n = 2, 1.84x at 8, 1.69x at 64, 0.97x at 96, 0.93x at 128, 0.72x at 256; on one thread 1.05x at 2,
1.03x at 128, 0.97x at 256 and 512. An ``mm`` of fewer than ``SMALL_MM`` multiply-adds (about 100
cubed) stays outside; a symbolic one may be any size and is rewritten.
"""

from __future__ import annotations

import attrs

from passes import Rewriter, rewrite_pattern
from passes.shape_ops_as_views import view_size, view_to
from xir import Node, TensorType
from xir.ops import aten

from ..rules import dequantized_source, is_static
from ._base import FLOATS, DelegatedDtypeRewrite

# an mm of fewer multiply-adds (M * K * N) than this stays outside (the module's docstring)
SMALL_MM = 2**20


@rewrite_pattern(aten.mm)
def dynamic_mm_as_bmm(node: Node, rewriter: Rewriter) -> bool:
    """mm(a, b), b not a constant => view(bmm(view(a) to [1, M, K], view(b) to [1, K, N])) to [M, N]."""
    a, b = node.operands
    types = [v.type for v in (a, b, node.result)]
    if not all(isinstance(t, TensorType) and t.rank == 2 and t.dtype in FLOATS for t in types):
        return rewriter.notify_match_failure(node, "not 2-D float matrices")
    if a.dtype != b.dtype or a.dtype != node.result.dtype:
        return rewriter.notify_match_failure(node, "mixed dtypes")
    if is_static(b):
        return rewriter.notify_match_failure(node, "its second operand is a constant: a linear XNNPACK takes as it is")
    if dequantized_source(a) is not None or dequantized_source(b) is not None:
        return rewriter.notify_match_failure(node, "reads a dequantized tensor (a quantized pattern)")
    (m, k), (_, n) = a.type.shape, b.type.shape
    if all(isinstance(d, int) for d in (m, k, n)) and m * k * n < SMALL_MM:
        return rewriter.notify_match_failure(
            node,
            f"a product of {m * k * n} multiply-adds: XNNPACK's batch matrix multiply would pack its "
            "dynamic operand and wake its threads for less work than that costs; ExecuTorch's mm is faster",
        )
    batched = [TensorType(a.dtype, (1,) + tuple(shape)) for shape in ((m, k), (k, n), (m, n))]
    if any(view_size(t.shape) is None for t in batched):
        return rewriter.notify_match_failure(node, "two symbolic dims in a view (a view infers one)")
    left, right = view_to(rewriter, node, a, batched[0]), view_to(rewriter, node, b, batched[1])
    product = rewriter.insert_before(node, rewriter.create(aten.bmm, [left, right], [batched[2]])).result
    rewriter.replace_node(node, [view_to(rewriter, node, product, node.result.type)])
    return True


@attrs.frozen
class DynamicMmAsBmm(DelegatedDtypeRewrite):
    """Rewrite an ``mm`` of a non-constant second operand as a one-batch ``bmm`` between views
    (see :func:`dynamic_mm_as_bmm`)."""

    name = "xnnpack.dynamic-mm-as-bmm"
    rules = (dynamic_mm_as_bmm,)
