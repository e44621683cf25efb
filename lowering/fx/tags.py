"""The partition plan written into the FX graph: delegation tags on the ops (and their getitems
and constants), and the marks of the Q/DQ nodes folded into the groups that were taken."""

from __future__ import annotations

import operator
from typing import Any

from ..capability import LINEAR_OPS, Options
from ..partition import PartitionPlan
from ..rules import DEQUANTIZE_OPS, STATIC_OPERAND_OPS, weight_chain
from .linear_rebuild import keep_inexact_matmuls

IMPLICIT_QDQ_KEY = "IS_IMPLICIT_Q_DQ_TAG"  # executorch.backends.xnnpack.utils.quant_utils.IS_IMPLICIT_Q_DQ_TAG


def emit_tags(plan: PartitionPlan, ep: Any, options: Options) -> list[str]:
    """Write the plan into the FX graph: delegation tags on the ops (and their getitems and
    constants), and the Q/DQ fold marks for the groups that really were taken."""
    signature = ep.graph_signature
    constant_names = {
        spec.arg.name
        for spec in signature.input_specs
        if spec.kind.name in ("PARAMETER", "BUFFER", "CONSTANT_TENSOR") and hasattr(spec.arg, "name")
    }
    # Constants outside the state dict (lifted tensors, non-persistent buffers) are shared by the
    # edge program with the program it came from, and ExecuTorch removes a delegated constant from
    # that shared dict: tag them only where XNNPACK needs a static tensor (GEMM weights and biases).
    shared_names = {
        spec.arg.name
        for spec in signature.input_specs
        if hasattr(spec.arg, "name")
        and (spec.kind.name == "CONSTANT_TENSOR" or (spec.kind.name == "BUFFER" and spec.persistent is False))
    }
    mutated_targets = set((getattr(signature, "buffers_to_mutate", None) or {}).values())
    mutated = {name for name, target in signature.inputs_to_buffers.items() if target in mutated_targets}
    for fx_node in ep.graph_module.graph.nodes:
        fx_node.meta.pop("delegation_tag", None)
        if fx_node.meta.get(IMPLICIT_QDQ_KEY):
            fx_node.meta[IMPLICIT_QDQ_KEY] = False
    untagged_operands = _runtime_weights(plan) if options.force_non_static_weights_for_f32_linear else set()
    tags = []
    for group in plan.groups:
        tag = group.tag
        tags.append(tag)
        for node in group.nodes:
            fx_node = node.fx_node
            fx_node.meta["delegation_tag"] = tag
            for user in fx_node.users:
                if user.target is operator.getitem:
                    user.meta["delegation_tag"] = tag
            static_operands = {id(v) for v in node.operands} if node.op in STATIC_OPERAND_OPS else set()
            for value in node.inputs():
                placeholder = value.fx_node
                if (
                    value.is_constant
                    and placeholder is not None
                    and placeholder.name in constant_names
                    and placeholder.name not in mutated
                    and id(value) not in untagged_operands
                    and (placeholder.name not in shared_names or id(value) in static_operands)
                    and (value.rank != 0 or id(value) in static_operands)  # (see partition._zero_d_outputs)
                    and "delegation_tag" not in placeholder.meta
                ):
                    placeholder.meta["delegation_tag"] = tag
        for node in group.implicit:
            node.fx_node.meta[IMPLICIT_QDQ_KEY] = True
    # a matmul XNNPACK's preprocessing would rebuild into a linear of the wrong shape runs as itself
    plan.kept_matmuls = [
        n.name for n in keep_inexact_matmuls(ep.graph_module, exact={lin.matmul.fx_node for lin in plan.whole_linears})
    ]
    return tags


def _runtime_weights(plan: PartitionPlan) -> set[int]:
    """With force_non_static_weights_for_f32_linear: the weights and biases of float linears (seen
    through the layout ops between a weight and its matmul), which stay in the program."""
    result: set[int] = set()
    for node in plan.delegated_nodes:
        if node.op not in LINEAR_OPS:
            continue
        if node.input.producer is not None and node.input.producer.op in DEQUANTIZE_OPS:
            continue  # a quantized linear keeps its constants
        for name in node.definition.weights:  # weight and bias, by the op's definition
            weight = node.operand(name)
            if weight is not None:
                result.add(id(weight))
                for layout in weight_chain(weight) or []:
                    result.update(id(v) for v in layout.operands)
    return result
