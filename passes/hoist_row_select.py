"""hoist-row-select: a select of one row moves up through the ops that compute each row on its own,
so they compute that row only.

An LLM export flow ends its decoder with ``h[:, -1, :]`` (``select_copy`` of the last token) after
the last layer: a prefill of 64 tokens computes the last layer's attention output projection, its
feed-forward and the residual adds for 64 rows, and keeps one. Those ops compute each row from the
same row of their inputs (a linear, an elementwise op, a norm over the last dim), so the select can
be taken before them, on what they read: ``select(linear(x), 1, -1) == linear(select(x, 1, -1))``.

The pass walks up from a select ``select_copy(x) {dim=d, index=i}`` (``i`` a number) and narrows
every op whose results are read only by narrowed ops (or the select): the op is recreated on
operands of one row (dim d of size 1, the rank kept), its results of one row. It stops at an op
that mixes rows (attention, an opaque op such as ``llama::custom_sdpa``), at a value something else
also reads (a graph output, an op that needs every row), and at a graph input or constant; there it
picks the row: ``view_copy(select_copy(v) {dim, index=i})`` (the select drops the dim, the view
restores it as size 1). The first select becomes a view of the narrowed value.

Row-wise, here: elementwise ops (an operand that broadcasts along the dim is read whole); ``linear``
on a dim other than the last; ``mean``/``sum``/``amax`` and ``softmax`` over other dims; ``cat`` and
``slice_copy`` along other dims; ``select_copy`` of another dim; ``permute_copy``; a ``view_copy``
that keeps the dim apart (the same elements before and after it), and a view or ``expand_copy`` to
the shape it has (a matmul's decomposition writes them); the rows of ``bmm``'s first operand (not in bf16: see ``operand_dims``); and torchao's per-token dynamic quantization (``choose_qparams_affine``,
``quantize_affine``, ``dequantize_affine`` with a block of 1 along the dim), which 8da4w writes
before each linear. Exact: each narrowed op computes the same numbers for that row as before.

Worth it only where the narrowed ops include a linear or a batched matmul: elsewhere the walk is
left undone (a row picked from a symbolic dim is a select a backend may not take, which would
split its delegate for an elementwise tail's sake).

Not passed (the walk ends there): the op of a pt2e Q/DQ pattern (the operand it reads a row of is a
``quantized_decomposed`` dequantize's result), whose pattern a pick would break, leaving its Q/DQ
on portable kernels; and ``clone``. With the flow's attention in ATen ops (no custom SDPA)
the attention's output is a clone of its permuted heads; past it the walk would narrow q's
projection, rotation and scores to one row while k's keep every row, and the passes that take q
and k together (one projection for q, k and v, one chain for their norms and rotations) would
decline. Not measured: that program already takes 0.26-0.72x of stock's time.
"""

from __future__ import annotations

import math

from xir import DType, Graph, Node, TensorType, Value
from xir.ops import aten, has_trait

from .pass_base import function_pass
from .shape_ops_as_views import view_size

NAME = "hoist-row-select"

# torchao's dynamic quantization ops, row-wise when their block is 1 along the dim
CHOOSE_QPARAMS = "torchao.choose_qparams_affine"
QUANTIZE = ("torchao.quantize_affine", "torchao.dequantize_affine")
REDUCTIONS = (str(aten.mean.dim), str(aten.sum.dim_IntList), str(aten.amax))


def _tensor(value: Value) -> TensorType | None:
    return value.type if isinstance(value.type, TensorType) else None


def _one_row(t: TensorType, dim: int) -> TensorType:
    shape = list(t.shape)
    shape[dim] = 1
    return TensorType(t.dtype, tuple(shape))


def _static_product(dims) -> int | None:
    return math.prod(dims) if all(isinstance(d, int) for d in dims) else None


def _view_dim(source: TensorType, result: TensorType, dim: int) -> int | None:
    """The dim of a view's ``source`` that is ``result``'s ``dim``: the same size, the same (static)
    number of elements before it and after it; None when the view mixes it with other dims."""
    before, after = _static_product(result.shape[:dim]), _static_product(result.shape[dim + 1 :])
    if before is None or after is None:
        return None
    for k, size in enumerate(source.shape):
        if (
            size == result.shape[dim]
            and _static_product(source.shape[:k]) == before
            and _static_product(source.shape[k + 1 :]) == after
        ):
            return k
    return None


def _normalized(dims, rank: int) -> set[int] | None:
    if dims is None or dims == []:
        return None
    dims = [dims] if isinstance(dims, int) else dims
    return {d % rank for d in dims}


def operand_dims(node: Node, dim: int) -> list[int | None] | None:
    """For ``node`` narrowed to one row along its results' ``dim``: per operand, the dim the row is
    picked from (None: the operand is read whole); None when ``node`` does not compute each row of
    ``dim`` from that row of its operands alone."""
    op = node.op
    result = _tensor(node.results[0])
    if result is None or not 0 <= dim < result.rank:
        return None
    rank = result.rank
    tensors = [_tensor(v) for v in node.operands]
    if not tensors or tensors[0] is None:
        return None
    if op in (CHOOSE_QPARAMS, *QUANTIZE):
        return _quantize_dims(node, dim)
    if len(node.results) != 1 or not has_trait(op, "pure"):
        return None
    if has_trait(op, "elementwise"):
        dims: list[int | None] = []
        for t in tensors:
            k = None if t is None else dim - (rank - t.rank)
            if k is None or k < 0 or t.shape[k] == 1:
                dims.append(None)  # broadcast along the dim (or not a tensor): read whole
            elif t.shape[k] == result.shape[dim]:
                dims.append(k)
            else:
                return None
        return dims
    if op == str(aten.linear):
        return [dim, None, None][: len(tensors)] if dim != rank - 1 else None
    if op in REDUCTIONS or has_trait(op, "softmax"):
        source = tensors[0]
        reduced = _normalized(node.attributes.get("dim"), source.rank)
        if reduced is None:  # over every dim
            return None
        if has_trait(op, "softmax") or node.attributes.get("keepdim", False):
            return [dim] if dim not in reduced else None
        kept = [k for k in range(source.rank) if k not in reduced]
        return [kept[dim]]
    if op == str(aten.cat):
        if node.attributes.get("dim", 0) % rank == dim or any(t is None or t.rank != rank for t in tensors):
            return None
        return [dim] * len(tensors)
    if op == str(aten.slice_copy.Tensor):
        return [dim] if node.attributes.get("dim", 0) % rank != dim else None
    if op == str(aten.select_copy.int):
        picked = node.attributes["dim"] % tensors[0].rank
        return [dim if dim < picked else dim + 1]
    if op == str(aten.permute_copy):
        order = [k % rank for k in node.attributes["dims"]]
        return [order[dim]]
    if op == str(aten.view_copy):
        k = dim if tensors[0].shape == result.shape else _view_dim(tensors[0], result, dim)
        return None if k is None or view_size(_one_row(result, dim).shape) is None else [k]
    if op == str(aten.expand_copy):  # (a matmul's decomposition expands to the shape it has)
        return [dim] if tensors[0].shape == result.shape else None
    if op == str(aten.bmm):
        # not in bf16: a backend's bf16 batched matmul may sum in an order that depends on the rows
        # it gets; on one row a bf16 rounding flipped against eager's, which the whole matmul
        # matched (tests/lowering/test_hoist_row_select_e2e.py)
        return [dim, None] if dim == 1 and result.dtype is not DType.bf16 else None
    return None


def _quantize_dims(node: Node, dim: int) -> list[int | None] | None:
    """torchao's per-token quantization: row-wise along ``dim`` when its block is 1 there and before
    it, and the scales and zero points keep the leading dims of the input."""
    x = _tensor(node.operands[0])
    block = node.attributes.get("block_size")
    if x is None or not isinstance(block, (list, tuple)) or len(block) != x.rank or dim >= x.rank:
        return None
    if any(b != 1 for b in block[: dim + 1]):
        return None
    params = node.results if node.op == CHOOSE_QPARAMS else node.operands[1:]
    for value in params:
        t = _tensor(value)
        if t is None or t.rank <= dim or tuple(t.shape[: dim + 1]) != tuple(x.shape[: dim + 1]):
            return None
    if node.op == CHOOSE_QPARAMS:
        return [dim] + [None] * (len(node.operands) - 1)
    return [dim] * len(node.operands)


def _quantized_pattern(value: Value) -> bool:
    """``value`` is a pt2e dequantize's result (``quantized_decomposed``): the op reading it is the
    quantized op of a Q/DQ pattern, which a row picked between them would break; its Q/DQ would then
    stay outside the backend (fuzz dynamic 97034: a dynamically quantized linear, then ``x.select(0, 2)``)."""
    producer = value.producer
    return producer is not None and str(producer.op).startswith("quantized_decomposed.")


def _seed(node: Node) -> tuple[Value, int, int] | None:
    """(x, dim, index) of a select worth hoisting: a number index, on a dim of more than one row."""
    if node.op != str(aten.select_copy.int) or not isinstance(node.attributes.get("index"), int):
        return None
    x = _tensor(node.operands[0])
    if x is None:
        return None
    dim = node.attributes["dim"] % x.rank
    return None if x.shape[dim] == 1 else (node.operands[0], dim, node.attributes["index"])


def _region(graph: Graph, select: Node, x: Value, dim: int) -> tuple[list[tuple[Node, list]], dict[int, int]]:
    """The nodes to narrow (program order), each with its operands' row dims (``operand_dims``),
    and, per narrowed value (by id), the dim of its row."""
    demand: dict[int, set[int]] = {id(x): {dim}}
    narrowed_uses: dict[int, int] = {id(x): 1}
    narrowed: list[tuple[Node, list]] = []
    row_dim: dict[int, int] = {}
    order = graph.nodes
    for node in reversed(order[: order.index(select)]):
        results = node.results
        if not results or not any(id(r) in demand for r in results):
            continue
        dims = {d for r in results for d in demand.get(id(r), ())}
        if len(dims) != 1 or any(narrowed_uses.get(id(r), 0) != len(r.uses) for r in results):
            continue  # read whole somewhere, or its rows along two dims: picked where read
        (d,) = dims
        picks = operand_dims(node, d)
        if picks is None or any(k is not None and _quantized_pattern(value) for value, k in zip(node.operands, picks)):
            continue
        narrowed.append((node, picks))
        for r in results:
            row_dim[id(r)] = d
        for value, k in zip(node.operands, picks):
            if k is not None:
                demand.setdefault(id(value), set()).add(k)
                narrowed_uses[id(value)] = narrowed_uses.get(id(value), 0) + 1
    return narrowed[::-1], row_dim


def _narrowed_attributes(node: Node, result: TensorType, dim: int) -> dict:
    attributes = dict(node.attributes)
    if node.op == str(aten.view_copy):
        attributes["size"] = view_size(_one_row(result, dim).shape)
    elif node.op == str(aten.expand_copy):  # (-1: the size the input has)
        attributes["size"] = [-1] * result.rank
    return attributes


def _hoist(graph: Graph, select: Node) -> bool:
    x, dim, index = _seed(select)
    region, row_dim = _region(graph, select, x, dim)
    if not any(has_trait(node.op, "matmul") for node, _ in region):
        # elementwise ops and norms alone save little, and a row picked from a symbolic dim is a
        # select a backend may leave outside: in the middle of a delegate it splits it in two (measured on
        # random programs: a tail of a mean or a softmax took two delegates where there was one)
        return False
    made_here = {id(r) for node, _ in region for r in node.results}
    for node, dims in region:
        for value, k in zip(node.operands, dims):
            if k is not None and id(value) not in made_here and view_size(_one_row(value.type, k).shape) is None:
                return False  # the row picked there would need a view with two symbolic dims
    new: dict[int, Value] = {}
    picks: dict[tuple[int, int], Value] = {}
    origin = select.fx_node if select.fx_node is not None else select.written_for

    def place(anchor: Node, op, operands, result_type, attributes, written_for) -> Value:
        made = graph.create_node(op, operands, [result_type], attributes, origin=NAME)
        made.written_for = written_for
        return graph.insert_before(anchor, made).result

    def pick(value: Value, k: int, anchor: Node) -> Value:
        """``value``'s row along ``k``, of rank unchanged (made once per value and dim)."""
        if (id(value), k) not in picks:
            t = value.type
            shape = t.shape[:k] + t.shape[k + 1 :]
            row = place(
                anchor, aten.select_copy.int, [value], TensorType(t.dtype, shape), {"dim": k, "index": index}, origin
            )
            picks[(id(value), k)] = place(
                anchor, aten.view_copy, [row], _one_row(t, k), {"size": view_size(_one_row(t, k).shape)}, origin
            )
        return picks[(id(value), k)]

    for node, dims in region:
        d = row_dim[id(node.results[0])]
        operands = []
        for value, k in zip(node.operands, dims):
            if k is None:
                operands.append(value)
            elif id(value) in new:
                operands.append(new[id(value)])
            else:
                operands.append(pick(value, k, node))
        types = [_one_row(r.type, row_dim[id(r)]) for r in node.results]
        made = graph.create_node(
            node.op, operands, types, _narrowed_attributes(node, node.results[0].type, d), origin=NAME
        )
        made.written_for = node.fx_node if node.fx_node is not None else node.written_for
        graph.insert_before(node, made)
        for old, value in zip(node.results, made.results):
            new[id(old)] = value
    row = place(
        select, aten.view_copy, [new[id(x)]], select.result.type, {"size": view_size(select.result.type.shape)}, origin
    )
    graph.replace_node(select, [row])
    for node, _ in reversed(region):
        graph.erase(node)
    return True


@function_pass(NAME)
def hoist_row_select(graph: Graph) -> bool:
    """Move a select of one row (a number index) up through the row-wise ops before it, so they
    compute that row only; the row is picked where the walk stops."""
    changed = False
    for node in list(graph.nodes):
        if (
            node.graph is graph
            and _seed(node) is not None
            and view_size(node.result.type.shape) is not None
            and _hoist(graph, node)
        ):
            changed = True
    return changed
