"""shape-ops-as-views: ``unsqueeze``, ``squeeze`` and an ``expand`` that adds no elements only
change a tensor's shape; each is a ``view_copy`` to its result shape, which backends run as
a reshape. Decoder LLM exports are full of them (attention masks,
rotary embeddings, KV-cache heads).

With a dynamic shape (a dim is a ``Symbol``) the view's size is written with ``-1`` in place of
the one symbolic dim (PyTorch, and a backend's reshape, infer it from the element count): exact for
every run-time size, as long as no other dim is 0 (then -1 is ambiguous). A view whose size is
computed at run time (``view_copy(x) {size=[1, %s, 4, 8]}``, ``%s`` a ``sym_size``) is rewritten
the same way, so its size is all integers. Two or more symbolic dims: left as it is."""

from __future__ import annotations

import math

import attrs

from xir import Node, Symbol, TensorType, Value
from xir.ops import aten

from .rewriter import PatternRewritePass, Rewriter, rewrite_pattern

SHAPE_OPS = (aten.unsqueeze_copy, aten.squeeze_copy.dims, aten.squeeze_copy.dim, aten.squeeze_copy, aten.expand_copy)


def view_size(shape) -> list[int] | None:
    """The ``size`` of a ``view_copy`` to ``shape`` written with integers only: the shape itself
    when static, with -1 for its one symbolic dim when it has one (and no 0 elsewhere, which would
    make the -1 ambiguous); None when it has two or more symbolic dims."""
    symbolic = [i for i, d in enumerate(shape) if not isinstance(d, int)]
    if not symbolic:
        return list(shape)
    if len(symbolic) > 1 or any(d == 0 for d in shape if isinstance(d, int)):
        return None
    return [d if isinstance(d, int) else -1 for d in shape]


def symbolic_product(dims) -> Symbol:
    """The product of ``dims`` (one at least symbolic) as a symbol, e.g. ``2*s0`` or ``3*(s0+1)``:
    the type of a dim that a view with -1 merges them into."""
    factors = [str(d) for d in dims if d != 1]
    return Symbol("*".join(f if f.isalnum() else f"({f})" for f in factors))


def dims_product(dims) -> int | Symbol:
    """The product of ``dims``: an int when all are static, else a symbol (:func:`symbolic_product`),
    the dim a view with -1 merges them into."""
    return math.prod(dims) if all(isinstance(d, int) for d in dims) else symbolic_product(dims)


def view_to(rewriter: Rewriter, anchor: Node, x: Value, result: TensorType) -> Value | None:
    """A ``view_copy`` of ``x`` to ``result`` (one symbolic dim at most, written -1), placed before
    ``anchor``; None (nothing made) when ``result`` has two or more symbolic dims."""
    size = view_size(result.shape)
    if size is None:
        return None
    # (with a symbolic input and a -1 the definition cannot infer the result type: it is given)
    node = rewriter.create(aten.view_copy, [x], result_types=[result], attributes={"size": size})
    return rewriter.insert_before(anchor, node).result


def _adds_no_elements(source: TensorType, result: TensorType) -> bool:
    """An expand from ``source`` to ``result`` copies no element: the same element count (static),
    or (symbolic) the same dims after the new leading dims, which are all 1."""
    if source.is_static and result.is_static:
        return source.numel() == result.numel()
    lead = result.rank - source.rank
    return lead >= 0 and all(d == 1 for d in result.shape[:lead]) and tuple(result.shape[lead:]) == tuple(source.shape)


@rewrite_pattern(*SHAPE_OPS)
def shape_op_as_view(node: Node, rewriter: Rewriter) -> bool:
    """unsqueeze/squeeze/no-op expand => view_copy to the result shape (-1 for a symbolic dim)."""
    source, result = node.input.type, node.result.type
    if not isinstance(source, TensorType) or not isinstance(result, TensorType):
        return rewriter.notify_match_failure(node, "not a tensor")
    if node.op == aten.expand_copy and not _adds_no_elements(source, result):
        return rewriter.notify_match_failure(node, "an expand that repeats elements (not a reshape)")
    if view_size(result.shape) is None:
        return rewriter.notify_match_failure(node, "two or more symbolic dims (a view infers one)")
    rewriter.replace_node(node, [view_to(rewriter, node, node.input, result)])
    return True


@rewrite_pattern(aten.view_copy)
def symbolic_view_size(node: Node, rewriter: Rewriter) -> bool:
    """view_copy(x) {size=[1, %s, 4, 8]} (a size computed at run time) => {size=[1, -1, 4, 8]}:
    its result has one symbolic dim, which the -1 infers."""
    size, result = node.attribute("size"), node.result.type
    if not isinstance(size, list) or all(isinstance(d, int) for d in size):
        return rewriter.notify_match_failure(node, "its size is integers")
    if not isinstance(result, TensorType) or len(size) != result.rank:
        return rewriter.notify_match_failure(node, "not a tensor of its size's rank")
    new = view_size(result.shape)
    if new is None:
        return rewriter.notify_match_failure(node, "two or more symbolic dims (a view infers one)")
    rewriter.set_attribute(node, "size", new)
    return True


@attrs.frozen
class ShapeOpsAsViews(PatternRewritePass):
    """Rewrite unsqueeze, squeeze and element-preserving expand as view_copy, and a view's
    run-time sizes as -1 (one symbolic dim at most)."""

    name = "shape-ops-as-views"

    rules = (shape_op_as_view, symbolic_view_size)
