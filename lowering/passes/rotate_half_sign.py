"""``xnnpack.rotate-half-sign-in-sin``: the Hugging Face rotary embedding's ``rotate_half`` as one
concatenation and one slice, its negation moved into the sine table.

Transformers' decoders (Llama, Qwen2/3, Gemma, Phi-3, ...) and ExecuTorch's LLM flow with
``use_hf_rope`` (its Qwen3, Phi-4-mini) rotate q and k as

    y = x * cos + cat([-x[..., h:], x[..., :h]], -1) * sin            (h = half the head dim)

which XNNPACK runs as two slices, a negation, a concatenation and three elementwise ops, per q and
per k of every layer. The negation is a sign that depends only on the position in the head, so it
can go into the table, which every layer and both of q and k share; and the swapped halves are the
middle of x written twice:

 => y = x * cos + cat([x, x], -1)[..., h:h + 2h] * (sin * [-1]*h + [1]*h)

two ops where there were four, the sign's product made once per table (``common-subexpression-
elimination`` then merges it across layers). Every result is the same number: ``(-a) * s`` and
``a * (-s)`` are the same float in any dtype, ``s * 1`` is ``s``, and the slice copies the same
elements. One layer's q and k rotations (8 and 2 heads of 32, one delegate; ``python
scripts/rope_pair_swap.py --hf``, median of 3,000 interleaved runs): 12.3 -> 11.4 us at one token,
18.2 -> 16.8 us at 7, 47.9 -> 45.4 us at 64, max error 0 against eager. (Of the forms tried in a
scratch measurement, the same slices concatenated without the negation were slower at every
length than the doubled concatenation.)

Matched on a concatenation along the last dim of two slices of one tensor, its upper half negated
first, in a float dtype, read only by multiplications (the tables); declined otherwise (a
concatenation that is also a graph output or read by another op keeps its negation), with the
reason.
"""

from __future__ import annotations

import attrs

from passes import PatternRewritePass, Rewriter
from xir import Node, TensorType, Value
from xir.ops import aten

from ..rules import slice_bounds
from ._base import _TORCH_DTYPES, RunStateRule
from .slices_as_xir_slices import slice_op


def last_dim_slice(value: Value, ops=(aten.slice_copy.Tensor,)) -> tuple[Value, int, int] | None:
    """``value`` is ``x[..., start:end]`` (step 1; one of ``ops``) of a last dim of static size:
    (x, start, end), the bounds in range (``lowering.rules.slice_bounds``)."""
    node = value.producer
    if node is None or node.op not in ops or node.attributes.get("step", 1) not in (None, 1):
        return None
    x = node.operands[0]
    bounds = slice_bounds(node)
    if bounds is None or bounds[0] != x.rank - 1 or not isinstance(x.type.shape[-1], int):
        return None
    return x, bounds[1], bounds[2]


def rotate_half_sign_in_sin(node: Node, rewriter: Rewriter, made: dict | None = None, enable_bf16: bool = True) -> bool:
    """cat([-x[..., h:], x[..., :h]], -1) * s => cat([x, x], -1)[..., h:3h] * (s * sign)
    (``made``: the sign constants and signed tables made so far in this run; the slice is the one
    ``slice_op`` gives, xir.slice at a symbolic length where XNNPACK takes it)."""
    made = {} if made is None else made
    y = node.result
    if len(node.operands) != 2 or not isinstance(y.type, TensorType) or y.dtype not in _TORCH_DTYPES:
        return rewriter.notify_match_failure(node, "not a float concatenation of two pieces")
    dim = node.attributes.get("dim", 0)
    if not isinstance(dim, int) or dim % y.rank != y.rank - 1:
        return rewriter.notify_match_failure(node, "not along the last dim")
    negated, lower = node.operands
    neg = negated.producer
    if neg is None or neg.op != aten.neg:
        return rewriter.notify_match_failure(node, "the first piece is not a negation")
    upper = neg.operands[0]
    a, b = last_dim_slice(upper), last_dim_slice(lower)
    if a is None or b is None or a[0] is not b[0]:
        return rewriter.notify_match_failure(node, "not two last-dim slices of one tensor")
    x, (_, h, end), (_, start, h_end) = a[0], a, b
    width = x.type.shape[-1]
    if start != 0 or h_end != h or end != width or 2 * h != width:
        return rewriter.notify_match_failure(node, "not the upper half then the lower half")
    if y.is_graph_output():
        return rewriter.notify_match_failure(node, "the rotated tensor is a graph output")
    if not y.users:
        return rewriter.notify_match_failure(node, "the rotated tensor is not read")
    for user in y.users:
        if user.op != aten.mul.Tensor or len(user.operands) != 2 or sum(v is y for v in user.operands) != 1:
            return rewriter.notify_match_failure(node, f"read by {user.op}, not only by products with a table")
        table = user.operands[1] if user.operands[0] is y else user.operands[0]
        if (
            not isinstance(table.type, TensorType)
            or table.dtype is not y.dtype
            or (table.rank and table.type.shape[-1] not in (1, width))
        ):
            return rewriter.notify_match_failure(node, "a product's table is not of the same dtype and head width")
    doubled = rewriter.op_before(node, aten.cat, [x, x], dim=dim)
    op, bounds = slice_op(doubled.type, y.rank - 1, h, h + width, enable_bf16=enable_bf16)
    swapped = rewriter.op_before(node, op, [doubled], **bounds)
    for user in list(y.users):
        index = 0 if user.operands[0] is y else 1
        table = user.operands[1 - index]
        rewriter.set_operand(user, index, swapped)
        rewriter.set_operand(user, 1 - index, _signed(rewriter, table, width, made))
    rewriter.erase(node)
    return True


def _signed(rewriter: Rewriter, table: Value, width: int, made: dict) -> Value:
    """``table * [-1]*h + [1]*h``, made once per table and run, placed right after the table
    (``made["signs"]``: the sign constant of each width and dtype; ``made["tables"]``: the signed
    table of each table and width)."""
    import torch

    signs, tables = made.setdefault("signs", {}), made.setdefault("tables", {})
    dtype = table.dtype
    if (width, dtype) not in signs:
        sign = torch.cat([-torch.ones(width // 2), torch.ones(width // 2)]).to(getattr(torch, _TORCH_DTYPES[dtype]))
        signs[(width, dtype)] = rewriter.add_constant(f"rotate_half_sign_{width}", TensorType(dtype, (width,)), sign)
    key = (id(table), width)
    if key not in tables:
        anchor = table.producer
        node = rewriter.create(aten.mul.Tensor, [table, signs[(width, dtype)]])
        if anchor is None:  # a graph input or constant: before the first node
            rewriter.insert_before(next(iter(rewriter.graph)), node)
        else:
            rewriter.insert_after(anchor, node)
        tables[key] = node.result
    return tables[key]


@attrs.frozen
class RotateHalfSignInSin(PatternRewritePass):
    """rotate_half as cat([x, x])[..., h:3h], its negation moved into the sine table (sin * sign): two
    ops where there were four per q and k rotation, the same numbers."""

    name = "xnnpack.rotate-half-sign-in-sin"
    rules = (RunStateRule(rotate_half_sign_in_sin, aten.cat),)
    enable_bf16: bool = True  # (set from the partitioner's: a bf16 slice it makes is xir.slice only with it)

    def patterns(self):
        enable_bf16 = self.enable_bf16

        def rotate_half_sign_in_sin_rule(node: Node, rewriter: Rewriter, made: dict) -> bool:
            return rotate_half_sign_in_sin(node, rewriter, made, enable_bf16)

        rotate_half_sign_in_sin_rule.__name__ = rotate_half_sign_in_sin.__name__  # (the name its counts are kept under)
        rotate_half_sign_in_sin_rule.__doc__ = rotate_half_sign_in_sin.__doc__
        return (RunStateRule(rotate_half_sign_in_sin_rule, aten.cat),)
