"""Float units: a node computed in fp32 (or f16, bf16), a batch norm, a decomposed linear, and the
ops of a statically quantized program that run in fp32 between conversions."""

from __future__ import annotations

from xir import Graph, Node

from ..rules import DEQUANTIZE_OPS, STATIC
from .base import SUPPORTED, Options, Unit, Verdict, run_checks
from .checks import (
    BATCH_NORM_CHECKS,
    DECOMPOSED_LINEAR_CHECKS,
    FLOAT_CHECKS,
    RANK,
    TENSOR_CHECKS,
    BatchNormSubject,
    FloatSubject,
    Subject,
)
from .linears import DecomposedLinear
from .patterns import may_run_between_conversions, weight_layout_nodes


def check_rank(node: Node) -> Verdict | None:
    """Why ``node`` has a tensor of too high a rank for XNNPACK, or None."""
    return run_checks((RANK,), Subject(node, Options()))


def check_float_dtypes(node: Node, options: Options, allow_bf16: bool, bf16_reason: str) -> Verdict | None:
    """Why XNNPACK cannot compute ``node`` in the dtypes of its tensors, or None."""
    return run_checks(TENSOR_CHECKS[1:], Subject(node, options, allow_bf16, bf16_reason))


def float_verdict(node: Node, options: Options, as_fp32: bool = False, dequantized_ok: bool = False) -> Verdict:
    """The verdict for ``node`` computed in float (fp32/f16/bf16): :data:`.checks.FLOAT_CHECKS`. With
    ``as_fp32``: the verdict the same node would get if its bf16 values were fp32 (what a rewrite to
    fp32 would run). With ``dequantized_ok``: operands from dequantizes read as the float tensors
    they are (see :func:`float_between_conversions`)."""
    return run_checks(FLOAT_CHECKS, FloatSubject(node, options, as_fp32, dequantized_ok)) or SUPPORTED


def batch_norm_verdict(node: Node, options: Options) -> Verdict:
    """A batch norm runs in XNNPACK when it folds correctly into the conv/linear before it (the
    fold pass's own decision, :func:`passes.fold_batch_norm.fold_target`), or (fp32 only)
    decomposes into a per-channel multiply-add: :data:`.checks.BATCH_NORM_CHECKS`."""
    return run_checks(BATCH_NORM_CHECKS, BatchNormSubject.of(node, options)) or SUPPORTED


def decomposed_float_unit(linear: DecomposedLinear, options: Options) -> tuple[Unit | None, Verdict | None]:
    """A float decomposed linear as one unit (its views and size arithmetic with it); None and the
    reason when it cannot be one (the matrix multiply alone may still be delegated)."""
    verdict = float_verdict(linear.matmul, options)
    if not verdict.supported:
        return None, verdict
    problem = run_checks(DECOMPOSED_LINEAR_CHECKS, linear)
    for view in linear.reshapes:
        problem = problem or run_checks(TENSOR_CHECKS, Subject(view, options))
    if problem:
        return None, problem
    return Unit(linear.matmul, weight_layout_nodes(linear.matmul) + linear.nodes), None


def float_between_conversions(graph: Graph, options: Options, verdicts: dict, unit_of: dict, claim) -> None:
    """In a statically quantized program, an op that is no quantized pattern XNNPACK runs (its
    output is not quantized, XNNPACK has no quantized version of it, its input and output are
    quantized differently, or it mixes dequantized and float operands) runs in fp32: each
    dequantize it reads runs as a conversion to f32 beside it (or outside), as ExecuTorch's stock
    partitioner delegates it; the numbers are those of the program (dequantize, op, quantize).

    Only where none of those dequantizes is folded into a quantized op (XNNPACK hands a folded
    dequantize's readers the int8 tensor), and where each is read by this op alone: XNNPACK's
    channels-last pass treats a dequantize as the end of a quantized value, and when it converts
    one for a reader (a graph output after a convolution) it moves every other reader onto the
    converted copy (measured: "Attempted to resize a static tensor" at load, stock's program too).
    GEMMs only with float constant weights (:func:`.patterns.float_gemm_of_static_input`); not zero
    pads (:func:`.patterns.quantized_by_preprocessing`)."""
    if STATIC not in options.precisions:
        return
    folded = {id(n) for unit in {id(u): u for u in unit_of.values()}.values() for n in unit.implicit}
    for node in graph:
        verdict = verdicts.get(id(node))
        if id(node) in unit_of or verdict is None or verdict.rule != "quant" or not may_run_between_conversions(node):
            continue
        dequantizes = [v.producer for v in node.operands if v.producer is not None and v.producer.op in DEQUANTIZE_OPS]
        if not dequantizes or any(
            id(dq) in folded or any(u is not node for u in dq.results[0].uses) for dq in dequantizes
        ):
            continue
        as_float = float_verdict(node, options, dequantized_ok=True)
        if as_float.supported:
            verdicts[id(node)] = as_float
            claim(Unit(node, weight_layout_nodes(node) + [node]))
        else:  # the reason it cannot run in fp32 either
            verdicts[id(node)] = Verdict(
                False, as_float.rule, f"{verdict.reason}; in fp32: {as_float.reason}", as_float.check
            )
