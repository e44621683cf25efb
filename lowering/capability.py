"""Capability: which nodes XNNPACK can run, as units, with a reason for every rejected node.

A *unit* is the smallest set of nodes that must be delegated together: a float op alone; a
statically quantized op with its input dequantizes, fused activation and output quantize; a
dynamically quantized op with its choose_qparams, quantize and dequantize. Units are what the
partitioner groups. Quantize/dequantize nodes inside a unit are only *proposed* as folded into
its op ("implicit"); the fold is committed by emission once the unit is really in a group.

Every node gets a :class:`Verdict`. A node is supported only if every node of its unit passes
the rule of its op, every input and output has rank <= 6 and an allowed dtype.
"""

from __future__ import annotations

from typing import Iterable

import attrs

from xir import DType, Graph, Node, TensorType, Value

from passes.fold_batch_norm import fold_target

from .rules import (
    ALL_PRECISIONS, CHOOSE_QPARAMS_OPS, DEQUANTIZE_OPS, DYNAMIC, FP32, MAX_RANK, QUANTIZE_OPS, RULES,
    STATIC, dequantized_source, is_static, through_layout, weight_chain,
)

FUSED_ACTIVATIONS = ("aten.relu", "aten.hardtanh", "aten.clamp")
GEMM_OPS = ("aten.linear", "aten.addmm", "aten.mm", "aten.convolution")
STATIC_QUANT_OPS = {op for op, rule in RULES.items() if STATIC in rule.precisions} - set(QUANTIZE_OPS) - set(DEQUANTIZE_OPS)
DYNAMIC_QUANT_OPS = {op for op, rule in RULES.items() if DYNAMIC in rule.precisions}


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
    rule: str = ""  # which rule decided: "op", "rank", "dtype", "bf16", "constraint", "quant", "unit"
    reason: str = ""


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

    def verdict(self, node: Node) -> Verdict:
        return self.verdicts.get(id(node), Verdict(False, "op", "not analysed"))


# ------------------------------------------------------------------------------ node checks

def _tensor_values(node: Node) -> Iterable[Value]:
    for v in node.operands:
        if isinstance(v.type, TensorType):
            yield v
    for r in node.results:
        if isinstance(r.type, TensorType) and (not r.is_unused() or r.index == 0):
            yield r


def check_rank(node: Node) -> Verdict | None:
    for v in list(node.operands) + list(node.results):
        if isinstance(v.type, TensorType) and v.rank > MAX_RANK:
            where = "input" if v.producer is not node else "output"
            return Verdict(False, "rank", f"{v.rank}-D {where} {v.type} (XNNPACK takes at most {MAX_RANK}-D tensors)")
    return None


def check_float_dtypes(node: Node, options: Options, allow_bf16: bool, bf16_reason: str) -> Verdict | None:
    dtypes = {v.dtype for v in _tensor_values(node)}
    allowed = {DType.f32, DType.f16}
    if DType.bf16 in dtypes:
        if not options.enable_bf16:
            return Verdict(False, "dtype", "bf16 (pass enable_bf16=True to delegate bf16 ops)")
        if not allow_bf16:
            return Verdict(False, "bf16", bf16_reason or "XNNPACK cannot define it in bf16")
        allowed.add(DType.bf16)
    bad = dtypes - allowed
    if bad:
        return Verdict(False, "dtype", f"dtype {', '.join(sorted(d.value for d in bad))} (XNNPACK runs f32, f16 and bf16 float ops)")
    operand_dtypes = {v.dtype for v in node.operands if isinstance(v.type, TensorType)}
    if len(operand_dtypes) > 1:
        return Verdict(False, "dtype", f"mixed operand dtypes {', '.join(sorted(d.value for d in operand_dtypes))}")
    for v in node.operands:
        if isinstance(v.type, TensorType) and v.type.numel() == 0:
            return Verdict(False, "constraint", "an empty tensor")
    return None


def float_verdict(node: Node, options: Options, as_fp32: bool = False) -> Verdict:
    """The verdict for ``node`` computed in float (fp32/f16/bf16). With ``as_fp32``: the verdict
    the same node would get if its bf16 values were fp32 (what a rewrite to fp32 would run)."""
    rule = RULES.get(node.op)
    if rule is None:
        if node.definition is None:
            return Verdict(False, "op", "opaque op: xir has no definition for it (xir.ops), so it is never delegated")
        return Verdict(False, "op", "XNNPACK has no rule for this op")
    if FP32 not in rule.precisions:
        return Verdict(False, "op", "only inside a quantized pattern")
    if FP32 not in options.precisions:
        return Verdict(False, "precision", "fp32 is not among config_precisions")
    for v in node.inputs():
        if not isinstance(v.type, TensorType):
            return Verdict(False, "constraint", f"a non-tensor operand of type {v.type} (e.g. a symbolic size)")
    if rule.structural:
        reason = rule.reject_reason(node, options)
        if reason:
            return Verdict(False, "constraint", reason)
    problem = check_rank(node) or check_float_dtypes(node, options, rule.bf16 or as_fp32, rule.bf16_reason)
    if problem:
        return problem
    for v in node.operands:
        if v.producer is not None and v.producer.op in DEQUANTIZE_OPS:
            return Verdict(False, "quant", "reads a dequantized tensor but is not a quantized pattern XNNPACK runs "
                                           "(e.g. a quantized op whose output is not quantized)")
    reason = rule.reject_reason(node, options)
    if reason:
        return Verdict(False, "constraint", reason)
    if node.op == "aten.bmm" and node.results[0].dtype is DType.bf16 and not as_fp32:
        return Verdict(False, "bf16", rule.bf16_reason)
    return SUPPORTED


def batch_norm_verdict(node: Node, options: Options) -> Verdict:
    """A batch norm runs in XNNPACK when it folds correctly into the conv/linear before it (the
    fold pass's own decision, :func:`passes.fold_batch_norm.fold_target`), or (fp32 only)
    decomposes into a per-channel multiply-add."""
    x = node.input
    if not all(r.is_unused() for r in node.results[1:]):
        return Verdict(False, "constraint", "its mean/var outputs are used")
    target, reason = fold_target(node)
    if x.producer is not None and x.producer.op == "aten.linear" and x.rank != 2:
        # XNNPACK's own preprocessing would fold it into the linear anyway, along the wrong dim
        return Verdict(False, "constraint", f"{reason}: XNNPACK 1.5.1 would fold it into the linear along that dim; "
                                            "xir's transform pass fold-batch-norm rewrites it as a multiply-add")
    folds = target is not None and (target.op != "aten.convolution" or x.rank in (3, 4))
    if x.dtype is DType.bf16:
        if not options.enable_bf16:
            return Verdict(False, "dtype", "bf16 (pass enable_bf16=True to delegate bf16 ops)")
        if not folds:
            return Verdict(False, "bf16", f"{RULES[node.op].bf16_reason} ({reason or 'its conv is not delegated'})")
    problem = check_rank(node) or check_float_dtypes(node, options, True, "")
    if problem:
        return problem
    if folds:
        return SUPPORTED
    if x.rank not in (2, 3, 4) or not isinstance(x.shape[1], int):
        return Verdict(False, "constraint", f"does not fold and cannot be decomposed ({x.rank}-D input)")
    if not all(is_static(v) for v in node.operands[1:]):
        return Verdict(False, "constraint", "its statistics are not constants")
    return SUPPORTED


# -------------------------------------------------------------------------- quantized units

def _dq_producer(value: Value) -> Node | None:
    p = value.producer
    return p if p is not None and p.op in DEQUANTIZE_OPS else None


def _weight_dq(value: Value) -> tuple[Node | None, list[Node]]:
    """The dequantize behind a GEMM weight, seen through layout ops (a linear decomposed to
    addmm reads ``permute(dequantize(w))``), and those layout ops."""
    return dequantized_source(value), through_layout(value)[1]


def static_unit(node: Node, options: Options) -> tuple[Unit | None, Verdict | None]:
    """A statically quantized pattern anchored at ``node``: every float operand dequantized, the
    output (after an optional fused activation) quantized. None if ``node`` is not one."""
    tensor_operands = [v for v in node.operands if isinstance(v.type, TensorType)]
    dqs = [_dq_producer(v) for v in tensor_operands]
    gemm = node.op in GEMM_OPS
    layout: list[Node] = []
    if gemm:
        data = [node.input]
        weight_dq, layout = _weight_dq(node.weight)
        if weight_dq is None and _dq_producer(data[0]) is None:
            return None, None
        if weight_dq is None or _dq_producer(data[0]) is None:
            return None, Verdict(False, "quant", "only one of input and weight is quantized")
        quantized_inputs = [_dq_producer(data[0]), weight_dq]
    else:
        if not tensor_operands or any(d is None for d in dqs):
            return None, None
        quantized_inputs = dqs
    if any(d.op == "quantized_decomposed.dequantize_per_tensor.tensor" for d in quantized_inputs):
        return None, None  # dynamic pattern
    # output: op -> [relu/hardtanh] -> quantize
    chain = [node]
    user = node.results[0].single_user()
    if user is not None and user.op in FUSED_ACTIVATIONS and user.operands[0] is node.results[0]:
        after = user.results[0].single_user()
        if after is not None and after.op in QUANTIZE_OPS:
            chain.append(user)
            user = after
    if user is None or user.op != "quantized_decomposed.quantize_per_tensor":
        return None, Verdict(False, "quant", "its inputs are quantized but its output is not: XNNPACK has no quantized "
                                             f"{node.op.split('.')[1]} with a float output, so it stays outside with its Q/DQ")
    if STATIC not in options.precisions:
        return None, Verdict(False, "precision", "static quantization is not among config_precisions")
    rule = RULES.get(node.op)
    if rule is None or STATIC not in rule.precisions:
        return None, Verdict(False, "quant", "XNNPACK has no statically quantized version of this op")
    problem = check_rank(node)
    if problem:
        return None, problem
    reason = rule.reject_reason(node, options)
    if reason:
        return None, Verdict(False, "constraint", reason)
    if node.op in SAME_QPARAMS_OPS and _qparams(quantized_inputs[0]) != _qparams(user):
        return None, Verdict(False, "quant", "its input and output are quantized differently (XNNPACK's quantized "
                                             f"{node.op.split('.')[1]} keeps the quantization parameters)")
    if node.op == "aten.convolution":
        reason = _quantized_conv_reason(node, quantized_inputs[1])
        if reason:
            return None, Verdict(False, "quant", reason)
    extra = []
    bias = node.operand("bias") if gemm and node.op != "aten.mm" else None
    if bias is not None and _dq_producer(bias) is not None:
        extra.append(_dq_producer(bias))
    for dq in quantized_inputs + extra:
        if dq.results[0].rank > MAX_RANK:
            return None, Verdict(False, "rank", f"{dq.results[0].rank}-D quantized input")
    implicit = list(dict.fromkeys(quantized_inputs + extra + [user]))
    return Unit(node, list(dict.fromkeys(implicit[:-1] + layout + chain + [user])), STATIC, implicit), None


# XNNPACK moves quantized elements of these without requantizing: input and output must share qparams
SAME_QPARAMS_OPS = ("aten.slice_copy.Tensor", "aten.view_copy", "aten.permute_copy", "aten.unsqueeze_copy")


def _qparams(node: Node) -> tuple:
    a = node.attributes
    return (a.get("scale"), a.get("zero_point"), a.get("dtype"))


def _quantized_conv_reason(conv: Node, weight_dq: Node) -> str | None:
    transposed = conv.attributes.get("transposed", False)
    groups = conv.attributes.get("groups", 1)
    per_channel = weight_dq.op == "quantized_decomposed.dequantize_per_channel"
    if transposed and per_channel:
        axis = weight_dq.attributes.get("axis", 0)
        if groups != 1:
            return f"per-channel quantized transposed conv with groups={groups} (XNNPACK rejects it)"
        if axis != 1:
            return f"per-channel quantized transposed conv quantized along axis {axis}, not the output-channel axis 1"
    return None


def dynamic_unit(node: Node, options: Options) -> tuple[Unit | None, Verdict | None]:
    """x -> choose_qparams -> quantize.tensor -> dequantize.tensor -> op(., dequantize(weight))."""
    if node.op not in ("aten.linear", "aten.addmm", "aten.mm", "aten.convolution"):
        return None, None
    dq = node.input.producer
    if dq is None or dq.op != "quantized_decomposed.dequantize_per_tensor.tensor":
        return None, None
    q = dq.operands[0].producer
    if q is None or q.op != "quantized_decomposed.quantize_per_tensor.tensor":
        return None, Verdict(False, "quant", "dynamic dequantize without its quantize")
    choose = q.operands[1].producer
    if choose is None or choose.op not in CHOOSE_QPARAMS_OPS:
        return None, Verdict(False, "quant", "dynamic quantize without choose_qparams")
    if DYNAMIC not in options.precisions:
        return None, Verdict(False, "precision", "dynamic quantization is not among config_precisions")
    weight_dq, layout = _weight_dq(node.weight)
    if weight_dq is None or not weight_dq.operands[0].is_constant:
        return None, Verdict(False, "quant", "dynamically quantized input but the weight is not a quantized constant")
    if weight_dq.op != "quantized_decomposed.dequantize_per_channel":
        return None, Verdict(False, "quant", "dynamic quantization with a per-tensor weight (XNNPACK needs per-channel)")
    if node.op == "aten.convolution" and (node.attributes.get("transposed", False) or node.attributes.get("groups", 1) != 1
                                          or node.operands[1].rank != 4):
        return None, Verdict(False, "quant", "dynamically quantized conv must be a plain 2-D, non-grouped conv")
    problem = check_rank(node) or check_rank(dq) or check_rank(choose)
    if problem:
        return None, problem
    rule = RULES[node.op]
    reason = rule.reject_reason(node, options)
    if reason:
        return None, Verdict(False, "constraint", reason)
    nodes = [choose, q, dq, weight_dq] + layout + [node]
    return Unit(node, nodes, DYNAMIC, [q, dq, weight_dq]), None


def convert_unit(node: Node, options: Options) -> tuple[Unit | None, Verdict]:
    """A standalone per-tensor quantize or dequantize, run by XNNPACK as a conversion."""
    if STATIC not in options.precisions:
        return None, Verdict(False, "precision", "static quantization is not among config_precisions")
    if node.op not in ("quantized_decomposed.quantize_per_tensor", "quantized_decomposed.dequantize_per_tensor"):
        return None, Verdict(False, "quant", "runs in XNNPACK only folded into a quantized op")
    problem = check_rank(node)
    if problem:
        return None, problem
    if node.attributes.get("dtype") not in (DType.i8, DType.u8):
        return None, Verdict(False, "dtype", f"quantized dtype {node.attributes.get('dtype')} (XNNPACK converts int8/uint8)")
    float_side = node.operands[0] if node.op == "quantized_decomposed.quantize_per_tensor" else node.results[0]
    if float_side.dtype is not DType.f32:
        return None, Verdict(False, "dtype", f"{float_side.dtype} float side (XNNPACK converts f32)")
    return Unit(node, [node], "convert"), SUPPORTED


# ------------------------------------------------------------------------------ the analysis

def _weight_layout_nodes(node: Node) -> list[Node]:
    """Layout ops that turn a constant into this GEMM's weight: delegated with it, so the weight
    stays a constant inside the delegate (in per-op mode too)."""
    if node.op not in GEMM_OPS:
        return []
    return weight_chain(node.weight) or []


def analyse(graph: Graph, options: Options) -> Capability:
    """Units and a verdict for every node of ``graph``."""
    verdicts: dict[int, Verdict] = {}
    units: dict[int, Unit] = {}  # insertion-ordered, keyed by id(unit)
    unit_of: dict[int, Unit] = {}

    def claim(unit: Unit) -> None:
        # a node already claimed by another unit (a shared Q/DQ) joins the two units
        merged = unit
        members = {id(n) for n in merged.nodes}
        for n in list(unit.nodes):
            other = unit_of.get(id(n))
            if other is not None and other is not merged:
                for m in other.nodes:
                    if id(m) not in members:
                        merged.nodes.append(m)
                        members.add(id(m))
                merged.implicit.extend(m for m in other.implicit if m not in merged.implicit)
                del units[id(other)]
                for m in other.nodes:
                    unit_of[id(m)] = merged
        for n in merged.nodes:
            unit_of[id(n)] = merged
            verdicts[id(n)] = SUPPORTED
        units[id(merged)] = merged

    qdq_ops = set(QUANTIZE_OPS) | set(DEQUANTIZE_OPS) | set(CHOOSE_QPARAMS_OPS)
    for node in graph:
        if node.op in qdq_ops:
            continue
        unit, problem = dynamic_unit(node, options)
        if unit is None and problem is None:
            unit, problem = static_unit(node, options)
        if unit is not None:
            claim(unit)
            continue
        if problem is not None:
            verdicts[id(node)] = problem
            continue
        if id(node) in unit_of:
            continue  # a fused activation claimed by its op
        if node.op == "aten._native_batch_norm_legit_no_training":
            verdict = batch_norm_verdict(node, options)
        else:
            verdict = float_verdict(node, options)
        verdicts[id(node)] = verdict
        if verdict.supported:
            claim(Unit(node, _weight_layout_nodes(node) + [node]))
    for node in graph:
        if node.op in qdq_ops and id(node) not in unit_of:
            unit, verdict = convert_unit(node, options)
            verdicts[id(node)] = verdict
            if unit is not None:
                claim(unit)
    return Capability(list(units.values()), verdicts, unit_of)
