"""``xnnpack.drop-leading-unit-dims``: compute without them the elementwise ops and softmaxes between a view that prepends size-1 dims to a tensor of two or more symbolic dims and the views that drop them again.

Attention exports its scores as ``bmm -> view (H, s, s) to (1, H, s, s) -> add the mask ->
softmax -> view back to (H, s, s) -> bmm``. With a dynamic length both views have two symbolic
sizes, which ExecuTorch's XNNPACK serializer cannot write (a reshape's sizes are integers, at most
one inferred), so they stay outside and split an encoder into a delegate per attention. Between
the views every op is elementwise (or a softmax over a later dim), so it computes the same at rank
3: the views go, the ops read the unviewed tensor, and an operand of the higher rank (the mask,
``(1, 1, s, s)``) is viewed down to it on its own (outside a delegate, where it is computed).
"""

from __future__ import annotations

import attrs

from passes import PatternRewritePass, Rewriter, rewrite_pattern
from passes.shape_ops_as_views import view_size
from xir import Node, TensorType, Value
from xir.ops import aten, family, has_trait

SOFTMAX = family("softmax")


def _tensor(value: Value) -> TensorType | None:
    return value.type if isinstance(value.type, TensorType) else None


def _symbol_values(views: list[Node]) -> dict:
    """symbol -> the int value a view's ``size`` gives it (``size=[1, 4, %0, %0]``)."""
    known = {}
    for view in views:
        for dim, size in zip(view.result.type.shape, view.attribute("size") or ()):
            if isinstance(size, Value) and not isinstance(dim, int):
                known.setdefault(dim, size)
    return known


def _region(start: Node, k: int):
    """The nodes that read ``start``'s result through elementwise ops and softmaxes, in graph
    order, and the views that drop its ``k`` leading unit dims; or a reason."""
    region, ends, seen, work = [], [], set(), [start.result]
    while work:
        value = work.pop()
        if value.is_graph_output():
            return "a value between the views is a graph output"
        for user in value.readers:
            if id(user) in seen:
                continue
            seen.add(id(user))
            result = _tensor(user.results[0]) if len(user.results) == 1 else None
            if result is None:
                return f"{user.op} is not an op of one tensor result"
            if user.op == aten.view_copy:
                if tuple(result.shape) != tuple(value.type.shape[k:]):
                    return f"a view to {result} is not the one that drops the unit dims"
                ends.append(user)
                continue
            if not (has_trait(user.op, "elementwise") or user.op in SOFTMAX):
                return f"{user.op} is not elementwise or a softmax"
            if result.rank != value.type.rank or any(d != 1 for d in result.shape[:k]):
                return f"{user.op} gives {result}"
            if user.op in SOFTMAX and user.attribute("dim") % result.rank < k:
                return "a softmax over a unit dim"
            if user.attributes.get("dim_order") not in (None, list(range(result.rank))):
                return f"{user.op} with the dim order {user.attributes['dim_order']}"
            region.append(user)
            work.append(user.results[0])
    if not ends:
        return "no view drops the unit dims again"
    return region, ends


@rewrite_pattern(aten.view_copy)
def drop_leading_unit_dims(node: Node, rewriter: Rewriter) -> bool:
    """view (H, s, s) -> (1, H, s, s), elementwise ops and softmaxes, views back to (H, s, s)
    => the ops at (H, s, s); an operand of theirs with the unit dims (a computed one) viewed to
    the lower rank first, a constant reshaped. Only where the first view has two or more
    symbolic sizes (a view XNNPACK cannot write)."""
    x, out = _tensor(node.input), _tensor(node.result)
    if x is None or out is None:
        return rewriter.notify_match_failure(node, "not a tensor view")
    k = out.rank - x.rank
    if k <= 0 or any(d != 1 for d in out.shape[:k]) or tuple(out.shape[k:]) != tuple(x.shape):
        return rewriter.notify_match_failure(node, "not a view that prepends size-1 dims")
    if view_size(out.shape) is not None:
        return rewriter.notify_match_failure(node, "a view XNNPACK writes (at most one symbolic size)")
    found = _region(node, k)
    if isinstance(found, str):
        return rewriter.notify_match_failure(node, found)
    region, ends = found
    inside = {id(node.result)} | {id(n.results[0]) for n in region}
    known = _symbol_values([node, *ends])
    # every operand from outside: of the lower rank already, a constant, or viewed down
    lifts = {}
    for user in region:
        for operand in user.operands:
            t = _tensor(operand)
            if id(operand) in inside or t is None or t.rank <= x.rank or id(operand) in lifts:
                continue
            extra = t.rank - x.rank
            if any(d != 1 for d in t.shape[:extra]):
                return rewriter.notify_match_failure(node, f"an operand {t} broadcasts over the unit dims")
            shape = tuple(t.shape[extra:])
            size = view_size(shape)
            if size is None:
                if not all(isinstance(d, int) or d in known for d in shape):
                    return rewriter.notify_match_failure(node, f"no size value for a symbolic dim of {t}")
                size = [d if isinstance(d, int) else known[d] for d in shape]
            lifts[id(operand)] = (operand, TensorType(t.dtype, shape), size)
    order = {id(n): i for i, n in enumerate(rewriter.graph)}
    region.sort(key=lambda n: order[id(n)])
    mapped = {id(node.result): node.input}
    for key, (operand, type_, size) in lifts.items():
        if operand.is_constant and operand.data is not None:
            mapped[key] = rewriter.add_constant(f"{operand.name}_dropped", type_, operand.data.reshape(type_.shape))
        else:
            reader = next(n for n in region if any(o is operand for o in n.operands))
            view = rewriter.create(aten.view_copy, [operand], [type_], {"size": size})
            mapped[key] = rewriter.insert_before(reader, view).result
    for user in region:
        attributes = dict(user.attributes)
        if user.op in SOFTMAX:
            dim = attributes["dim"]
            attributes["dim"] = dim - k if dim >= 0 else dim
        if attributes.get("dim_order") is not None:  # (the contiguous order, checked above)
            attributes["dim_order"] = list(range(len(attributes["dim_order"]) - k))
        t = user.results[0].type
        new = rewriter.create(
            user.op, [mapped.get(id(o), o) for o in user.operands], [TensorType(t.dtype, t.shape[k:])], attributes
        )
        mapped[id(user.results[0])] = rewriter.insert_before(user, new).result
    for end in ends:
        rewriter.replace_node(end, [mapped[id(end.input)]])
    for user in reversed(region):
        rewriter.erase(user)
    rewriter.erase(node)
    return True


@attrs.frozen
class DropLeadingUnitDims(PatternRewritePass):
    """Compute elementwise ops and softmaxes between a view prepending size-1 dims (to two or more
    symbolic ones) and the views dropping them without those dims: attention scores of a dynamic
    length stay 3-D, and their views (which XNNPACK cannot write) go."""

    name = "xnnpack.drop-leading-unit-dims"

    rules = (drop_leading_unit_dims,)
