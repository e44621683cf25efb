"""analyse(): a unit or a verdict for every node of a graph, by phase: the quantized and float
units of the ops, then the ops of a static program that run in fp32 between conversions, then the
quantize/dequantize nodes left as conversions."""

from __future__ import annotations

from xir import Graph, Node
from xir.ops import aten

from ..rules import CHOOSE_QPARAMS_OPS, DEQUANTIZE_OPS, QUANTIZE_OPS
from .base import SUPPORTED, Capability, Options, Unit, Verdict
from .floats import (
    batch_norm_verdict,
    decomposed_float_unit,
    float_between_conversions,
    float_verdict,
)
from .linears import decomposed_linears
from .patterns import weight_layout_nodes
from .quantized import convert_unit, dynamic_unit, static_unit

QDQ_OPS = set(QUANTIZE_OPS) | set(DEQUANTIZE_OPS) | set(CHOOSE_QPARAMS_OPS)


class _Claims:
    """The units found so far; a node already claimed by another unit (a shared Q/DQ) joins the two."""

    def __init__(self) -> None:
        self.verdicts: dict[int, Verdict] = {}
        self.units: dict[int, Unit] = {}  # insertion-ordered, keyed by id(unit)
        self.unit_of: dict[int, Unit] = {}

    def claim(self, unit: Unit) -> None:
        members = {id(n) for n in unit.nodes}
        for n in list(unit.nodes):
            other = self.unit_of.get(id(n))
            if other is not None and other is not unit:
                for m in other.nodes:
                    if id(m) not in members:
                        unit.nodes.append(m)
                        members.add(id(m))
                unit.implicit.extend(m for m in other.implicit if m not in unit.implicit)
                del self.units[id(other)]
                for m in other.nodes:
                    self.unit_of[id(m)] = unit
        for n in unit.nodes:
            self.unit_of[id(n)] = unit
            self.verdicts[id(n)] = SUPPORTED
        self.units[id(unit)] = unit


def analyse(graph: Graph, options: Options) -> Capability:
    """Units and a verdict for every node of ``graph``."""
    claims = _Claims()
    linears = decomposed_linears(graph)
    for node in graph:
        if node.op not in QDQ_OPS:
            _analyse_op(node, options, linears.get(id(node)), claims)
    float_between_conversions(graph, options, claims.verdicts, claims.unit_of, claims.claim)
    for node in graph:
        if node.op in QDQ_OPS and id(node) not in claims.unit_of:
            unit, verdict = convert_unit(node, options)
            claims.verdicts[id(node)] = verdict
            if unit is not None:
                claims.claim(unit)
    return Capability(list(claims.units.values()), claims.verdicts, claims.unit_of, linears)


def _analyse_op(node: Node, options: Options, linear, claims: _Claims) -> None:
    """The unit of ``node`` (dynamic, static, a decomposed linear, float), or its verdict."""
    unit, problem = dynamic_unit(node, options, linear)
    if unit is None and problem is None:
        unit, problem = static_unit(node, options, linear)
    if unit is None and problem is None and linear is not None:
        unit, _ = decomposed_float_unit(linear, options)  # else: the matrix multiply alone, below
    if unit is not None:
        claims.claim(unit)
        return
    if problem is not None:
        claims.verdicts[id(node)] = problem
        return
    if id(node) in claims.unit_of:
        return  # a fused activation claimed by its op
    if node.op == aten._native_batch_norm_legit_no_training:
        verdict = batch_norm_verdict(node, options)
    else:
        verdict = float_verdict(node, options)
    claims.verdicts[id(node)] = verdict
    if verdict.supported:
        claims.claim(Unit(node, weight_layout_nodes(node) + [node]))
