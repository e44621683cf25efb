"""Quantized units: a statically quantized op with its Q/DQ, a dynamically quantized linear or conv
with its choose_qparams/quantize/dequantize, a torchao weight-only linear, a standalone conversion.
Each builder finds its pattern, then runs its table of :mod:`.checks`."""

from __future__ import annotations

import attrs

from xir import Node, TensorType
from xir.ops import aten, quantized_decomposed

from ..rules import (
    AFFINE_CHOOSE_QPARAMS,
    AFFINE_DEQUANTIZE,
    AFFINE_QUANTIZE,
    DYNAMIC,
    FP32,
    QUANTIZE_OPS,
    STATIC,
)
from .base import (
    AFFINE_RULE,
    FUSED_ACTIVATIONS,
    GEMM_OPS,
    LINEAR_OPS,
    SUPPORTED,
    Options,
    Unit,
    Verdict,
    data_operand,
    dq_producer,
    first_failure,
    run_checks,
)
from .checks import (
    CONVERT_CHECKS,
    DYNAMIC_CHECKS,
    DYNAMIC_PATTERN_CHECKS,
    STATIC_CHECKS,
    WEIGHT_ONLY_CHECKS,
    WEIGHT_ONLY_DEQUANTIZES,
    WEIGHT_ONLY_LINEAR_CHECKS,
    DynamicPattern,
    StaticPattern,
    Subject,
    WeightOnlySubject,
)
from .linears import DecomposedLinear
from .patterns import (
    float_gemm_of_dequantized_input,
    fp32_of_dequantized_weight,
    quantized_conv_pad,
    weight_dq,
)

NOT_A_PATTERN: tuple[None, None] = (None, None)
DYNAMIC_PATTERNS = {  # dequantize of the activation -> (its quantize, its choose_qparams)
    quantized_decomposed.dequantize_per_tensor.tensor: (
        quantized_decomposed.quantize_per_tensor.tensor,
        quantized_decomposed.choose_qparams.tensor,
    ),
    AFFINE_DEQUANTIZE: (AFFINE_QUANTIZE, AFFINE_CHOOSE_QPARAMS),
}


# ---------------------------------------------------------------------------------- static


def static_unit(
    node: Node, options: Options, linear: DecomposedLinear | None = None
) -> tuple[Unit | None, Verdict | None]:
    """A statically quantized pattern anchored at ``node``: every float operand dequantized, the
    output (after an optional fused activation) quantized; :data:`.checks.STATIC_CHECKS`. None if
    ``node`` is not one. For a decomposed linear (``linear``), its input and output are those of
    the whole linear."""
    if linear is None and fp32_of_dequantized_weight(node, options):
        return NOT_A_PATTERN  # fp32 on dequantized tensors left outside (float_verdict decides)
    pattern = _static_pattern(node, options, linear)
    if not isinstance(pattern, StaticPattern):
        return pattern
    verdict = run_checks(STATIC_CHECKS, pattern)
    if verdict is not None:
        return None, verdict
    extra = [pattern.bias_dq] if pattern.bias_dq is not None else []
    implicit = list(dict.fromkeys(list(pattern.inputs) + extra + [pattern.quantize]))
    nodes = list(dict.fromkeys(implicit[:-1] + list(pattern.layout) + list(pattern.chain) + [pattern.quantize]))
    return Unit(node, nodes, STATIC, implicit), None


def _static_pattern(node: Node, options: Options, linear: DecomposedLinear | None) -> StaticPattern | tuple:
    """The static pattern of ``node``, or what :func:`static_unit` answers where its inputs decide
    (not a pattern; a torchao weight-only linear)."""
    pad = quantized_conv_pad(node)
    inputs = _static_inputs(node, options, linear, pad)
    if not isinstance(inputs, _Inputs):
        return inputs
    chain, user = _static_output(node, linear, pad)
    return StaticPattern(node, options, linear, pad, inputs.dequantizes, inputs.layout, tuple(chain), user)


@attrs.frozen
class _Inputs:
    dequantizes: tuple  # a GEMM's: data, weight (None where not dequantized)
    layout: tuple = ()


def _static_inputs(node: Node, options: Options, linear: DecomposedLinear | None, pad: Node | None) -> _Inputs | tuple:
    """The dequantizes of ``node``'s quantized inputs (data, then a GEMM's weight) and the layout
    ops between a GEMM weight and its dequantize; or the answer, where the inputs decide it."""
    if node.op not in GEMM_OPS:
        dqs = [dq_producer(v) for v in node.operands if isinstance(v.type, TensorType)]
        if not dqs or any(d is None for d in dqs) or _dynamic(dqs):
            return NOT_A_PATTERN
        return _Inputs(tuple(dqs))
    data = dq_producer(linear.input if linear is not None else (pad.input if pad is not None else node.input))
    weight, layout = weight_dq(node.weight)
    if weight is None and data is None:
        return NOT_A_PATTERN
    if (
        weight is not None
        and data is None
        and node.op == aten.linear
        and linear is None
        and (weight.op in WEIGHT_ONLY_DEQUANTIZES)
    ):
        return weight_only_unit(node, weight, layout, options)
    if weight is not None and weight.op == AFFINE_DEQUANTIZE:
        return _Inputs((data, weight), tuple(layout))  # (rejected: affine-weight-in-static-pattern)
    if weight is None and float_gemm_of_dequantized_input(node, options):
        return NOT_A_PATTERN  # an fp32 op reading a dequantized activation (float_verdict decides)
    if weight is not None and data is not None and _dynamic([data, weight]):
        return NOT_A_PATTERN
    return _Inputs((data, weight), tuple(layout))  # (one of them None: rejected, one-side-quantized)


def _dynamic(dequantizes: list[Node]) -> bool:
    """A dynamic pattern (torchao's affine ops: dynamically quantized linears only)."""
    return any(d.op in (quantized_decomposed.dequantize_per_tensor.tensor, AFFINE_DEQUANTIZE) for d in dequantizes)


def _static_output(node: Node, linear: DecomposedLinear | None, pad: Node | None) -> tuple[list[Node], Node | None]:
    """The nodes of the pattern from its pad to its output (op -> [relu/hardtanh]), and the node
    that reads the output: the pattern's quantize where it is one."""
    chain = ([pad] if pad is not None else []) + [node] + (list(linear.nodes) if linear is not None else [])
    output = linear.output if linear is not None else node.results[0]
    user = output.single_user()
    if user is not None and user.op in FUSED_ACTIVATIONS and user.input is output:
        after = user.results[0].single_user()
        if after is not None and after.op in QUANTIZE_OPS:
            chain.append(user)
            user = after
    return chain, user


# ------------------------------------------------------------------------------ weight-only


def weight_only_linear_reason(node: Node) -> str | None:
    """Why ``linear(x, dequantize_affine(w))`` cannot run in XNNPACK as an fp32 x int8 per-channel
    (qc8w) fully connected, or None (the bias not considered): :data:`.checks.WEIGHT_ONLY_LINEAR_CHECKS`.
    ``w`` is torchao's weight-only quantization (``IntxWeightOnlyConfig``, ExecuTorch's "8w"): a
    constant int8 weight per output channel, zero points 0; ``x`` fp32, not dequantized."""
    failure = first_failure(WEIGHT_ONLY_LINEAR_CHECKS, WeightOnlySubject(node, Options()))
    return None if failure is None else failure[1]


def weight_only_unit(
    node: Node, weight_dq: Node, layout: list[Node], options: Options
) -> tuple[Unit | None, Verdict | None]:
    """``linear(x, dequantize_affine(w))`` with torchao's int8 weight-only quantization
    (:func:`weight_only_linear_reason`): XNNPACK's fully connected with an fp32 input and a per-channel
    int8 filter, the weight's dequantize folded into it, as in a dynamically quantized linear
    (measured on the runtime: within 1e-6 of eager). Only a linear that ``to_edge`` kept whole: a
    decomposed one (``permute -> addmm``) is rebuilt by XNNPACK's preprocessing (ConvertToLinearPass,
    which walks from the addmm's weight through the dequantize to the placeholder) from the raw int8
    weight, its scales dropped: stock's result, wrong by ~1000x. And without a bias: ExecuTorch's
    serializer quantizes a bias whenever the weight is quantized and refuses it with an fp32 input,
    so ``xnnpack.weight-only-linear-bias`` adds the bias after the linear (planned as done when that
    rewrite is among ``options.rewrites``).
    The torchao dequantize has no ExecuTorch kernel: a weight-only linear XNNPACK cannot take makes
    the program unrunnable, so its verdict has the rule that raises ``NotLowerable``."""
    failure = first_failure(WEIGHT_ONLY_CHECKS, WeightOnlySubject(node, options))
    if failure is not None:
        return None, Verdict(False, AFFINE_RULE, f"int8 weight-only linear: {failure[1]}", failure[0].name)
    return Unit(node, [weight_dq] + layout + [node], FP32, [weight_dq]), None


# ---------------------------------------------------------------------------------- dynamic


def dynamic_unit(
    node: Node, options: Options, linear: DecomposedLinear | None = None
) -> tuple[Unit | None, Verdict | None]:
    """x -> choose_qparams -> quantize -> dequantize -> op(., dequantize(weight)), with
    quantized_decomposed's per-tensor ops (XNNPACK quantizes per token) or torchao's affine ones
    (per token; the weight per channel or per group of input channels): :data:`.checks.DYNAMIC_PATTERN_CHECKS`,
    then :data:`.checks.DYNAMIC_CHECKS`. For a decomposed linear (``linear``), the dequantize is
    that of the whole linear's input."""
    pattern = _dynamic_pattern(node, options, linear)
    if pattern is None:
        return NOT_A_PATTERN
    verdict = run_checks(DYNAMIC_PATTERN_CHECKS, pattern)
    if verdict is not None:
        return None, verdict
    if DYNAMIC not in options.precisions and linear is None and fp32_of_dequantized_weight(node, options):
        return NOT_A_PATTERN  # an fp32 linear on its dequantized input and weight (float_verdict decides)
    verdict = run_checks(DYNAMIC_CHECKS, pattern)
    if verdict is not None:
        return None, verdict
    p = pattern
    nodes = [p.choose, p.q, p.dq, p.weight] + list(p.layout) + [node] + (linear.nodes if linear is not None else [])
    return Unit(node, nodes, DYNAMIC, [p.q, p.dq, p.weight]), None


def _dynamic_pattern(node: Node, options: Options, linear: DecomposedLinear | None) -> DynamicPattern | None:
    """The dynamic pattern whose dequantize ``node`` (or its decomposed linear) reads, its
    quantize and choose_qparams as found (checked by DYNAMIC_PATTERN_CHECKS); None if it reads no
    dynamic dequantize."""
    if node.op not in LINEAR_OPS + (aten.convolution,):
        return None
    dq = (linear.input if linear is not None else node.input).producer
    if dq is None or dq.op not in DYNAMIC_PATTERNS:
        return None
    quantize_op, choose_op = DYNAMIC_PATTERNS[dq.op]
    q = data_operand(dq).producer
    choose = _scale_producer(q)
    if dq.op == AFFINE_DEQUANTIZE and not _reads_qparams_of(dq, choose, choose_op):
        return None  # an affine dequantize with fixed qparams: not dynamic quantization
    weight, layout = weight_dq(node.weight)
    return DynamicPattern(node, options, linear, dq, q, choose, quantize_op, choose_op, weight, tuple(layout))


def _scale_producer(q: Node | None) -> Node | None:
    """The node computing the scale ``q`` quantizes with (its choose_qparams, in a dynamic pattern)."""
    if q is None:
        return None
    if q.definition is not None and q.definition.has_operand("scale"):
        scale = q.operand("scale")
    else:  # torchao's quantize_affine is opaque (data, scale, zero_point); another op: its second operand
        scale = q.operands[1] if len(q.operands) > 1 else None
    return scale.producer if scale is not None else None


def _reads_qparams_of(dq: Node, choose: Node | None, choose_op: str) -> bool:
    """Whether torchao's dequantize ``dq`` reads its scale and zero point from ``choose``."""
    if choose is None or choose.op != choose_op:
        return False
    # (torchao's dequantize_affine is opaque: its operands are data, scale, zero_point)
    return len(dq.operands) >= 3 and dq.operands[1].producer is choose and dq.operands[2].producer is choose


# ------------------------------------------------------------------------------ conversions


def convert_unit(node: Node, options: Options) -> tuple[Unit | None, Verdict]:
    """A standalone per-tensor quantize or dequantize, run by XNNPACK as a conversion:
    :data:`.checks.CONVERT_CHECKS`."""
    verdict = run_checks(CONVERT_CHECKS, Subject(node, options))
    if verdict is not None:
        return None, verdict
    return Unit(node, [node], "convert"), SUPPORTED
