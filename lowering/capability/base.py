"""What capability answers (verdicts, units) and the shape of its named checks."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import attrs

from xir import Node, Value
from xir.ops import aten, family

from ..rules import (
    ALL_PRECISIONS,
    DEQUANTIZE_OPS,
    DYNAMIC,
    FP32,
    QUANTIZE_OPS,
    RULES,
    STATIC,
)

# what XNNPACK's FuseActivationPass folds into the op before it (a conv, a linear, ...): in a
# static unit the op's quantize may come after one of these; a clamp is not fused
FUSED_ACTIVATIONS = (aten.relu, aten.hardtanh)
LINEAR_OPS = family("linear")  # (aten.linear and the addmm/mm torch.export decomposes it into)
GEMM_OPS = LINEAR_OPS + (aten.convolution,)
STATIC_QUANT_OPS = (
    {op for op, rule in RULES.items() if STATIC in rule.precisions} - set(QUANTIZE_OPS) - set(DEQUANTIZE_OPS)
)
DYNAMIC_QUANT_OPS = {op for op, rule in RULES.items() if DYNAMIC in rule.precisions}

# the rule of a torchao-quantized linear XNNPACK cannot run: its quantize/dequantize ops have no
# ExecuTorch kernel, so left outside the program cannot run at all (the partitioner raises)
AFFINE_RULE = "affine"
# the same for a quantized_decomposed pattern whose ops ExecuTorch's kernels refuse (an fp16
# dynamically quantized linear XNNPACK gets wrong: choose_qparams aborts on fp16)
UNRUNNABLE_RULE = "unrunnable"


@attrs.frozen
class Options:
    """The partitioner's settings, with the stock constructor's meaning."""

    enable_bf16: bool = False
    precisions: frozenset = ALL_PRECISIONS
    force_non_static_weights_for_f32_linear: bool = False
    per_op_mode: bool = False
    # rewrites that xir's transform pass applied to this program (so their nodes may be delegated)
    rewrites: frozenset = frozenset()


@attrs.frozen
class Verdict:
    supported: bool
    rule: str = ""  # which rule decided: "op", "rank", "dtype", "bf16", "constraint", "quant", "unit", ...
    reason: str = ""
    # the named check that rejected the node (checks.TABLES), where one did; not compared
    check: str = attrs.field(default="", eq=False, repr=False)


SUPPORTED = Verdict(True)


@attrs.define(eq=False)
class Unit:
    """Nodes delegated together. ``anchor`` is the op; ``implicit`` the Q/DQ proposed as folded into it."""

    anchor: Node
    nodes: list[Node]
    kind: str = FP32  # fp32, static, dynamic, convert
    implicit: list[Node] = attrs.field(factory=list)


@attrs.define
class Capability:
    units: list[Unit]
    verdicts: dict[int, Verdict]  # by id(node)
    unit_of: dict[int, Unit]
    linears: dict = attrs.field(factory=dict)  # decomposed_linears(graph): id(matmul) -> DecomposedLinear

    def verdict(self, node: Node) -> Verdict:
        return self.verdicts.get(id(node), Verdict(False, "op", "not analysed"))


# ------------------------------------------------------------------------------ named checks


@attrs.frozen
class Check:
    """One named reason a node (or the pattern around it) is rejected: ``reason`` answers the
    reason, or None (or "") when the check holds; it is asked only where ``applies``. A fired
    check gives a :class:`Verdict` with ``rule``. Each check reads a *subject* (the node, the
    options, and the pattern the unit builder found: see :mod:`.checks`)."""

    name: str
    rule: str
    reason: Callable[[Any], str | None]
    applies: Callable[[Any], bool] | None = None  # None: everywhere

    def __call__(self, subject: Any) -> str | None:
        return (self.reason(subject) or None) if self.applies is None or self.applies(subject) else None


def when(condition: Callable[[Any], bool], checks: Iterable[Check]) -> tuple[Check, ...]:
    """``checks`` asked only where ``condition`` holds too (the same names: a table reusing them)."""
    return tuple(
        attrs.evolve(c, applies=condition if c.applies is None else (lambda s, c=c: condition(s) and c.applies(s)))
        for c in checks
    )


def first_failure(table: Iterable[Check], subject: Any) -> tuple[Check, str] | None:
    """The first check of ``table`` that fires on ``subject``, with its reason; None if none does."""
    for check in table:  # (Check.__call__ inlined: this loop runs for every node)
        if check.applies is None or check.applies(subject):
            reason = check.reason(subject)
            if reason:
                return check, reason
    return None


def run_checks(table: Iterable[Check], subject: Any) -> Verdict | None:
    """The verdict of the first check of ``table`` that fires on ``subject``, or None."""
    failure = first_failure(table, subject)
    return None if failure is None else Verdict(False, failure[0].rule, failure[1], failure[0].name)


# ------------------------------------------------------------------------------ small helpers


def dq_producer(value: Value) -> Node | None:
    """The dequantize that produces ``value``, or None."""
    p = value.producer
    return p if p is not None and p.op in DEQUANTIZE_OPS else None


def data_operand(node: Node) -> Value:
    """The tensor a quantize/dequantize/choose_qparams reads: ``node.input``. torchao's affine ops
    are opaque to xir (no definition in xir.ops): their data is read as their first operand."""
    return node.input if node.definition is not None else node.operands[0]
