"""common-subexpression-elimination: a pure node that computes what an earlier node computes (the
same op, the same operands, equal attributes) is replaced by that node's results and erased.

Purity comes from the op's definition (the ``pure`` trait in :mod:`xir.ops`); opaque ops and ops
with side effects are never merged, nor random ops (two dropouts draw two masks) nor the
quantize/dequantize ops a quantized lowering matches one reader at a time. Operands are compared
by identity (a value, not an equal one), attributes by value (values inside attributes, such as
a symbolic size, by identity). The earlier node comes first in program order, so it is computed
before every reader of the node it replaces. Left alone: a node whose operands are all constants
(a weight's permute or view: a backend matches a GEMM with its own weight layout, and a shared
one would tie two GEMMs together), a repeat where it or the earlier node is read by a matrix
multiply (a decomposed linear's input view is part of that linear: fuzz regression
"three-linears-of-one-input"), and a node that is a graph output.

Where it pays: a rewrite that builds the same helper for several readers (the rotary tables'
views, once for q and once for k in every layer, in ``xnnpack.rope-as-pair-swap``), or a model
that recomputes a view or a cast per layer; each merged node is one op fewer to run.
"""

from __future__ import annotations

import enum
from typing import Any

from xir import Graph, Node, Value
from xir.ops import has_trait

from .pass_base import function_pass

# pure by their definition, but two of them are not one: random ops; and the Q/DQ ops a quantized
# lowering matches per reader
NEVER_MERGED_WORDS = ("dropout", "rand", "bernoulli", "normal", "uniform", "multinomial", "poisson")
NEVER_MERGED_NAMESPACES = ("quantized_decomposed.", "torchao.")


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


# readers whose operands a backend matches as one unit with the nodes before them: a decomposed
# linear's input view belongs to that linear (XNNPACK rebuilds the linear from its source
# partition), so two linears reading equal views keep one each; and a batched matmul reading one
# permute as both operands multiplies wrong in XNNPACK (xnnpack.bmm-distinct-operands makes two)
MATMULS = (
    "aten.mm",
    "aten.addmm",
    "aten.bmm",
    "aten.linear",
    "aten.matmul",
    "xir.bmm_f32out",
    "xir.linear_f16w",
)  # (and xir's own matmuls, which bf16 rewrites make)


def _read_by_matmul(node: Node) -> bool:
    return any(user.op in MATMULS for result in node.results for user in result.users)


def mergeable(node: Node) -> bool:
    op = node.op
    return (
        has_trait(op, "pure")
        and not op.startswith(NEVER_MERGED_NAMESPACES)
        and not any(word in op for word in NEVER_MERGED_WORDS)
        and bool(node.results)
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
