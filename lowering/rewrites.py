"""Rewrites that only make sense for nodes XNNPACK will run: they create xir's own ops
(:mod:`lowering.xnnpack_ops`), which have no portable kernel, so they apply only where the
partitioner delegates the result. Their options mirror the partitioner's; the partitioner
sets them from its own settings."""

from __future__ import annotations

import attrs

from passes import Pass
from xir import DType, Graph, TensorType

from . import xnnpack_ops  # noqa: F401  (registers the ops and their XNNPACK visitors)


@attrs.frozen
class Bf16BmmF32Output(Pass):
    """Rewrite bf16 bmm as XNNPACK computes it: bf16 x bf16 -> fp32, then a convert to bf16."""

    name = "bf16-bmm-f32-output"
    enable_bf16: bool = False

    def run(self, graph: Graph) -> bool:
        if not self.enable_bf16:
            return False  # bf16 stays outside XNNPACK: xir's ops would have no kernel there
        changed = False
        for node in graph:
            if node.op != "aten.bmm" or node.results[0].dtype is not DType.bf16:
                continue
            a, b = node.operands
            if a.dtype is not DType.bf16 or b.dtype is not DType.bf16:
                continue
            result = node.results[0]
            wide = graph.create_node("xir.bmm_f32out", [a, b], [TensorType(DType.f32, result.shape)])
            graph.insert_before(node, wide)
            narrow = graph.create_node("xir.convert", [wide.result], [result.type], {"dtype": DType.bf16})
            graph.insert_before(node, narrow)
            graph.replace_node(node, [narrow.result])
            changed = True
        return changed


PARTITIONER_OPTION_PASSES = (Bf16BmmF32Output,)
