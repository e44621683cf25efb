"""remove-no-ops: drop views, permutes, copies and conversions that change nothing, and fold
chains of views and of permutes. Graphs from torch.export are full of them. (A backend whose
preprocessing reads some of them keeps those with a variant of its own.)"""

from __future__ import annotations

import attrs

from xir import DType, Node, TensorType, Value
from xir.ops import aten, family, ops_with

from .rewriter import PatternRewritePass, Rewriter, rewrite_pattern

SHAPE_ONLY_OPS = (
    aten.view_copy,
    aten.view,
    aten.reshape,
    aten._unsafe_view,
    aten.expand_copy,
    aten.alias_copy,
    aten.clone,
    aten.squeeze_copy.dims,
    aten.squeeze_copy.dim,
    aten.unsqueeze_copy,
    aten.contiguous,
)
VIEW_OPS = family("reshape")
PERMUTE_OPS = (aten.permute_copy, aten.permute)
CONVERT_OPS = family("cast")


def bypass(node: Node, rewriter: Rewriter, source=None) -> bool:
    """Replace ``node`` by its operand (``source``: its ``input``), unless that would make a graph
    input a graph output."""
    source = node.input if source is None else source
    if node.results[0].is_graph_output() and (source.is_input or source.is_graph_output()):
        return rewriter.notify_match_failure(
            node, "its result is a graph output and its operand is an input or output already"
        )
    rewriter.replace_node(node, [source])
    return True


def layout_change(node: Node) -> str | None:
    """How a copy or conversion changes its tensor's layout (dim order, memory format), or None."""
    dim_order = node.attributes.get("dim_order")
    if dim_order is not None and list(dim_order) != list(range(node.results[0].rank)):
        return f"changes the dim order to {dim_order}"
    memory_format = node.attributes.get("memory_format")
    if memory_format is not None and memory_format.name not in ("preserve_format", "contiguous_format"):
        return f"changes the memory format to {memory_format.name}"
    return None


def _same_type(node: Node) -> bool:
    """The result has the operand's exact type (a symbolic dim is the same symbol in both)."""
    source, result = node.input.type, node.results[0].type
    return isinstance(source, TensorType) and source == result


@rewrite_pattern(*SHAPE_ONLY_OPS)
def drop_identity_reshape(node: Node, rewriter: Rewriter) -> bool:
    """A view/expand/clone whose result has the operand's exact type."""
    if not node.operands or not _same_type(node):
        return rewriter.notify_match_failure(node, "changes the type")
    return bypass(node, rewriter)


@rewrite_pattern(*PERMUTE_OPS)
def drop_identity_permute(node: Node, rewriter: Rewriter) -> bool:
    dims = node.attributes.get("dims")
    if dims != list(range(node.results[0].rank)):
        return rewriter.notify_match_failure(node, f"dims {dims} is not the identity")
    return bypass(node, rewriter)


@rewrite_pattern(*CONVERT_OPS)
def drop_identity_convert(node: Node, rewriter: Rewriter) -> bool:
    if not _same_type(node):
        return rewriter.notify_match_failure(node, "changes the dtype")
    change = layout_change(node)
    if change:
        return rewriter.notify_match_failure(node, change)
    return bypass(node, rewriter)


@rewrite_pattern(*VIEW_OPS)
def fold_view_of_view(node: Node, rewriter: Rewriter) -> bool:
    """view(view(x)) -> view(x): only the element count matters to a view."""
    inner = node.input.producer
    if inner is None or inner.op not in VIEW_OPS:
        return rewriter.notify_match_failure(node, "its operand is not a view")
    rewriter.set_operand(node, 0, inner.input)
    return True


@rewrite_pattern(*PERMUTE_OPS)
def fold_permute_of_permute(node: Node, rewriter: Rewriter) -> bool:
    """permute(permute(x, a), b) -> permute(x, [a[i] for i in b])."""
    inner = node.input.producer
    if inner is None or inner.op not in PERMUTE_OPS:
        return rewriter.notify_match_failure(node, "its operand is not a permute")
    inner_dims, outer_dims = inner.attributes["dims"], node.attributes["dims"]
    rank = len(inner_dims)
    composed = [inner_dims[d % rank] % rank for d in outer_dims]
    rewriter.set_operand(node, 0, inner.input)
    rewriter.set_attribute(node, "dims", composed)
    return True


# dtypes each dtype converts to and back without loss (every value of the first is one of the second)
_WIDER = {"bf16": ("f32", "f64"), "f16": ("f32", "f64"), "f32": ("f64",)}


@rewrite_pattern(*CONVERT_OPS)
def drop_widen_then_narrow_back(node: Node, rewriter: Rewriter) -> bool:
    """cast(cast(x, wider), x.dtype) -> x: bf16 -> f32 -> bf16 gives x back exactly."""
    inner = node.input.producer
    if inner is None or inner.op not in CONVERT_OPS:
        return rewriter.notify_match_failure(node, "its operand is not a conversion")
    source, middle, result = inner.input.type, inner.results[0].type, node.results[0].type
    if not all(isinstance(t, TensorType) for t in (source, middle, result)) or result != source:
        return rewriter.notify_match_failure(node, "does not convert back to the type it started from")
    if middle.dtype.name not in _WIDER.get(source.dtype.name, ()):
        return rewriter.notify_match_failure(node, f"{source.dtype.name} -> {middle.dtype.name} may lose information")
    if layout_change(node) or layout_change(inner):
        return rewriter.notify_match_failure(node, "changes the layout")
    return bypass(node, rewriter, inner.input)


def _empty(value) -> bool:
    """No elements: a dim of size 0 (whatever the symbolic ones are)."""
    return isinstance(value.type, TensorType) and any(d == 0 for d in value.type.shape if isinstance(d, int))


@rewrite_pattern(aten.cat)
def drop_empty_cat_inputs(node: Node, rewriter: Rewriter) -> bool:
    """cat drops its empty inputs (a rotary embedding's pass-through part when it rotates the whole
    head); a cat of one tensor is that tensor."""
    kept = [v for v in node.operands if not _empty(v)]
    if not kept:
        return rewriter.notify_match_failure(node, "every input is empty")
    if len(kept) == 1:
        result = node.results[0].type
        if kept[0].type != result or not isinstance(result, TensorType):
            return rewriter.notify_match_failure(node, "its one non-empty input has another type than its result")
        return bypass(node, rewriter, kept[0])
    if len(kept) == len(node.operands):
        return rewriter.notify_match_failure(node, "no empty inputs")
    rewriter.set_operands(node, kept)
    return True


IDENTITY_OPS = tuple(sorted(ops_with("identity")))


def _filled_with(node: Node, argument: str, number) -> bool:
    """Whether the operand ``argument`` is a constant tensor every element of which is ``number``
    (an attention mask of zeros that constant folding made of a mask with nothing masked)."""
    if not node.definition.has_operand(argument):
        return False
    value = node.operand(argument)
    if (
        not isinstance(value, Value)
        or not value.is_constant
        or value.data is None
        or not isinstance(value.type, TensorType)
    ):
        return False
    if value.type.numel() == 0 or value.dtype is DType.bool:
        return False
    data = value.data  # (numpy or torch alike)
    return bool(data.reshape(-1)[0] == number) and bool((data == number).all())  # (the first element: a quick no)


@rewrite_pattern(*IDENTITY_OPS)
def drop_identity_operation(node: Node, rewriter: Rewriter) -> bool:
    """x * 1, 1 * x, x + 0, x - 0, x / 1, x ** 1 -> x: by the identity elements of the op's
    definition (``OpDef.identity``), read with ``node.scalar`` however the number is spelt (an
    attribute, or a one-element constant), or a constant tensor of that number in every element
    (a folded all-zero attention mask). Only where the result is x's type exactly (no broadcast
    to a larger shape, no type promotion). One difference stays: where x is -0.0, x + 0 is +0.0
    and the result of the rewrite -0.0, equal numbers that only a sign test or a division by
    them tells apart."""
    for argument, neutral in node.definition.identity.items():
        value = node.scalar(argument)
        if value is None and _filled_with(node, argument, neutral):
            value = neutral
        if value is None or value != neutral or isinstance(value, bool):
            continue
        kept = node.operand("other" if argument == "input" else "input")
        if kept is not None and kept.type == node.results[0].type:
            return bypass(node, rewriter, kept)
    return rewriter.notify_match_failure(
        node, "no operand is the op's identity element, or the result is not the other's type"
    )


@attrs.frozen
class RemoveNoOps(PatternRewritePass):
    """Drop no-op views, permutes, copies and conversions (also a widening conversion converted
    back), operations by an identity element (x * 1, x + 0) and the empty inputs of cats; fold view and permute chains."""

    name = "remove-no-ops"

    rules = (
        drop_identity_reshape,
        drop_identity_permute,
        drop_identity_convert,
        fold_view_of_view,
        fold_permute_of_permute,
        drop_empty_cat_inputs,
        drop_widen_then_narrow_back,
        drop_identity_operation,
    )
