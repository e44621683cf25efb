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
from passes.rewriter import KeepsStats, Rewriter, RewriteStats
from xir import Graph, Node, TensorType, Value
from xir.ops import aten
from xir.types import Symbol

from ..capability.linears import same_dim
from ..ops import xir_ops
from ..rules import slice_bounds
from .slices_as_xir_slices import slice_op

# ops computed independently per position of every dim but the ones their attributes name
_ELEMENTWISE = frozenset(
    str(op)
    for op in (
        aten.add.Tensor,
        aten.sub.Tensor,
        aten.mul.Tensor,
        aten.div.Tensor,
        aten.rsqrt,
        aten.sqrt,
        aten.neg,
        aten.sigmoid,
        aten.tanh,
        aten.exp,
        aten.relu,
        aten.abs,
        aten.reciprocal,
        aten.clamp,
        aten.hardtanh,
        aten.pow.Tensor_Scalar,
        aten.square,
        xir_ops.convert,
    )
)
_ALONG_A_DIM = frozenset(str(op) for op in (aten.cat, aten.slice_copy.Tensor, xir_ops.slice))
_VIEW, _LINEAR, _MM = str(aten.view_copy), str(aten.linear), str(aten.mm)
_XIR_SLICE, _SLICE_COPY = str(xir_ops.slice), str(aten.slice_copy.Tensor)
RULE = "merge_head_chains"  # the name its merges and declines are counted under in last_stats
ROWS = "rows"  # the layout of a value whose rows are the chain's leading dims (heads included) flattened


def _equal_constants(a: Value, b: Value) -> bool:
    import torch

    return (
        a.type == b.type
        and isinstance(a.data, torch.Tensor)
        and isinstance(b.data, torch.Tensor)
        and a.data.dtype == b.data.dtype
        and bool(torch.equal(a.data, b.data))
    )


def _per_head(value: Value, out: TensorType, heads: int, dim: int) -> Any:
    """``value``'s data (an operand of an elementwise op with result type ``out``) as ``heads`` rows
    of what it holds past the head dim ``dim``: a [heads, *rest] tensor that broadcasts as ``value``
    did, or None when ``value`` varies over the head dim or before it."""
    import torch

    if not isinstance(value.data, torch.Tensor) or value.rank > out.rank:
        return None
    rest = out.rank - 1 - dim  # dims after the head dim
    shape = tuple(value.type.shape)
    inner = shape[-rest:] if rest else ()
    if len(shape) > rest and any(d != 1 for d in shape[: len(shape) - rest]):
        return None
    inner = (1,) * (rest - len(inner)) + tuple(inner)
    return value.data.reshape((1,) + inner).expand((heads,) + inner)


@attrs.frozen
class MergeHeadChains(KeepsStats, Pass):
    """Run the same per-head chains of two head-split tensors (Qwen3's q and k norms and rotary
    embeddings, Llama's q and k rotations) once, on their heads concatenated: the same numbers,
    fewer ops."""

    name = "xnnpack.merge-head-chains"
    # q's and k's heads are adjacent slices of one stacked linear, their chains read the same shared
    # (converted) tables, and the rope rewrites' dead leftovers no longer read the chains
    runs_after = ("xnnpack.fuse-sibling-linears", "common-subexpression-elimination", "dead-code-elimination")
    min_saved: int = 2
    enable_bf16: bool = True  # (set from the partitioner's: a bf16 slice it makes is xir.slice only with it)

    def run(self, graph: Graph) -> bool:
        rewriter = Rewriter(graph)
        stats = RewriteStats()  # last_stats: merges fired, and why each pair was declined
        done: set[int] = set()
        for first, second in _candidates(graph):
            if id(first) in done or id(second) in done:
                continue
            merged = self._merge(graph, rewriter, first, second)
            if isinstance(merged, str):
                stats.declined.setdefault(RULE, []).append(f"{first.describe()} and {second.describe()}: {merged}")
                continue
            done.update(merged)
            stats.fired[RULE] += 1
        self.keep_stats(stats)
        return stats.changed

    def _merge(self, graph: Graph, rewriter: Rewriter, a0: Value, b0: Value) -> set[int] | str:
        """Merge the chains of ``a0`` and ``b0``: the ids of the values it merged, or why not."""
        differ = [i for i, (x, y) in enumerate(zip(a0.type.shape, b0.type.shape)) if not same_dim(x, y)]
        if len(differ) > 1:
            return "the shapes differ in more than one dim"
        dim = differ[0] if differ else a0.rank - 2
        if dim == a0.rank - 1:
            return "the shapes differ in the last dim"
        heads_a, heads_b = a0.type.shape[dim], b0.type.shape[dim]
        if not (isinstance(heads_a, int) and isinstance(heads_b, int)):
            return "a symbolic number of heads"
        nodes, order = graph.nodes, graph.order()
        chains = _Chains(a0, b0, dim, _descendants(nodes, a0), _descendants(nodes, b0))
        if id(b0) in chains.after_a or id(a0) in chains.after_b:
            return "one is computed from the other"
        position = {id(v): order[id(v.producer)] if v.producer is not None else -1 for v in (a0, b0)}
        place = max(position.values())  # -1: both are graph inputs
        for node in nodes[min(position.values()) + 1 :]:
            if node.is_return or not any(id(v) in chains.pair for v in node.operands):
                continue
            if chains.match(node):
                for v in node.operands:  # the merged chain goes after every value it reads from outside
                    if id(v) not in chains.pair and v.producer is not None:
                        place = max(place, order[id(v.producer)])
        matched = chains.matched
        in_chain = {id(n) for n, _ in matched} | {id(o) for _, o in matched}
        exits: list[tuple[Node, Value, int]] = []  # (first chain's node, a value read outside, head offset)
        for node, other in matched:
            for value, offset in ((node.result, 0), (other.result, heads_a)):
                outside = [u for u in value.users if id(u) not in in_chain]
                if not outside:
                    continue
                if chains.layout[id(node.result)] == ROWS:
                    return f"{value.describe()} (heads and tokens flattened into rows) is read outside the chain"
                early = [u for u in outside if not u.is_return and order[id(u)] <= place]
                if early:
                    return f"{value.describe()} is read by {early[0].op} before the merged chain could run"
                exits.append((node, value, offset))
        saved = len(matched) - 1 - len(exits)
        if saved < self.min_saved:
            return f"merging {len(matched)} ops would save {saved} (a concatenation and {len(exits)} slices)"
        anchor = nodes[place] if place >= 0 else None

        def put(op, operands, result_type=None, **attributes) -> Value:
            nonlocal anchor
            node = rewriter.create(op, operands, None if result_type is None else [result_type], attributes=attributes)
            if anchor is None:
                rewriter.insert_before(nodes[0], node)
            else:
                rewriter.insert_after(anchor, node)
            anchor = node
            return node.result

        both = list(a0.type.shape)
        both[dim] = heads_a + heads_b
        joined = _adjacent_slices(a0, b0, dim)
        if joined is None:
            joined = put(aten.cat, [a0, b0], TensorType(a0.dtype, tuple(both)), dim=dim)
        elif not isinstance(joined, Value):  # (a slice of their source: its heads of both, no copy of each)
            source, start, end = joined
            joined = (
                put(xir_ops.slice, [source], dim=dim, start=start, end=end)
                if str(a0.producer.op) == _XIR_SLICE
                else put(aten.slice_copy.Tensor, [source], dim=dim, start=start, end=end, step=1)
            )
        made = {id(a0): joined}
        for node, other in matched:
            operands = []
            for x, y in zip(node.operands, other.operands):
                if id(x) in made:
                    operands.append(made[id(x)])
                elif x is y or _equal_constants(x, y):
                    operands.append(x)
                else:  # per-branch constants (checked by _Chains.match): one row per head
                    operands.append(_heads_constant(rewriter, x, y, node.result.type, heads_a, heads_b, dim))
            attributes = dict(node.attributes)
            if str(node.op) == _VIEW and chains.layout[id(node.result)] != ROWS:
                size = list(attributes["size"])
                size[dim] = heads_a + heads_b
                attributes["size"] = size
            shape = list(node.result.type.shape)
            if chains.layout[id(node.result)] == ROWS:
                shape[0] = _rows(both[: dim + 1])
            else:
                shape[dim] = heads_a + heads_b
            result_type = TensorType(node.result.dtype, tuple(shape))
            made[id(node.result)] = put(node.op, operands, result_type, **attributes)
        for node, value, offset in exits:
            merged_value = made[id(node.result)]
            op, bounds = slice_op(
                merged_value.type, dim, offset, offset + value.type.shape[dim], enable_bf16=self.enable_bf16
            )
            rewriter.replace_all_uses(value, put(op, [merged_value], **bounds))
        for node, other in reversed(matched):
            for dead in (other, node):
                if not dead.result.uses:
                    rewriter.erase(dead)
        for tensor in (b0, a0):  # (slices the merged chain no longer reads)
            if tensor.producer is not None and str(tensor.producer.op) in (_XIR_SLICE, _SLICE_COPY) and not tensor.uses:
                rewriter.erase(tensor.producer)
        return {id(a0), id(b0)} | {id(n.result) for n, _ in matched} | {id(o.result) for _, o in matched}


def _bounds(value: Value) -> tuple[Value, int, int, int] | None:
    """(source, dim, start, end) when ``value`` is a slice of step 1 with bounds known now."""

    node = value.producer
    if node is None or str(node.op) not in (_XIR_SLICE, _SLICE_COPY) or node.attributes.get("step", 1) != 1:
        return None
    if str(node.op) == _XIR_SLICE:
        return node.operands[0], node.attributes["dim"] % value.rank, node.attributes["start"], node.attributes["end"]
    bounds = slice_bounds(node)
    return None if bounds is None else (node.operands[0], *bounds)


def _adjacent_slices(a: Value, b: Value, dim: int) -> Value | tuple[Value, int, int] | None:
    """When ``a`` and ``b`` are slices of one op (a fused projection's heads) along ``dim``, ``b``'s
    heads right after ``a``'s: their source when they are all of it, else (source, start, end) of
    the slice that is both. None otherwise."""
    sa, sb = _bounds(a), _bounds(b)
    if sa is None or sb is None or a.producer.op != b.producer.op or sa[0] is not sb[0] or sa[1] != dim or sb[1] != dim:
        return None
    source, _, start, middle = sa
    if sb[2] != middle:
        return None
    end = sb[3]
    if start == 0 and end == source.type.shape[dim]:
        return source
    return source, start, end


def _rows(dims) -> Any:
    """The product of ``dims`` (ints and symbols) as a dim: an int, or a symbol such as ``12*s0``."""
    count, names = 1, []
    for d in dims:
        if isinstance(d, int):
            count *= d
        else:
            names.append(str(d) if str(d).replace("_", "").isalnum() else f"({d})")
    if not names:
        return count
    return Symbol("*".join(([str(count)] if count != 1 else []) + names))


def _candidates(graph: Graph) -> list[tuple[Value, Value]]:
    """Pairs of head-split tensors in program order: graph inputs or results of the same op, one
    dtype and rank (4 or more), each read (``_merge`` checks that the shapes differ in one dim at most)."""
    groups: dict[Any, list[Value]] = {}
    values = [v for v in graph.inputs if not v.is_constant]
    values += [node.result for node in graph if not node.is_return and len(node.results) == 1]
    for value in values:
        node = value.producer
        if not isinstance(value.type, TensorType) or value.rank < 4 or not value.readers:
            continue
        key = (str(node.op) if node is not None else "input", value.dtype, value.rank)
        groups.setdefault(key, []).append(value)
    return [
        (a, b)
        for values in groups.values()
        for i, a in enumerate(values)
        for b in values[i + 1 :]
        if sum(not same_dim(x, y) for x, y in zip(a.type.shape, b.type.shape)) <= 1
    ]


@attrs.define
class _Chains:
    """The two chains found so far, from ``a0`` and ``b0`` split into heads along ``dim``."""

    a0: Value
    b0: Value
    dim: int
    after_a: set[int]  # ids of the values computed from a0 (from b0): neither chain may read the other's
    after_b: set[int]
    pair: dict[int, Value] = attrs.Factory(dict)  # a value of the first chain -> the second's
    layout: dict[int, Any] = attrs.Factory(dict)  # a value of the first chain -> "dim" or ROWS
    matched: list[tuple[Node, Node]] = attrs.Factory(list)
    taken: set[int] = attrs.Factory(set)

    def __attrs_post_init__(self):
        self.pair[id(self.a0)] = self.b0
        self.layout[id(self.a0)] = "dim"

    def match(self, node: Node) -> bool:
        """Find the second chain's node that computes for its heads what ``node`` computes for the
        first chain's, and record the two; False if there is none."""
        ins = [v for v in node.operands if id(v) in self.pair]
        layouts = {self.layout[id(v)] for v in ins}
        if len(node.results) != 1 or not isinstance(node.result.type, TensorType) or len(layouts) != 1:
            return False
        layout = self._layout_after(node, layouts.pop())
        if layout is None:
            return False
        second = {id(v) for v in self.pair.values()}
        for other in self.pair[id(ins[0])].readers:
            if (
                id(other) in self.taken
                or other is node
                or other.op != node.op
                or len(other.operands) != len(node.operands)
                or len(other.results) != 1
                or not isinstance(other.result.type, TensorType)
                or not self._same_attributes(node, other, layout)
                or not self._same_type(node, other, layout)
            ):
                continue
            if self._operands_match(node, other, second, layout):
                self.matched.append((node, other))
                self.taken.add(id(other))
                self.pair[id(node.result)] = other.result
                self.layout[id(node.result)] = layout
                return True
        return False

    def _layout_after(self, node: Node, layout: Any) -> Any:
        """The layout of ``node``'s result when it computes each head (each row) on its own, else None."""
        op, out, dim = str(node.op), node.result.type, self.dim
        heads_a = self.a0.type.shape[dim]
        if layout == ROWS:
            if op in _ELEMENTWISE or (op in (_MM, _LINEAR) and all(v.is_constant for v in node.operands[1:])):
                return ROWS if out.rank == 2 else None
            if (
                op == _VIEW
                and out.rank > dim
                and out.shape[dim] == heads_a
                and all(same_dim(x, y) for x, y in zip(out.shape[:dim], self.a0.type.shape[:dim]))
            ):
                return "dim"  # the rows unflattened: the chain's leading dims again
            return None
        x = next(v for v in node.operands if id(v) in self.pair)
        if op == _VIEW:
            if (
                out.rank > dim
                and out.shape[dim] == heads_a
                and all(same_dim(a, b) for a, b in zip(out.shape[:dim], x.type.shape[:dim]))
            ):
                return "dim"  # only the dims after the heads reshaped
            rest = TensorType(x.dtype, x.type.shape[dim + 1 :]).numel()
            if (
                out.rank == 2
                and rest is not None
                and out.shape[1] == rest
                and node.attributes.get("size", [None])[0] == -1
            ):
                return ROWS  # the leading dims (heads included) flattened into rows
            return None
        if out.rank != x.rank or out.shape[dim] != heads_a:  # (a broadcast to more dims would move the heads)
            return None
        if op in _ELEMENTWISE:
            return "dim"
        if op == _LINEAR and dim != out.rank - 1 and all(v.is_constant for v in node.operands[1:]):
            return "dim"
        if op in _ALONG_A_DIM:
            along = node.attributes.get("dim", 0)
            return "dim" if isinstance(along, int) and along % out.rank != dim else None
        return None

    def _same_attributes(self, node: Node, other: Node, layout: Any) -> bool:
        a, b = dict(node.attributes), dict(other.attributes)
        if str(node.op) == _VIEW and layout != ROWS:
            heads_a, heads_b = self.a0.type.shape[self.dim], self.b0.type.shape[self.dim]
            size_a, size_b = list(a.pop("size", [])), list(b.pop("size", []))
            if (
                len(size_a) != len(size_b)
                or len(size_a) <= self.dim
                or size_a[self.dim] != heads_a
                or size_b[self.dim] != heads_b
            ):
                return False
            size_a[self.dim] = size_b[self.dim] = None
            if size_a != size_b:
                return False
        return _key(a) == _key(b)

    def _same_type(self, node: Node, other: Node, layout: Any) -> bool:
        out_a, out_b = node.result.type, other.result.type
        if out_a.dtype is not out_b.dtype or out_a.rank != out_b.rank:
            return False
        if layout == ROWS:
            return same_dim(out_a.shape[-1], out_b.shape[-1])
        dim = self.dim
        return out_b.shape[dim] == self.b0.type.shape[dim] and all(
            same_dim(x, y) for i, (x, y) in enumerate(zip(out_a.shape, out_b.shape)) if i != dim
        )

    def _operands_match(self, node: Node, other: Node, second: set[int], layout: Any) -> bool:
        """Whether each operand of ``other`` is the counterpart of ``node``'s: the second chain's value
        for a first chain's, the same value where it does not vary over the heads, or a constant that
        is equal or varies only past the head dim (an elementwise op's per-branch weight)."""
        elementwise = str(node.op) in _ELEMENTWISE
        out = node.result.type
        for x, y in zip(node.operands, other.operands):
            if id(x) in self.pair:
                if self.pair[id(x)] is not y:
                    return False
                continue
            if id(y) in second or any(id(v) in s for v in (x, y) for s in (self.after_a, self.after_b)):
                return False  # reads the other chain, or a value computed from either tensor
            if not isinstance(x.type, TensorType) or not isinstance(y.type, TensorType):
                if x is not y:
                    return False
                continue
            if elementwise and not self._broadcasts_over_heads(x, out, layout):
                return False
            if x is y or (x.is_constant and y.is_constant and _equal_constants(x, y)):
                continue
            if not (elementwise and layout != ROWS and x.is_constant and y.is_constant and x.dtype is y.dtype):
                return False
            if _per_head(x, out, 1, self.dim) is None or _per_head(y, other.result.type, 1, self.dim) is None:
                return False
        return True

    def _broadcasts_over_heads(self, x: Value, out: TensorType, layout: Any) -> bool:
        """Whether the operand ``x`` of an elementwise op with result ``out`` is the same for every head
        (every row), without broadcasting the chain's value up."""
        if x.rank > out.rank:
            return False
        if layout == ROWS:
            return x.rank < 2 or all(d == 1 for d in x.type.shape[:-1])
        aligned = x.rank - (out.rank - self.dim)  # x's dim that lines up with the head dim
        return aligned < 0 or x.type.shape[aligned] == 1


def _heads_constant(
    rewriter: Rewriter, x: Value, y: Value, out: TensorType, heads_a: int, heads_b: int, dim: int
) -> Value:
    """One constant of ``heads_a`` rows of ``x`` and ``heads_b`` rows of ``y``, along the head dim."""
    import torch

    data = torch.cat([_per_head(x, out, heads_a, dim), _per_head(y, out, heads_b, dim)]).contiguous()
    return rewriter.add_constant(f"{x.name or 'weight'}_by_head", TensorType(x.dtype, tuple(data.shape)), data)


def _descendants(nodes: list[Node], value: Value) -> set[int]:
    """The ids of ``value`` and of every value computed from it."""
    seen = {id(value)}
    for node in nodes:
        if any(id(v) in seen for v in node.operands):
            seen.update(id(r) for r in node.results)
    return seen
