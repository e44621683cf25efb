"""Checks a graph's invariants.

* every value is defined before it is used, and every value has a type;
* use-lists agree with the operands and attributes that really refer to each value, and the
  graph outputs are recorded as uses by the graph's return node (and by nothing else);
* every node of a defined op (:mod:`xir.ops`) has the operands and attributes its definition
  asks for, passes its operand check, and has the result types its definition infers.

Ops without a definition are *opaque*: checked structurally only. :func:`verify` returns their
names, so a caller can say which ops it could not check; ``verify(graph, allow_opaque=False)``
refuses them. Errors are :class:`~xir.errors.VerificationError` naming the rule and the node
(and, for a node parsed from IR text, the line and column of its text); a malformed node, whatever
its attributes hold, gives that error and no other.
"""

from __future__ import annotations

from collections import Counter

from .core import Graph, Node, Value
from .errors import VerificationError
from .ops import lookup
from .printer import Namer, print_node
from .types import ScalarType, TensorType


def verify(graph: Graph, *, allow_opaque: bool = True) -> list[str]:
    """Raise VerificationError on the first broken invariant. Returns the sorted names of the
    opaque ops in ``graph`` (ops with no definition, whose types could not be checked)."""
    namer = Namer(graph)

    def fail(message: str, node: Node | None = None) -> None:
        if node is None:
            raise VerificationError(message)
        raise VerificationError(message, print_node(node, namer), *(node.location or (None, None)))

    nodes = list(graph)
    actual_uses = _check_order(graph, nodes, namer, fail)
    _check_use_lists(graph, nodes, actual_uses, namer, fail)
    opaque: set[str] = set()
    for node in nodes:
        definition = lookup(node.op)
        if definition is None:
            opaque.add(node.op)
            continue
        problem = definition.problems(node)
        if problem:
            fail(f"{node.op}: {problem}", node)
    if opaque and not allow_opaque:
        fail(f"opaque ops (no definition in xir.ops, not checked): {', '.join(sorted(opaque))}")
    return sorted(opaque)


def _check_order(graph: Graph, nodes: list[Node], namer: Namer, fail) -> Counter:
    """Every value is typed and defined before it is read; returns the reads (value, reader) counted."""
    defined: set[int] = set()
    for value in graph.inputs:
        _check_typed(value, fail, None)
        defined.add(id(value))
    actual_uses: Counter = Counter()
    for node in nodes:
        if node.graph is not graph:
            fail(f"node {node.op} is linked into the graph but does not belong to it", node)
        if node.is_return:
            fail("a return node is linked among the graph's nodes (the graph has its own: set graph.outputs)", node)
        for value in node.inputs():
            if id(value) not in defined:
                fail(f"{node.op} uses {namer.ref(value)} before it is defined", node)
            actual_uses[(id(value), id(node))] += 1
        for result in node.results:
            if result.producer is not node:
                fail(f"result {namer.ref(result)} of {node.op} names another producer", node)
            _check_typed(result, fail, node)
            defined.add(id(result))
    ret = graph.return_node
    if ret.graph is not graph or ret.results:
        fail("the graph's return node does not belong to it, or has results")
    for value in ret.operands:
        if id(value) not in defined:
            fail(f"graph output {namer.ref(value)} is not defined")
        actual_uses[(id(value), id(ret))] += 1
    return actual_uses


def _check_use_lists(graph: Graph, nodes: list[Node], actual_uses: Counter, namer: Namer, fail) -> None:
    """Each value's use-list records exactly the reads of it (graph outputs included)."""
    ret = graph.return_node
    recorded: Counter = Counter()
    nodes_by_id = {id(node): node for node in nodes}
    nodes_by_id[id(ret)] = ret
    values_by_id = {id(value): value for value in graph.values()}
    for value in graph.values():
        for user in value.uses:
            recorded[(id(value), id(user))] += 1
    for key in set(recorded) | set(actual_uses):
        if recorded[key] != actual_uses[key]:
            value, node = values_by_id.get(key[0]), nodes_by_id.get(key[1])
            name = namer.ref(value) if value is not None else "a value"
            if node is ret:
                fail(
                    f"output bookkeeping of {name} is inconsistent: its use-list records {recorded[key]} graph "
                    f"output use(s), but it is returned {actual_uses[key]} time(s)"
                )
            op = node.op if node is not None else "a node outside the graph"
            fail(
                f"use-list of {name} is inconsistent: it records {op} {recorded[key]} time(s), "
                f"but the node reads it {actual_uses[key]} time(s)",
                None if node is ret else node,
            )


def _check_typed(value: Value, fail, node: Node | None) -> None:
    if not isinstance(value.type, (TensorType, ScalarType)):
        fail(f"value {value.describe()} has no type", node)
    if isinstance(value.type, TensorType) and any(isinstance(d, int) and d < 0 for d in value.type.shape):
        fail(f"value {value.describe()} has a negative dim in its type {value.type}", node)
