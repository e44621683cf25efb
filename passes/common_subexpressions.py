"""common-subexpression-elimination: a pure node that computes what an earlier node computes (the
same op, the same operands, equal attributes) is replaced by that node's results and erased.

Purity comes from the op's definition (the ``pure`` trait in :mod:`xir.ops`); opaque ops and ops
with side effects are never merged, nor ops with the ``random`` trait (two dropouts draw two masks)
nor the quantization ops (``quantize``, ``dequantize``, ``choose-qparams``), which a quantized
lowering matches one reader at a time. Operands are compared
by identity (a value, not an equal one), attributes by value (values inside attributes, such as
a symbolic size, by identity). The earlier node comes first in program order, so it is computed
before every reader of the node it replaces. Left alone: a node whose operands are all constants
(a weight's permute or view: a backend matches a GEMM with its own weight layout, and a shared
one would tie two GEMMs together), a repeat where it or the earlier node is read by a matrix
multiply (an op with the ``matmul`` trait: a decomposed linear's input view is part of that linear: fuzz regression
"three-linears-of-one-input"), and a node that is a graph output.

Where it pays: a rewrite that builds the same helper for several readers (the rotary tables'
views, once for q and once for k in every layer, in a backend's rotary rewrite), or a model
that recomputes a view or a cast per layer; each merged node is one op fewer to run.
"""

from __future__ import annotations

import enum
from typing import Any

from xir import Graph, Node, Value
from xir.ops import has_trait

from .pass_base import function_pass

# pure by their definition, but two of them are not one: random ops (two dropouts draw two masks);
# and the quantization ops, which a quantized lowering matches one reader at a time
NEVER_MERGED_TRAITS = ("random", "quantize", "dequantize", "choose-qparams")


def _key(value: Any) -> Any:
    """A hashable stand-in for an attribute: values by identity, lists as tuples."""
    if isinstance(value, Value):
        return ("value", id(value))
    if isinstance(value, (list, tuple)):
        return ("seq", tuple(_key(v) for v in value))
    if isinstance(value, dict):
        return ("map", tuple(sorted((str(k), _key(v)) for k, v in value.items())))
    if isinstance(value, float):
        return ("float", repr(value))  # (nan == nan here; 0.0 and -0.0 differ)
    if isinstance(value, enum.Enum):
        return ("enum", type(value).__name__, value.name)
    try:
        hash(value)
    except TypeError:
        return ("repr", repr(value))
    return (type(value).__name__, value)


# readers whose operands a backend matches as one unit with the nodes before them: matrix
# multiplies (the ``matmul`` trait). A decomposed linear's input view belongs to that linear (a
# backend may rebuild the linear from its source partition), so two linears reading equal views
# keep one each; and a batched matmul reading one permute as both of its operands is a pattern
# backends get wrong (so two equal permutes stay two).
def _read_by_matmul(node: Node) -> bool:
    return any(has_trait(user.op, "matmul") for result in node.results for user in result.users)


def mergeable(node: Node) -> bool:
    op = node.op
    return (
        has_trait(op, "pure") and not any(has_trait(op, trait) for trait in NEVER_MERGED_TRAITS) and bool(node.results)
    )


@function_pass("common-subexpression-elimination")
def common_subexpression_elimination(graph: Graph) -> bool:
    """Replace a pure node that repeats an earlier one (same op, operands, attributes) by its results."""
    seen: dict[Any, Node] = {}
    changed = False
    for node in list(graph.nodes):
        if not mergeable(node) or any(r.is_graph_output() for r in node.results):
            continue  # (a graph output keeps its node: the program returns what it returned)
        if node.operands and all(v.is_constant for v in node.operands):
            continue  # (a weight's layout: each reader keeps its own, as the backends match them)
        key = (
            node.op,
            tuple(id(v) for v in node.operands),
            _key(dict(node.attributes)),
            tuple(str(r.type) for r in node.results),
        )
        earlier = seen.get(key)
        if earlier is None:
            seen[key] = node
            continue
        if _read_by_matmul(node) or _read_by_matmul(earlier):
            continue
        graph.replace_node(node, list(earlier.results))
        changed = True
    return changed
