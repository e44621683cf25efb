"""Decomposed linears: ``x -> view -> addmm/mm -> view`` that XNNPACK's preprocessing rebuilds into
one linear, recognised where that rebuild is exact."""

from __future__ import annotations

import attrs

from xir import Graph, Node, TensorType, Value
from xir.ops import aten

MATMUL_OPS = (aten.addmm, aten.mm, aten.bmm)  # what ExecuTorch's ConvertToLinearPass rebuilds into a linear
TRANSPOSE_OPS = (aten.permute_copy, aten.t_copy)


@attrs.frozen
class DecomposedLinear:
    """A linear that ``to_edge`` decomposed: ``x -> view -> addmm/mm -> view`` (the views fold the
    batch dims into one and back, with symbolic sizes when the batch dims are dynamic), the weight
    read through its transpose.

    XNNPACK's preprocessing (``ConvertToLinearPass``) finds these nodes inside a delegate by their
    source (the ``torch.nn.Linear`` module or ``F.linear`` call they came from) and rebuilds one
    linear from the first input of the pattern to its last output, so the views never reach
    XNNPACK (a view with a symbolic size it could not define). Delegated together they are one
    linear on the N-D input; recognised only where that rebuild is exact (see
    :func:`decomposed_linears`)."""

    matmul: Node
    input: Value  # the linear's input (before the views)
    output: Value  # the linear's output (after the views)
    reshapes: tuple[Node, ...]  # the views, input side then output side
    sizes: tuple[Node, ...]  # the int arithmetic computing the views' symbolic sizes, read only by them
    transpose: Node  # the weight's transpose

    @property
    def nodes(self) -> list[Node]:
        return list(self.sizes) + list(self.reshapes) + [self.transpose, self.matmul]


def _linear_source_partitions(graph: Graph) -> dict:
    """FX node -> the source partition (``torch.nn.Linear`` / ``F.linear``) it belongs to, found
    exactly as XNNPACK's ``ConvertToLinearPass`` finds them; empty for a graph with no FX nodes."""
    fx_graph = next((n.fx_node.graph for n in graph if n.fx_node is not None), None)
    if fx_graph is None:
        return {}
    from ..fx.linear_rebuild import linear_source_partitions  # (the FX side; a parsed graph never gets here)

    return linear_source_partitions(fx_graph)


def same_dim(a, b) -> bool:
    """Whether two dims are equal: ints, or symbolic sizes that are the same expression for every
    positive integer value of their symbols (torch.export writes ``s0`` as ``((s0**2)//s0)`` at times)."""
    if a == b:
        return True
    if isinstance(a, int) and isinstance(b, int):
        return False
    import sympy

    try:
        ea, eb = sympy.sympify(str(a)), sympy.sympify(str(b))
        positive = {s: sympy.Symbol(s.name, integer=True, positive=True) for s in ea.free_symbols | eb.free_symbols}
        return sympy.simplify(ea.subs(positive) - eb.subs(positive)) == 0
    except (sympy.SympifyError, TypeError, ValueError):
        return False


def _is_transpose(node: Node | None) -> bool:
    if node is None or node.op not in TRANSPOSE_OPS or node.input.rank != 2:
        return False
    return node.op == aten.t_copy or [d % 2 for d in node.attributes.get("dims", [])] == [1, 0]


def decomposed_linears(graph: Graph) -> dict[int, DecomposedLinear]:
    """The decomposed linears of ``graph`` with their views, by ``id`` of the matrix multiply.

    One is recognised only where XNNPACK's preprocessing rebuilds it exactly from what a delegate
    holds: the matrix multiply is the only one of its source partition; the views on each side are
    of that partition and read by the next node only; the weight is the transpose of a value from
    outside the partition (a constant, or a dequantize), so the rebuilt linear reads the weight
    untransposed; the partition's only output is the last view; the linear's batch dims are the
    input's. A linear without views (2-D) needs nothing of this."""
    partitions = _linear_source_partitions(graph)
    if not partitions:
        return {}
    by_fx = {id(n.fx_node): n for n in graph if n.fx_node is not None}
    result: dict[int, DecomposedLinear] = {}
    for node in graph:
        if node.op not in (aten.addmm, aten.mm) or node.fx_node not in partitions:
            continue
        found = _decomposed_linear(node, partitions[node.fx_node], by_fx)
        if found is not None:
            result[id(node)] = found
    return result


def _decomposed_linear(matmul: Node, partition, by_fx: dict[int, Node]) -> DecomposedLinear | None:
    members = {id(n) for n in partition.nodes}

    def inside(n: Node | None) -> bool:
        return n is not None and n.fx_node is not None and id(n.fx_node) in members

    matmuls = [by_fx.get(id(n)) for n in partition.nodes]
    if sum(1 for n in matmuls if n is not None and n.op in MATMUL_OPS) != 1:
        return None  # (a module called twice: the delegate's rebuild would mix its calls up)
    source, before = _views_before(matmul, inside)
    output, after = _views_after(matmul, inside)
    if inside(source.producer) or not before or not after:
        return None
    outputs = [n for n in partition.output_nodes if n.op != "placeholder" and "sym_size" not in str(n.target)]
    if len(outputs) != 1 or outputs[0] is not output.producer.fx_node:
        return None
    transpose = matmul.weight.producer
    if not _is_transpose(transpose) or not inside(transpose) or matmul.weight.single_user() is not matmul:
        return None
    if inside(transpose.input.producer):
        return None
    if matmul.op == aten.addmm and inside(matmul.operand("bias").producer):
        return None
    if not _same_batch_dims(matmul, source, output):
        return None
    reshapes = before[::-1] + after
    return DecomposedLinear(matmul, source, output, tuple(reshapes), tuple(_size_nodes(reshapes, inside)), transpose)


def _views_before(matmul: Node, inside) -> tuple[Value, list[Node]]:
    """The views of the partition from the matmul's input back (each read by the next node only),
    and the value they start from."""
    before: list[Node] = []
    value = matmul.input
    while inside(value.producer) and value.producer.op == aten.view_copy and value.single_user() is not None:
        before.append(value.producer)
        value = value.producer.input
    return value, before


def _views_after(matmul: Node, inside) -> tuple[Value, list[Node]]:
    """The views of the partition after the matmul (each the only reader), and the last value."""
    after: list[Node] = []
    value = matmul.results[0]
    user = value.single_user()
    while user is not None and inside(user) and user.op == aten.view_copy:
        after.append(user)
        value = user.results[0]
        user = value.single_user()
    return value, after


def _same_batch_dims(matmul: Node, source: Value, output: Value) -> bool:
    """Whether the linear from ``source`` to ``output`` has the input's batch dims, and the
    matmul's channels."""
    if not (isinstance(source.type, TensorType) and isinstance(output.type, TensorType)) or source.rank < 1:
        return False
    return len(source.shape) == len(output.shape) and all(
        same_dim(a, b)
        for a, b in zip(
            source.shape[:-1] + (source.shape[-1], output.shape[-1]),
            output.shape[:-1] + (matmul.input.shape[-1], matmul.results[0].shape[-1]),
        )
    )


def _size_nodes(reshapes: list[Node], inside) -> list[Node]:
    """The int arithmetic of the partition computing the views' symbolic sizes, read only by them."""
    reshape_ids = {id(n) for n in reshapes}
    sizes: list[Node] = []
    for view in reshapes:
        for size in list(view.inputs())[1:]:  # (the view's input, then the values of its size)
            producer = size.producer
            if producer is None or not inside(producer) or isinstance(size.type, TensorType) or producer in sizes:
                continue
            if all(id(u) in reshape_ids for r in producer.results for u in r.uses):
                sizes.append(producer)
    return sizes
