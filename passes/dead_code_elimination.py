"""dead-code-elimination: erase pure nodes whose results nobody uses.

Purity comes from the op's definition (the ``pure`` trait in :mod:`xir.ops`); an opaque op (no
definition) may have side effects and is always kept. A graph output is a use.
"""

from __future__ import annotations

from xir import Graph, Node
from xir.ops import has_trait

from .pass_base import function_pass


def is_dead(node: Node) -> bool:
    return has_trait(node.op, "pure") and all(result.is_unused() for result in node.results)


@function_pass("dead-code-elimination")
def dead_code_elimination(graph: Graph) -> bool:
    """Erase pure nodes (by their op's definition) whose results are not used."""
    changed = False
    for node in reversed(graph.nodes):
        if is_dead(node):
            graph.erase(node)
            changed = True
    return changed
