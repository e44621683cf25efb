"""``xnnpack.rope-as-pair-swap``: the interleaved rotary embedding (ExecuTorch's Llama, Qwen3 and
the other models of its LLM flow) as two multiplies and an add on the whole tensor, the pairs
swapped by a 0/1 matrix.

The model rotates each pair (x[2i], x[2i+1]) of a head by an angle: it splits the pairs apart
(``unbind`` of the last dim of size 2: two strided slices), computes ``r*cos - i*sin`` and ``r*sin
+ i*cos``, and interleaves them again (``stack``: a concatenation along a last dim of size 1).
XNNPACK runs strided slices and interleaving concatenations element by element; at 7 tokens they
are most of the rotary embedding's time (``python scripts/rope_pair_swap.py``: a layer's q and k
rotations, one delegate, take 42.3 us as written and 20.3 us rewritten at 7 tokens, 22.4 and 17.0 us
at one). The same numbers, without the split:

    x5 = view(x, [..., D/2, 2])
    r, i = x5[..., 0], x5[..., 1]                      (slice + squeeze, or select)
    y = stack([r*c - i*s, r*s + i*c], -1)              (unsqueeze + cat)
 => y = x5 * c5 + swap5 * s5                           c5 = view(c, c.shape + [1])
                                                       s5 = view(s, s.shape + [1]) * [-1, 1]
       swap5 = view(mm(view(x5, [rows, D]), P), [..., D/2, 2])

where ``P`` is the D x D matrix that swaps each pair (``swap[2i] = x[2i+1]``, ``swap[2i+1] =
x[2i]``): a fully connected layer XNNPACK runs as one GEMM. Every result is the same fp32 number
as before: ``r*c + i*(-s)`` is ``r*c - i*s`` exactly, ``i*c + r*s`` is ``r*s + i*c`` (addition
commutes), and the swap's sums have one non-zero product. What differs is a value that is not
finite: an infinite or NaN element makes its whole head row NaN through the swap's zero products
(0 * inf), where the model makes only its pair so; attention over that head is NaN either way.

Matched on fp32 only (the flow computes its rotary embedding in fp32 in every recipe), with the
pair dim last, ``c`` and ``s`` of the pair count's size in their last dim (broadcast against the
halves; or fp32 casts of them, one per product, as the flow's bf16 recipe has them: casts of one
table are that table), the sub's and add's results read only by the interleaving, and at most one
symbolic dim in the views it makes. Declined otherwise, with the reason.
"""

from __future__ import annotations

from typing import Callable

import attrs

from passes import PatternRewritePass, Rewriter
from passes.remove_no_ops import CONVERT_OPS as CASTS
from passes.remove_no_ops import layout_change
from passes.shape_ops_as_views import dims_product, view_to
from xir import DType, Node, TensorType, Value
from xir.ops import aten

from ..ops import xir_ops
from ._base import RunStateRule


def _last_dim(node: Node) -> int | None:
    """``node``'s one ``dim`` attribute, counted from the front of its input's dims."""
    dim = node.attributes.get("dim")
    if isinstance(dim, (list, tuple)):
        if len(dim) != 1:
            return None
        dim = dim[0]
    if not isinstance(dim, int):
        return None
    rank = node.operands[0].rank
    return dim if dim >= 0 else dim + rank


def _half(value: Value) -> tuple[Value, int] | None:
    """``value`` is x5[..., k] of an x5 whose last dim is 2 (a slice of length 1 then a squeeze or
    a view dropping it, or a select): (x5, k)."""
    node = value.producer
    if node is None:
        return None
    if node.op == aten.select_copy.int:
        x5 = node.operands[0]
        if _last_dim(node) == x5.rank - 1 and x5.type.shape[-1] == 2 and node.attributes.get("index") in (0, 1, -2, -1):
            return x5, node.attributes["index"] % 2
        return None
    if node.op in (aten.squeeze_copy.dims, aten.squeeze_copy.dim):
        if _last_dim(node) != node.operands[0].rank - 1:
            return None
    elif node.op == aten.view_copy:
        inner = node.operands[0]
        if (
            inner.rank != value.rank + 1
            or tuple(inner.type.shape[:-1]) != tuple(value.type.shape)
            or inner.type.shape[-1] != 1
        ):
            return None
    else:
        return None
    piece = node.operands[0].producer
    if piece is None or piece.op not in (aten.slice_copy.Tensor, xir_ops.slice):
        return None
    x5 = piece.operands[0]
    start, end, step = (piece.attributes.get(k) for k in ("start", "end", "step"))
    if _last_dim(piece) != x5.rank - 1 or x5.type.shape[-1] != 2 or step not in (None, 1):
        return None
    if (start, end) in ((0, 1), (1, 2)):
        return x5, start
    return None


def _unsqueezed(value: Value) -> Value | None:
    """``value`` is ``v`` with a last dim of 1 added (unsqueeze, or a view): ``v``."""
    node = value.producer
    if node is None or not node.operands:
        return None
    inner = node.operands[0]
    if node.op == aten.unsqueeze_copy and node.attributes.get("dim") in (inner.rank, -1):
        return inner
    if (
        node.op == aten.view_copy
        and inner.rank + 1 == value.rank
        and value.type.shape[-1] == 1
        and tuple(value.type.shape[:-1]) == tuple(inner.type.shape)
    ):
        return inner
    return None


def _products(value: Value) -> list[tuple[Value, Value]] | None:
    """The two operand pairs of ``mul(a, b) op mul(c, d)``."""
    node = value.producer
    pairs = []
    for operand in node.operands:
        mul = operand.producer
        if mul is None or mul.op != aten.mul.Tensor or len(mul.operands) != 2:
            return None
        pairs.append(tuple(mul.operands))
    return pairs


def _same_as(value: Value) -> object:
    """What ``value`` is the same number as: itself, or (the cast's input, its dtype) for a cast
    (the flow's bf16 recipe keeps its rope tables in bf16; to_edge casts them to fp32 for each
    product on its own, so the four products read four casts of two tables)."""
    node = value.producer
    if node is not None and node.op in CASTS and len(node.operands) == 1 and not layout_change(node):
        return (node.operands[0], value.dtype)
    return value


def _factor(pair: tuple[Value, Value], half: Value) -> Value | None:
    """The other factor of a product of ``half``."""
    a, b = pair
    return b if a is half else a if b is half else None


def rope_as_pair_swap(node: Node, rewriter: Rewriter, made: dict | None = None) -> bool:
    """stack([r*c - i*s, r*s + i*c], -1) of the halves r, i of x5 => x5*c5 + swap(x5)*s5
    (``made``: the swap matrices and signs made so far in this run, one per head width)."""
    y = node.result
    if len(node.operands) != 2 or y.dtype is not DType.f32 or y.type.shape[-1] != 2 or _last_dim(node) != y.rank - 1:
        return rewriter.notify_match_failure(node, "not an fp32 concatenation of two pieces along a last dim of 2")
    parts = [_unsqueezed(v) for v in node.operands]
    if any(p is None for p in parts):
        return rewriter.notify_match_failure(node, "a piece is not a value with a last dim of 1 added")
    first, second = parts
    if (
        first.producer is None
        or second.producer is None
        or first.producer.op != aten.sub.Tensor
        or second.producer.op != aten.add.Tensor
        or first.producer.attributes.get("alpha", 1) != 1
        or second.producer.attributes.get("alpha", 1) != 1
    ):
        return rewriter.notify_match_failure(node, "not (a - b, c + d)")
    if len(first.users) != 1 or len(second.users) != 1 or first.is_graph_output() or second.is_graph_output():
        return rewriter.notify_match_failure(node, "the rotated halves are read elsewhere too")
    minus, plus = _products(first), _products(second)
    if minus is None or plus is None:
        return rewriter.notify_match_failure(node, "not differences and sums of products")
    halves = {}  # k -> (x5, x5[..., k]) among the factors of the difference
    for v in (v for pair in minus for v in pair):
        half = _half(v)
        if half is not None:
            halves.setdefault(half[1], (half[0], v))
    if 0 not in halves or 1 not in halves or halves[0][0] is not halves[1][0]:
        return rewriter.notify_match_failure(node, "not the two halves of one tensor's last dim of 2")
    (x5, r), (_, i) = halves[0], halves[1]
    c, s = _factor(minus[0], r), _factor(minus[1], i)  # r*c - i*s
    if c is None or s is None:
        return rewriter.notify_match_failure(node, "not r*c - i*s")
    wanted = {frozenset(map(_same_as, pair)) for pair in ((r, s), (i, c))}  # r*s + i*c, in any order
    if {frozenset(map(_same_as, pair)) for pair in plus} != wanted:
        return rewriter.notify_match_failure(node, "not r*s + i*c with the same c and s")
    half = r.type.shape[-1]
    for table in (c, s):
        if (
            not isinstance(table.type, TensorType)
            or table.dtype is not DType.f32
            or table.rank > r.rank
            or table.type.shape[-1] != half
        ):
            return rewriter.notify_match_failure(node, "c or s is not fp32 with the pair count as its last dim")
    if x5.dtype is not DType.f32:
        return rewriter.notify_match_failure(node, "not fp32")
    width = 2 * half
    lead = tuple(x5.type.shape[:-2])
    rows = dims_product(lead)
    flat = view_to(rewriter, node, x5, TensorType(DType.f32, (rows, width)))
    if flat is None:
        return rewriter.notify_match_failure(node, "two or more symbolic dims (a view could not be written)")
    c5 = view_to(rewriter, node, c, TensorType(DType.f32, tuple(c.type.shape) + (1,)))
    s5 = view_to(rewriter, node, s, TensorType(DType.f32, tuple(s.type.shape) + (1,)))
    if c5 is None or s5 is None:
        return rewriter.notify_match_failure(node, "two or more symbolic dims in c or s")
    p, sign = _constants(rewriter, width, {} if made is None else made)
    return write_swap_rotation(
        rewriter, node, x5, flat, p, c5, lambda: rewriter.op_before(node, aten.mul.Tensor, [s5, sign])
    )


def write_swap_rotation(
    rewriter: Rewriter, node: Node, x: Value, flat: Value, swap: Value, cos: Value, sin: Value | Callable[[], Value]
) -> bool:
    """Replace ``node`` by ``x * cos + view(flat @ swap, x's type) * sin``, the ops placed before it
    (``flat``: x viewed as rows of the swapped width; ``sin``: a value, or a function that makes it
    after the swap). Shared by ``xnnpack.rope-as-pair-swap`` and ``xnnpack.partial-rotary-whole-head``."""
    # (mm, not linear: to_edge has decomposed linears already; the swap matrices are symmetric, so
    # x @ P swaps)
    swapped = view_to(rewriter, node, rewriter.op_before(node, aten.mm, [flat, swap]), x.type)
    sin = sin() if callable(sin) else sin
    rotated = rewriter.op_before(
        node,
        aten.add.Tensor,
        [
            rewriter.op_before(node, aten.mul.Tensor, [x, cos]),
            rewriter.op_before(node, aten.mul.Tensor, [swapped, sin]),
        ],
    )
    y = node.result
    if tuple(rotated.type.shape) != tuple(y.type.shape):
        raise AssertionError(f"{node.op} rewritten as a swap rotation of {rotated.type} for {y.type}")
    rewriter.replace_node(node, [rotated])
    return True


def _constants(rewriter: Rewriter, width: int, made: dict) -> tuple[Value, Value]:
    """The ``width`` x ``width`` pair-swap matrix and the [-1, 1] sign (made once per width and run)."""
    import torch

    if width not in made:
        swap = torch.zeros(width, width)
        for k in range(0, width, 2):
            swap[k, k + 1] = swap[k + 1, k] = 1.0
        made[width] = (
            rewriter.add_constant(f"rope_pair_swap_{width}", TensorType(DType.f32, (width, width)), swap),
            rewriter.add_constant(f"rope_pair_sign_{width}", TensorType(DType.f32, (2,)), torch.tensor([-1.0, 1.0])),
        )
    return made[width]


@attrs.frozen
class RopeAsPairSwap(PatternRewritePass):
    """The interleaved rotary embedding (pairs split, rotated, interleaved) as x*cos + swap(x)*sin, the
    pairs swapped by a 0/1 matrix: no strided slices or interleaving concatenation (fp32)."""

    name = "xnnpack.rope-as-pair-swap"
    rules = (RunStateRule(rope_as_pair_swap, aten.cat),)

    def patterns(self):
        return (RunStateRule(rope_as_pair_swap, aten.cat),)
