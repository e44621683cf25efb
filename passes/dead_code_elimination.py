"""dead-code-elimination: erase side-effect-free nodes whose results nobody uses."""

from __future__ import annotations

from xir import Graph, Node

from .pass_base import function_pass

PURE_NAMESPACES = ("aten.", "quantized_decomposed.", "dim_order_ops.", "xir.")


def is_pure(node: Node) -> bool:
    """Ops of the known namespaces are pure unless in-place (``aten.add_``) or ``out=`` variants."""
    if not node.op.startswith(PURE_NAMESPACES):
        return False
    base = node.op.split(".")[1]
    return not base.endswith("_") and not node.op.endswith(".out")


@function_pass("dead-code-elimination")
def dead_code_elimination(graph: Graph) -> bool:
    """Erase side-effect-free nodes whose results are not used."""
    outputs = {id(v) for v in graph.outputs}
    changed = False
    for node in reversed(graph.nodes):
        if is_pure(node) and not any(r.uses or id(r) in outputs for r in node.results):
            graph.erase(node)
            changed = True
    return changed
