"""The partition report: what was delegated, in how many groups, and why each node left
outside was left out (the rule and the reason), as a table a person reads."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .partition import PartitionPlan

COMPUTE_EXCLUDED = ("aten.sym_size", "_operator.", "operator.")


def is_compute(op: str) -> bool:
    return not op.startswith(COMPUTE_EXCLUDED)


def _result_type(node) -> str:
    return ", ".join(str(r.type) for r in node.results[:1])


def format_report(plan: "PartitionPlan") -> str:
    delegated = plan.delegated_nodes
    compute_out = [r for r in plan.rejected if is_compute(r.node.op)]
    lines = [
        f"xir partition: {len(delegated)} node(s) delegated to XNNPACK in {len(plan.groups)} group(s); "
        f"{len(compute_out)} left outside"
    ]
    for group in plan.groups:
        counts = Counter(op for op in group.ops())
        ops = ", ".join(f"{op} x{n}" if n > 1 else op for op, n in counts.items())
        folded = f"; {len(group.implicit)} Q/DQ folded" if group.implicit else ""
        lines.append(f"  {group.tag}: {len(group.nodes)} node(s){folded}: {ops}")
    if compute_out:
        rows = [(r.node.op, _result_type(r.node), r.rule, r.reason) for r in compute_out]
        widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(("node", "type", "rule", "reason"))]
        header = ("node", "type", "rule", "reason")
        lines.append("  left outside:")
        lines.append("    " + "  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip())
        for row in rows:
            lines.append("    " + "  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
        own = sorted({r.node.op for r in compute_out if str(r.node.op).startswith("xir.")})
        if own:
            lines.append(
                f"  xir's own ops left outside ({', '.join(own)}) go to the next partitioner of the list; "
                "what none takes is written back as the ATen ops it stands for (lowering.fx.xir_ops_as_aten)"
            )
    return "\n".join(lines) + "\n"
