"""``xnnpack.partial-rotary-whole-head``: a partial rotary embedding (Phi-4-mini, Phi-3 style
``partial_rotary_factor``: ``rotate_half`` on the first R of each head's W dims, the rest passed
through) as two multiplies and an add over the whole head, the halves swapped by a 0/1 matrix.

After ``xnnpack.rotate-half-sign-in-sin`` the model's rotation of q (and of k) reads

    a = x[..., :R]        b = x[..., R:]                                (two slices)
    y = cat([a * c + cat([a, a])[..., h:h + R] * s', b], -1)          (h = R / 2; s' the signed sine)

eight ops per q and k of every layer, five of them moving data. Over the whole head the same
numbers are

 => y = x * wide(c, 1) + view(mm(view(x, [rows, W]), P), x.shape) * wide(s', 0)

where ``wide(t, v)`` widens a table from R to W dims, the new ones v: ``t @ E`` (E the R x W
identity, zero beyond R) plus v on the new dims. (Not XNNPACK's constant pad: torch's fake
``constant_pad_nd`` fixes the symbolic sequence length.) The tables are shared by q, k and every
layer, so each is widened once, right after it. ``P`` is the W x W matrix that swaps the two
halves of the rotated part (``swap[j] = x[j + h]`` for j < h, ``x[j - h]`` for h <= j < R) and is
zero on the passed-through dims: one GEMM. On the rotated dims every product is the model's own
(each sum of the GEMMs has one non-zero product); on the passed-through dims the result is ``b *
1 + 0 * 0``, which is ``b``. What differs is a value that is not finite: an infinite or NaN
element makes its whole head row NaN through the swap's zero products (0 * inf), where the model
makes only its own element or pair so; attention over that head is NaN either way. (And the sign
of a zero: ``-0 * 1 + 0`` is +0.)

Phi-4-mini in ExecuTorch's flow (partial rotary 0.75; ``python scripts/flow_pass_ablation.py
--without xnnpack.partial-rotary-whole-head --model phi4mini``): see docs/benchmarks.md. For a
full-width rotation (Qwen3) the same swap as a GEMM was measured no faster than
``rotate-half-sign-in-sin``'s doubled slice, so only the partial form is matched.

Matched on a concatenation along the last dim of ``a * c + swap * s'`` and ``b`` as above, in a
float dtype, the head width static, the tables of the head's dtype with R as their last dim, the
rotated part and its products read only there, and at most one symbolic dim in x and the tables.
Declined otherwise, with the reason.
"""

from __future__ import annotations

import attrs

from passes import PatternRewritePass, Rewriter
from passes.shape_ops_as_views import dims_product, view_size, view_to
from xir import Node, TensorType, Value
from xir.ops import aten

from ..ops import xir_ops
from ._base import _TORCH_DTYPES, RunStateRule
from .rope_as_pair_swap import write_swap_rotation
from .rotate_half_sign import last_dim_slice

# the head's pieces: slice_copy, or xir.slice as xnnpack.slices-as-xir-slices (before this pass) writes them
SLICES = (aten.slice_copy.Tensor, xir_ops.slice)


def _product(value: Value) -> tuple[Value, Value] | None:
    node = value.producer
    if node is None or node.op != aten.mul.Tensor or len(node.operands) != 2 or len(value.users) != 1:
        return None
    return tuple(node.operands)


def _swapped(value: Value, a: Value) -> bool:
    """``value`` is cat([a, a], -1)[..., h:h + R] (R: a's last dim, h = R / 2)."""
    piece = last_dim_slice(value, SLICES)
    if piece is None:
        return False
    doubled, start, end = piece
    cat = doubled.producer
    width = a.type.shape[-1]
    return (
        cat is not None
        and cat.op == aten.cat
        and len(cat.operands) == 2
        and all(v is a for v in cat.operands)
        and cat.attributes.get("dim", 0) % doubled.rank == doubled.rank - 1
        and (start, end) == (width // 2, width // 2 + width)
    )


def partial_rotary_whole_head(node: Node, rewriter: Rewriter, made: dict | None = None) -> bool:
    """cat([a*c + cat([a, a])[..., h:h+R]*s', b], -1) of a = x[..., :R], b = x[..., R:]
    => x*wide(c, 1) + swap(x)*wide(s', 0) (``made``: the widened tables and matrices made so far this run)."""
    made = {} if made is None else made
    y = node.result
    if len(node.operands) != 2 or not isinstance(y.type, TensorType) or y.dtype not in _TORCH_DTYPES:
        return rewriter.notify_match_failure(node, "not a float concatenation of two pieces")
    if node.attributes.get("dim", 0) % y.rank != y.rank - 1:
        return rewriter.notify_match_failure(node, "not along the last dim")
    rotated, passed = node.operands
    tail = last_dim_slice(passed, SLICES)
    if tail is None:
        return rewriter.notify_match_failure(node, "the second piece is not a last-dim slice")
    x, r, end = tail
    width = x.type.shape[-1]
    if end != width or not 0 < r < width or r % 2:
        return rewriter.notify_match_failure(node, "the second piece is not the end of the head after an even part")
    add = rotated.producer
    if add is None or add.op != aten.add.Tensor or add.attributes.get("alpha", 1) != 1 or len(add.operands) != 2:
        return rewriter.notify_match_failure(node, "the first piece is not a sum")
    if len(rotated.users) != 1 or rotated.is_graph_output():
        return rewriter.notify_match_failure(node, "the rotated part is read elsewhere too")
    products = [_product(v) for v in add.operands]
    if any(p is None for p in products):
        return rewriter.notify_match_failure(node, "not a sum of two products read only by it")
    found = None
    for first, second in (products, products[::-1]):
        for a, c in (first, first[::-1]):
            head = last_dim_slice(a, SLICES)
            if head is None or head != (x, 0, r):
                continue
            for swap, s in (second, second[::-1]):
                if _swapped(swap, a):
                    found = (c, s)
    if found is None:
        return rewriter.notify_match_failure(node, "not x[..., :R] * c + cat([x[..., :R]] * 2)[..., R/2:3R/2] * s")
    c, s = found
    for table in (c, s):
        if (
            not isinstance(table.type, TensorType)
            or table.dtype is not y.dtype
            or table.rank == 0
            or table.rank > x.rank
            or table.type.shape[-1] != r
        ):
            return rewriter.notify_match_failure(node, "a table is not of the head's dtype with R as its last dim")
    if any(view_size(v.type.shape) is None for v in (x, c, s)):
        return rewriter.notify_match_failure(node, "two or more symbolic dims (a view could not be written)")
    lead = tuple(x.type.shape[:-1])
    rows = dims_product(lead)
    flat = view_to(rewriter, node, x, TensorType(x.dtype, (rows, width)))
    swap = _swap_matrix(rewriter, width, r, x.dtype, made)
    cos, sin = _widened(rewriter, c, width, 1.0, made), _widened(rewriter, s, width, 0.0, made)
    return write_swap_rotation(rewriter, node, x, flat, swap, cos, sin)


def _swap_matrix(rewriter: Rewriter, width: int, r: int, dtype, made: dict) -> Value:
    """The ``width`` x ``width`` matrix swapping the halves of the first ``r`` dims (zero beyond),
    made once per (width, r, dtype) and run. It is symmetric, so ``x @ P`` swaps."""
    import torch

    key = ("swap", width, r, dtype)
    if key not in made:
        h = r // 2
        swap = torch.zeros(width, width)
        for j in range(h):
            swap[j + h, j] = swap[j, j + h] = 1.0
        made[key] = rewriter.add_constant(
            f"partial_rotary_swap_{r}_of_{width}",
            TensorType(dtype, (width, width)),
            swap.to(getattr(torch, _TORCH_DTYPES[dtype])),
        )
    return made[key]


def _widened(rewriter: Rewriter, table: Value, width: int, fill: float, made: dict) -> Value:
    """``table`` widened to ``width`` in its last dim with ``fill``: ``table @ E`` (E the R x W identity
    and zeros: one non-zero product per element, so the table's own numbers), plus ``fill`` on the new
    dims when it is not 0. Made once per table and run, placed right after the table, so q, k and
    every layer read one. (Not ``constant_pad_nd``: its fake implementation fixes a symbolic size.)"""
    import torch

    key = ("widened", id(table), width, fill)
    if key in made:
        return made[key]
    r, dtype = table.type.shape[-1], table.dtype
    torch_dtype = getattr(torch, _TORCH_DTYPES[dtype])
    if ("embed", r, width, dtype) not in made:
        made[("embed", r, width, dtype)] = rewriter.add_constant(
            f"partial_rotary_embed_{r}_in_{width}",
            TensorType(dtype, (r, width)),
            torch.eye(r, width, dtype=torch_dtype),
        )
    lead = tuple(table.type.shape[:-1])
    rows = dims_product(lead)
    nodes = [
        rewriter.create(
            aten.view_copy,
            [table],
            result_types=[TensorType(dtype, (rows, r))],
            attributes={"size": view_size((rows, r))},
        )
    ]
    nodes.append(rewriter.create(aten.mm, [nodes[-1].result, made[("embed", r, width, dtype)]]))
    shape = lead + (width,)
    nodes.append(
        rewriter.create(
            aten.view_copy,
            [nodes[-1].result],
            result_types=[TensorType(dtype, shape)],
            attributes={"size": view_size(shape)},
        )
    )
    if fill:
        if ("fill", r, width, fill, dtype) not in made:
            made[("fill", r, width, fill, dtype)] = rewriter.add_constant(
                f"partial_rotary_fill_{r}_in_{width}",
                TensorType(dtype, (width,)),
                torch.cat([torch.zeros(r), torch.full((width - r,), fill)]).to(torch_dtype),
            )
        nodes.append(rewriter.create(aten.add.Tensor, [nodes[-1].result, made[("fill", r, width, fill, dtype)]]))
    anchor = table.producer
    for node in nodes:
        if anchor is None:  # a graph input or constant: before the first node
            rewriter.insert_before(next(iter(rewriter.graph)), node)
        else:
            rewriter.insert_after(anchor, node)
        anchor = node
    made[key] = nodes[-1].result
    return made[key]


@attrs.frozen
class PartialRotaryWholeHead(PatternRewritePass):
    """A partial rotary embedding (rotate_half on the first R of W dims, the rest passed through) as
    x*wide(cos, 1) + swap(x)*wide(sin, 0) over the whole head: no slices or concatenations."""

    name = "xnnpack.partial-rotary-whole-head"
    # it matches rotate-half-sign-in-sin's form, on slices as xir.slice, with every layer's tables one
    # value after common-subexpression-elimination (widened once)
    runs_after = ("xnnpack.rotate-half-sign-in-sin", "xnnpack.slices-as-xir-slices", "common-subexpression-elimination")
    rules = (RunStateRule(partial_rotary_whole_head, aten.cat),)

    def patterns(self):
        return (RunStateRule(partial_rotary_whole_head, aten.cat),)
