"""``xnnpack.merge-head-chains``: two tensors split into heads that then go through the same ops
(Qwen3's q and k: a per-head RMSNorm, then the rotary embedding) go through them once, as one
tensor of both sets of heads.

A decoder layer of Qwen3 (and of every model with q/k norms) computes, for q [.., s, 8, 64] and
k [.., s, 4, 64],

    q' = rope(rmsnorm(q) * wq)        k' = rope(rmsnorm(k) * wk)

with the same ops, the same rotary tables (broadcast over the heads) and norm weights that differ
only per head. Inside an XNNPACK delegate each op costs about a tenth of a microsecond or more of
setup whatever its size at one token (the delegate reshapes and sets up every op on every call;
``scripts/delegate_op_cost.py``), and the norm's mean (a fully connected op) about half a
microsecond, so the decode step pays for both chains in full. Merged:

    qk = cat([q, k], head dim);  qk' = rope(rmsnorm(qk) * [wq x 8 heads; wk x 4 heads])
    q' = qk'[.., :8, :];  k' = qk'[.., 8:, :]

one chain of twice the rows, a concatenation and two slices where there were two chains.

Every element is the same number: each op of the chain is separable over the head dim (elementwise
ops whose other operands do not vary over the heads, a linear over the last dim, a concatenation
or a slice along the last dim), so each row of the merged chain computes what the same row of its
own chain computed, with the same operands; a per-branch constant (the norm weights) becomes one
constant with each head's row, and two equal constants (the eps) become one.

Matched on a pair of tensors of one dtype and rank >= 3 whose shapes differ at most in the second
last dim (the heads), neither computed from the other, read by chains of the same ops with the
same attributes (found in lockstep in program order; the chain ends where the two differ), at
least ``min_ops`` ops long. Declined with the reason: a chain shorter than that, a reader of a
chain's value that comes before the merged chain could be placed, ops that mix the heads.
"""

from __future__ import annotations

from typing import Any

import attrs

from passes.common_subexpressions import _key
from passes.pass_base import Pass
from passes.rewriter import Rewriter
from xir import Graph, Node, TensorType, Value
from xir.ops import aten, xir_ops

# ops computed independently per position of every dim but the ones their attributes name
_ELEMENTWISE = frozenset(str(op) for op in (
    aten.add.Tensor, aten.sub.Tensor, aten.mul.Tensor, aten.div.Tensor, aten.rsqrt, aten.sqrt, aten.neg,
    aten.sigmoid, aten.tanh, aten.exp, aten.relu, aten.abs, aten.reciprocal, aten.clamp, aten.hardtanh,
    aten.pow.Tensor_Scalar, aten.square, xir_ops.convert,
))
_LAST_DIM = frozenset(str(op) for op in (aten.cat, aten.slice_copy.Tensor, xir_ops.slice))


def _dims_equal(a: Any, b: Any) -> bool:
    return a is b or (type(a) is type(b) and a == b)


def _separable(node: Node, rank: int) -> str | None:
    """Why ``node`` does not compute each head of its ``rank``-D tensor operands on its own, or None."""
    op = str(node.op)
    if len(node.results) != 1 or not isinstance(node.result.type, TensorType) or node.result.rank != rank:
        return "not one tensor of the chain's rank"
    if op in _ELEMENTWISE:
        return None
    if op == str(aten.linear):
        return None if all(v.is_constant for v in node.operands[1:]) else "a linear with a computed weight"
    if op in _LAST_DIM:
        dim = node.attributes.get("dim", 0)
        return None if isinstance(dim, int) and dim % rank == rank - 1 else "not along the last dim"
    return f"{node.op} may mix the heads"


def _equal_constants(a: Value, b: Value) -> bool:
    import torch

    return (a.type == b.type and isinstance(a.data, torch.Tensor) and isinstance(b.data, torch.Tensor)
            and a.data.dtype == b.data.dtype and bool(torch.equal(a.data, b.data)))


def _per_head(value: Value, out: TensorType, heads: int) -> Any:
    """``value``'s data as rows of the head dim: a [heads, width] tensor, or None when ``value``
    (an operand of an elementwise op with result type ``out``) varies over more than the last dim."""
    import torch

    shape = value.type.shape
    if not isinstance(value.data, torch.Tensor) or len(shape) > out.rank:
        return None
    if len(shape) >= 2 and any(d != 1 for d in shape[:-1]):
        return None
    width = shape[-1] if shape else 1
    if width not in (1, out.shape[-1]):
        return None
    return value.data.reshape(1, width).expand(heads, width)


@attrs.frozen
class MergeHeadChains(Pass):
    """Run the same per-head chains of two head-split tensors (Qwen3's q and k norms and rotary
    embeddings) once, on their heads concatenated: the same numbers, fewer ops."""

    name = "xnnpack.merge-head-chains"
    min_saved: int = 2

    def run(self, graph: Graph) -> bool:
        rewriter = Rewriter(graph)
        failures: list[str] = []
        object.__setattr__(self, "last_failures", failures)  # (a frozen pass: why each pair was declined, for tests and reports)
        done: set[int] = set()
        changed = False
        for first, second in _candidates(graph):
            if id(first) in done or id(second) in done:
                continue
            merged = self._merge(graph, rewriter, first, second)
            if isinstance(merged, str):
                failures.append(f"{first.describe()} and {second.describe()}: {merged}")
                continue
            done.update(merged)
            changed = True
        return changed

    def _merge(self, graph: Graph, rewriter: Rewriter, a0: Value, b0: Value) -> set[int] | str:
        """Merge the chains of ``a0`` and ``b0``: the ids of the values it merged, or why not."""
        rank, heads_a, heads_b = a0.rank, a0.type.shape[-2], b0.type.shape[-2]
        if not (isinstance(heads_a, int) and isinstance(heads_b, int)):
            return "a symbolic number of heads"
        nodes, order = graph.nodes, graph.order()
        position = {id(v): order[id(v.producer)] if v.producer is not None else -1 for v in (a0, b0)}
        after_a, after_b = _descendants(nodes, a0), _descendants(nodes, b0)
        if id(b0) in after_a or id(a0) in after_b:
            return "one is computed from the other"
        pair: dict[int, Value] = {id(a0): b0}  # a value of the first chain -> the second's
        matched: list[tuple[Node, Node]] = []
        taken: set[int] = set()
        place = max(position.values())  # -1: both are graph inputs
        for node in nodes[min(position.values()) + 1:]:
            if node.is_return or not any(id(v) in pair for v in node.operands):
                continue
            other = _counterpart(node, pair, taken, after_a, after_b, rank, heads_a, heads_b)
            if other is None:
                continue
            matched.append((node, other))
            taken.add(id(other))
            pair[id(node.result)] = other.result
            for v in node.operands:  # the merged chain goes after every value it reads from outside
                if id(v) not in pair and v.producer is not None:
                    place = max(place, order[id(v.producer)])
        in_chain = {id(n) for n, _ in matched} | {id(o) for _, o in matched}
        exits: list[tuple[Node, Value, int]] = []  # (first chain's node, a value read outside, head offset)
        for node, other in matched:
            for value, offset in ((node.result, 0), (other.result, heads_a)):
                outside = [u for u in value.users if id(u) not in in_chain]
                if any(not u.is_return and order[id(u)] <= place for u in outside):
                    return f"{value.describe()} is read before the merged chain could run"
                if outside:
                    exits.append((node, value, offset))
        saved = len(matched) - 1 - len(exits)
        if saved < self.min_saved:
            return f"merging {len(matched)} ops would save {saved} (a concatenation and {len(exits)} slices)"
        anchor = nodes[place] if place >= 0 else None

        def put(op, operands, **attributes) -> Value:
            nonlocal anchor
            node = rewriter.create(op, operands, attributes=attributes)
            if anchor is None:
                rewriter.insert_before(nodes[0], node)
            else:
                rewriter.insert_after(anchor, node)
            anchor = node
            return node.result

        head_dim = rank - 2
        made = {id(a0): put(aten.cat, [a0, b0], dim=head_dim)}
        for node, other in matched:
            operands = []
            for x, y in zip(node.operands, other.operands):
                if id(x) in made:
                    operands.append(made[id(x)])
                elif x is y or _equal_constants(x, y):
                    operands.append(x)
                else:  # per-branch constants (checked by _counterpart): one row per head
                    operands.append(_heads_constant(rewriter, x, y, node.result.type, heads_a, heads_b))
            made[id(node.result)] = put(node.op, operands, **dict(node.attributes))
        symbolic = any(not isinstance(d, int) for d in a0.type.shape)
        for node, value, offset in exits:
            bounds = {"dim": head_dim, "start": offset, "end": offset + value.type.shape[-2]}
            piece = (put(xir_ops.slice, [made[id(node.result)]], **bounds) if symbolic
                     else put(aten.slice_copy.Tensor, [made[id(node.result)]], **bounds, step=1))
            rewriter.replace_all_uses(value, piece)
        for node, other in reversed(matched):
            for dead in (other, node):
                if not dead.result.uses:
                    rewriter.erase(dead)
        return {id(a0), id(b0)} | {id(n.result) for n, _ in matched} | {id(o.result) for _, o in matched}


def _candidates(graph: Graph) -> list[tuple[Value, Value]]:
    """Pairs of head-split tensors in program order: results of the same op, one dtype, rank >= 4,
    shapes equal but for the heads (the second last dim), each read."""
    groups: dict[Any, list[Value]] = {}
    values = [v for v in graph.inputs if not v.is_constant]
    values += [node.result for node in graph if not node.is_return and len(node.results) == 1]
    for value in values:
        node = value.producer
        if not isinstance(value.type, TensorType) or value.rank < 4 or not value.readers:
            continue
        shape = value.type.shape
        key = (str(node.op) if node is not None else "input", value.dtype, value.rank, tuple(_key(d) for d in shape[:-2]), _key(shape[-1]))
        groups.setdefault(key, []).append(value)
    return [(a, b) for values in groups.values() for i, a in enumerate(values) for b in values[i + 1:]]


def _counterpart(node: Node, pair: dict[int, Value], taken: set[int], after_a: set[int], after_b: set[int],
                 rank: int, heads_a: int, heads_b: int) -> Node | None:
    """The second chain's node that computes for its heads what ``node`` computes for the first's."""
    if _separable(node, rank) is not None or node.result.type.shape[-2] != heads_a:
        return None
    mapped = next(pair[id(v)] for v in node.operands if id(v) in pair)
    second = {id(v) for v in pair.values()}
    for other in mapped.readers:
        if (id(other) in taken or other is node or other.op != node.op or len(other.operands) != len(node.operands)
                or len(other.results) != 1 or _key(dict(other.attributes)) != _key(dict(node.attributes))):
            continue
        out_a, out_b = node.result.type, other.result.type
        if (not isinstance(out_b, TensorType) or out_a.dtype is not out_b.dtype or out_b.rank != rank
                or out_b.shape[-2] != heads_b
                or not all(_dims_equal(x, y) for i, (x, y) in enumerate(zip(out_a.shape, out_b.shape)) if i != rank - 2)):
            continue
        if _operands_match(node, other, pair, second, after_a, after_b):
            return other
    return None


def _operands_match(node: Node, other: Node, pair: dict[int, Value], second: set[int], after_a: set[int],
                    after_b: set[int]) -> bool:
    """Whether each operand of ``other`` is the counterpart of ``node``'s: the second chain's value for a
    first chain's, the same value where it does not vary over the heads, or a constant that is equal
    or varies only over the last dim (an elementwise op's per-branch weight)."""
    elementwise = str(node.op) in _ELEMENTWISE
    out = node.result.type
    for x, y in zip(node.operands, other.operands):
        if id(x) in pair:
            if pair[id(x)] is not y:
                return False
            continue
        if id(y) in second or id(x) in after_a or id(x) in after_b or id(y) in after_a or id(y) in after_b:
            return False  # reads the other chain, or a value computed from either tensor
        if not isinstance(x.type, TensorType) or not isinstance(y.type, TensorType):
            if x is not y:
                return False
            continue
        if elementwise and (x.rank > out.rank or (x.rank >= 2 and x.type.shape[-2] != 1)):
            return False  # varies over the heads (or broadcasts the chain up)
        if x is y or (x.is_constant and y.is_constant and _equal_constants(x, y)):
            continue
        if not (elementwise and x.is_constant and y.is_constant and x.dtype is y.dtype):
            return False
        if _per_head(x, out, 1) is None or _per_head(y, other.result.type, 1) is None:
            return False
    return True


def _heads_constant(rewriter: Rewriter, x: Value, y: Value, out: TensorType, heads_a: int, heads_b: int) -> Value:
    """One constant of ``heads_a`` rows of ``x`` and ``heads_b`` rows of ``y``: [heads, width]."""
    import torch

    data = torch.cat([_per_head(x, out, heads_a), _per_head(y, out, heads_b)]).contiguous()
    return rewriter.add_constant(f"{x.name or 'weight'}_by_head", TensorType(x.dtype, tuple(data.shape)), data)


def _descendants(nodes: list[Node], value: Value) -> set[int]:
    """The ids of ``value`` and of every value computed from it."""
    seen = {id(value)}
    for node in nodes:
        if any(id(v) in seen for v in node.operands):
            seen.update(id(r) for r in node.results)
    return seen
