"""dead-code-elimination: erase pure nodes whose results nobody uses.

Purity comes from the op's definition (the ``pure`` trait in :mod:`xir.ops`); an opaque op (no
definition) may have side effects and is always kept, except Python's integer arithmetic on
symbolic sizes (``_operator.mul`` and the like, which torch.export writes for a view's run-time
size): it has none, and a view written with -1 leaves it unread. A graph output is a use.
"""

from __future__ import annotations

from xir import Graph, Node
from xir.ops import has_trait

from .pass_base import function_pass

# Python's operator functions torch.export writes for symbolic-size arithmetic: no side effects
SIZE_ARITHMETIC = frozenset(
    f"_operator.{name}"
    for name in ("add", "sub", "mul", "floordiv", "mod", "neg", "truediv", "pow", "eq", "ne", "lt", "le", "gt", "ge")
)


def is_dead(node: Node) -> bool:
    pure = has_trait(node.op, "pure") or node.op in SIZE_ARITHMETIC
    return pure and all(result.is_unused() for result in node.results)


@function_pass("dead-code-elimination")
def dead_code_elimination(graph: Graph) -> bool:
    """Erase pure nodes (by their op's definition) whose results are not used."""
    changed = False
    for node in reversed(graph.nodes):
        if is_dead(node):
            graph.erase(node)
            changed = True
    return changed
