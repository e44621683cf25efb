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

from passes.fold_batch_norm import fold_target
from xir import DType, Graph, Node, TensorType, Value
from xir.ops import aten, quantized_decomposed

from .rules import (
    AFFINE_CHOOSE_QPARAMS,
    AFFINE_DEQUANTIZE,
    AFFINE_QUANTIZE,
    ALL_PRECISIONS,
    CHOOSE_QPARAMS_OPS,
    DEQUANTIZE_OPS,
    DYNAMIC,
    FP32,
    MAX_RANK,
    QUANTIZE_OPS,
    RULES,
    STATIC,
    dequantized_source,
    is_static,
    through_layout,
    weight_chain,
)

# what XNNPACK's FuseActivationPass folds into the op before it (a conv, a linear, ...): in a
# static unit the op's quantize may come after one of these; a clamp is not fused
FUSED_ACTIVATIONS = (aten.relu, aten.hardtanh)
GEMM_OPS = (aten.linear, aten.addmm, aten.mm, aten.convolution)
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
    linears: dict[int, "DecomposedLinear"] = attrs.field(factory=dict)  # decomposed_linears(graph)

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


def float_verdict(node: Node, options: Options, as_fp32: bool = False, dequantized_ok: bool = False) -> Verdict:
    """The verdict for ``node`` computed in float (fp32/f16/bf16). With ``as_fp32``: the verdict
    the same node would get if its bf16 values were fp32 (what a rewrite to fp32 would run). With
    ``dequantized_ok``: operands from dequantizes read as the float tensors they are (see
    :func:`float_between_conversions`)."""
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
    for v in () if dequantized_ok else node.operands:
        if v.producer is not None and v.producer.op in DEQUANTIZE_OPS and not float_gemm_of_dequantized_input(node, options) \
                and not fp32_of_dequantized_weight(node, options):
            return Verdict(False, "quant", "reads a dequantized tensor but is not a quantized pattern XNNPACK runs "
                                           "(e.g. a quantized op whose output is not quantized)")
    reason = rule.reject_reason(node, options)
    if reason:
        return Verdict(False, "constraint", reason)
    if node.op == aten.bmm and node.results[0].dtype is DType.bf16 and not as_fp32:
        return Verdict(False, "bf16", rule.bf16_reason)
    return SUPPORTED


def float_gemm_of_dequantized_input(node: Node, options: Options) -> bool:
    """A conv or linear in fp32 whose activation comes from a dequantize left outside, its weights
    float constants: what ExecuTorch's stock partitioner delegates when it partitions for fp32 only
    (``config_precisions=FP32``) a quantized program whose weight dequantizes were folded into
    constants (``constant_prop_pass``). The delegate reads the dequantized float tensor: the same
    numbers as eager. Only without static quantization among the precisions (no Q/DQ can then
    be folded into the op, nor run in XNNPACK beside it as a conversion) and with no weight behind
    a dequantize (that one would stay outside: not a constant in the delegate)."""
    if node.op not in GEMM_OPS or STATIC in options.precisions:
        return False
    if dequantized_source(node.input) is None:
        return False
    weights = node.definition.weights if node.definition is not None else ()
    return all(node.operand(name) is None or dequantized_source(node.operand(name)) is None for name in weights) and \
        all(v is node.input or v.producer is None or v.producer.op not in DEQUANTIZE_OPS for v in node.operands)


# quantized_decomposed's dequantizes with an ExecuTorch kernel (left outside, they run there)
_KERNEL_DEQUANTIZES = (quantized_decomposed.dequantize_per_tensor, quantized_decomposed.dequantize_per_tensor.tensor,
                       quantized_decomposed.dequantize_per_channel)


def fp32_of_dequantized_weight(node: Node, options: Options) -> bool:
    """With fp32 alone among the precisions (``config_precisions=FP32``: no static or dynamic
    quantization), a quantized linear delegated as stock's LinearConfig overwrites its precision:

    - ``to_edge_transform_and_lower``: an fp32 ``aten.linear`` whose activation and weight come from
      quantized_decomposed dequantizes left outside (the weight one of a constant), the bias absent or a
      float constant. The delegate reads the dequantized weight as a run-time fp32 tensor, which XNNPACK's
      fully connected takes (measured on the runtime: static per-tensor and per-channel, dynamic per-channel,
      ExecuTorch's op-test shapes, within 1.2e-6 of the converted pt2e module);
    - ``to_edge().to_backend()``: the ``permute_copy`` transposing such a dequantized 2-D constant weight of
      a decomposed linear (the addmm/mm stays outside: its weight is not a constant), as stock delegates it.

    The Q/DQ stay outside and run on ExecuTorch's quantized kernels."""
    if STATIC in options.precisions or DYNAMIC in options.precisions or FP32 not in options.precisions:
        return False

    def dequantized_constant(value: Value) -> bool:
        producer = value.producer
        return producer is not None and producer.op in _KERNEL_DEQUANTIZES and producer.operands[0].is_constant

    if node.op == aten.permute_copy:
        return node.operands[0].rank == 2 and dequantized_constant(node.operands[0])
    if node.op != aten.linear or not dequantized_constant(node.weight):
        return False
    source = node.input.producer
    if source is None or source.op not in _KERNEL_DEQUANTIZES[:2]:
        return False
    bias = node.operand("bias")
    return bias is None or bias.is_constant


def batch_norm_verdict(node: Node, options: Options) -> Verdict:
    """A batch norm runs in XNNPACK when it folds correctly into the conv/linear before it (the
    fold pass's own decision, :func:`passes.fold_batch_norm.fold_target`), or (fp32 only)
    decomposes into a per-channel multiply-add."""
    x = node.input
    if not all(r.is_unused() for r in node.results[1:]):
        return Verdict(False, "constraint", "its mean/var outputs are used")
    target, reason = fold_target(node)
    if x.producer is not None and x.producer.op == aten.linear and x.rank != 2:
        # XNNPACK's own preprocessing would fold it into the linear anyway, along the wrong dim
        return Verdict(False, "constraint", f"{reason}: XNNPACK 1.5.1 would fold it into the linear along that dim; "
                                            "xir's transform pass fold-batch-norm rewrites it as a multiply-add")
    folds = target is not None and (target.op != aten.convolution or x.rank in (3, 4))
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


# ------------------------------------------------------------------------- decomposed linears

MATMUL_OPS = (aten.addmm, aten.mm, aten.bmm)  # what ExecuTorch's ConvertToLinearPass rebuilds into a linear
TRANSPOSE_OPS = (aten.permute_copy, aten.t_copy)


@attrs.frozen
class DecomposedLinear:
    """A linear that ``to_edge`` decomposed: ``x -> view -> addmm/mm -> view`` (the views fold the
    batch dims into one and back, with symbolic sizes when the batch dims are dynamic), the weight
    read through its transpose.

    XNNPACK's preprocessing (``ConvertToLinearPass``) finds these nodes inside a delegate by their
    source (the ``torch.nn.Linear`` module or ``F.linear`` call they came from) and rebuilds one
    linear from the first input of the pattern to its last output, so the views never reach
    XNNPACK (a view with a symbolic size it could not define). Delegated together they are one
    linear on the N-D input; recognised only where that rebuild is exact (see
    :func:`decomposed_linears`)."""

    matmul: Node
    input: Value  # the linear's input (before the views)
    output: Value  # the linear's output (after the views)
    reshapes: tuple[Node, ...]  # the views, input side then output side
    sizes: tuple[Node, ...]  # the int arithmetic computing the views' symbolic sizes, read only by them
    transpose: Node  # the weight's transpose

    @property
    def nodes(self) -> list[Node]:
        return list(self.sizes) + list(self.reshapes) + [self.transpose, self.matmul]


def _linear_source_partitions(graph: Graph) -> dict:
    """FX node -> the source partition (``torch.nn.Linear`` / ``F.linear``) it belongs to, found
    exactly as XNNPACK's ``ConvertToLinearPass`` finds them; empty for a graph with no FX nodes."""
    fx_graph = next((n.fx_node.graph for n in graph if n.fx_node is not None), None)
    if fx_graph is None:
        return {}
    import torch
    from torch.fx.passes.utils.source_matcher_utils import get_source_partitions

    result = {}
    for partitions in get_source_partitions(fx_graph, [torch.nn.Linear, torch.nn.functional.linear]).values():
        for partition in partitions:
            for fx_node in partition.nodes:
                result[fx_node] = partition
    return result


def same_dim(a, b) -> bool:
    """Whether two dims are equal: ints, or symbolic sizes that are the same expression for every
    positive integer value of their symbols (torch.export writes ``s0`` as ``((s0**2)//s0)`` at times)."""
    if a == b:
        return True
    if isinstance(a, int) and isinstance(b, int):
        return False
    import sympy

    try:
        ea, eb = sympy.sympify(str(a)), sympy.sympify(str(b))
        positive = {s: sympy.Symbol(s.name, integer=True, positive=True) for s in ea.free_symbols | eb.free_symbols}
        return sympy.simplify(ea.subs(positive) - eb.subs(positive)) == 0
    except (sympy.SympifyError, TypeError, ValueError):
        return False


def _is_transpose(node: Node | None) -> bool:
    if node is None or node.op not in TRANSPOSE_OPS or node.operands[0].rank != 2:
        return False
    return node.op == aten.t_copy or [d % 2 for d in node.attributes.get("dims", [])] == [1, 0]


def decomposed_linears(graph: Graph) -> dict[int, DecomposedLinear]:
    """The decomposed linears of ``graph`` with their views, by ``id`` of the matrix multiply.

    One is recognised only where XNNPACK's preprocessing rebuilds it exactly from what a delegate
    holds: the matrix multiply is the only one of its source partition; the views on each side are
    of that partition and read by the next node only; the weight is the transpose of a value from
    outside the partition (a constant, or a dequantize), so the rebuilt linear reads the weight
    untransposed; the partition's only output is the last view; the linear's batch dims are the
    input's. A linear without views (2-D) needs nothing of this."""
    partitions = _linear_source_partitions(graph)
    if not partitions:
        return {}
    by_fx = {id(n.fx_node): n for n in graph if n.fx_node is not None}
    result: dict[int, DecomposedLinear] = {}
    for node in graph:
        if node.op not in (aten.addmm, aten.mm) or node.fx_node not in partitions:
            continue
        found = _decomposed_linear(node, partitions[node.fx_node], by_fx)
        if found is not None:
            result[id(node)] = found
    return result


def _decomposed_linear(matmul: Node, partition, by_fx: dict[int, Node]) -> DecomposedLinear | None:
    members = {id(n) for n in partition.nodes}

    def inside(n: Node | None) -> bool:
        return n is not None and n.fx_node is not None and id(n.fx_node) in members

    matmuls = [by_fx.get(id(n)) for n in partition.nodes]
    if sum(1 for n in matmuls if n is not None and n.op in MATMUL_OPS) != 1:
        return None  # (a module called twice: the delegate's rebuild would mix its calls up)
    before: list[Node] = []
    value = matmul.input
    while inside(value.producer) and value.producer.op == aten.view_copy and value.single_user() is not None:
        before.append(value.producer)
        value = value.producer.input
    source = value
    if inside(source.producer):
        return None
    after: list[Node] = []
    value = matmul.results[0]
    user = value.single_user()
    while user is not None and inside(user) and user.op == aten.view_copy:
        after.append(user)
        value = user.results[0]
        user = value.single_user()
    if not before or not after:
        return None
    output = value
    outputs = [n for n in partition.output_nodes if n.op != "placeholder" and "sym_size" not in str(n.target)]
    if len(outputs) != 1 or outputs[0] is not output.producer.fx_node:
        return None
    weight = matmul.weight
    transpose = weight.producer
    if not _is_transpose(transpose) or not inside(transpose) or weight.single_user() is not matmul:
        return None
    if inside(transpose.input.producer):
        return None
    if matmul.op == aten.addmm and inside(matmul.operand("bias").producer):
        return None
    if not (isinstance(source.type, TensorType) and isinstance(output.type, TensorType)) or source.rank < 1:
        return None
    if len(source.shape) != len(output.shape) or not all(
            same_dim(a, b) for a, b in zip(source.shape[:-1] + (source.shape[-1], output.shape[-1]),
                                           output.shape[:-1] + (matmul.input.shape[-1], matmul.results[0].shape[-1]))):
        return None
    reshapes = before[::-1] + after
    reshape_ids = {id(n) for n in reshapes}
    sizes: list[Node] = []
    for view in reshapes:
        for size in list(view.inputs())[1:]:
            producer = size.producer
            if producer is None or not inside(producer) or isinstance(size.type, TensorType) or producer in sizes:
                continue
            if all(id(u) in reshape_ids for r in producer.results for u in r.uses):
                sizes.append(producer)
    return DecomposedLinear(matmul, source, output, tuple(reshapes), tuple(sizes), transpose)


def decomposed_float_unit(linear: DecomposedLinear, options: Options) -> tuple[Unit | None, Verdict | None]:
    """A float decomposed linear as one unit (its views and size arithmetic with it); None and the
    reason when it cannot be one (the matrix multiply alone may still be delegated)."""
    verdict = float_verdict(linear.matmul, options)
    if not verdict.supported:
        return None, verdict
    if _dq_producer(linear.input) is not None:
        return None, Verdict(False, "quant", "reads a dequantized tensor")
    for view in linear.reshapes:
        problem = check_rank(view) or check_float_dtypes(view, options, True, "")
        if problem:
            return None, problem
    return Unit(linear.matmul, _weight_layout_nodes(linear.matmul) + linear.nodes), None


# -------------------------------------------------------------------------- quantized units

def _dq_producer(value: Value) -> Node | None:
    p = value.producer
    return p if p is not None and p.op in DEQUANTIZE_OPS else None


def _weight_dq(value: Value) -> tuple[Node | None, list[Node]]:
    """The dequantize behind a GEMM weight, seen through layout ops (a linear decomposed to
    addmm reads ``permute(dequantize(w))``), and those layout ops."""
    return dequantized_source(value), through_layout(value)[1]


def static_unit(node: Node, options: Options, linear: DecomposedLinear | None = None) -> tuple[Unit | None, Verdict | None]:
    """A statically quantized pattern anchored at ``node``: every float operand dequantized, the
    output (after an optional fused activation) quantized. None if ``node`` is not one. For a
    decomposed linear (``linear``), its input and output are those of the whole linear."""
    if linear is None and fp32_of_dequantized_weight(node, options):
        return None, None  # fp32 on dequantized tensors left outside (float_verdict decides)
    pad = _quantized_conv_pad(node)
    inputs = _static_inputs(node, options, linear, pad)
    if isinstance(inputs, _Decided):
        return inputs.unit, inputs.verdict
    quantized_inputs, layout = inputs
    chain, user = _static_output(node, linear, pad)
    if user is None or user.op != quantized_decomposed.quantize_per_tensor:
        return None, Verdict(False, "quant", "its inputs are quantized but its output is not: XNNPACK has no quantized "
                                             f"{node.op.split('.')[1]} with a float output, so it stays outside with its Q/DQ")
    verdict = _static_constraints(node, options, linear, pad, quantized_inputs, user)
    if verdict is not None:
        return None, verdict
    bias = node.operand("bias") if node.op in GEMM_OPS and node.op != aten.mm else None
    extra = [_dq_producer(bias)] if bias is not None and _dq_producer(bias) is not None else []
    for dq in quantized_inputs + extra:
        if dq.results[0].rank > MAX_RANK:
            return None, Verdict(False, "rank", f"{dq.results[0].rank}-D quantized input")
    implicit = list(dict.fromkeys(quantized_inputs + extra + [user]))
    return Unit(node, list(dict.fromkeys(implicit[:-1] + layout + chain + [user])), STATIC, implicit), None


@attrs.frozen
class _Decided:
    """What :func:`static_unit` answers, found before it has looked at the whole pattern."""

    unit: Unit | None = None
    verdict: Verdict | None = None


def _static_inputs(node: Node, options: Options, linear: DecomposedLinear | None,
                   pad: Node | None) -> tuple[list[Node], list[Node]] | _Decided:
    """The dequantizes of ``node``'s quantized inputs (data, then a GEMM's weight) and the layout
    ops between a GEMM weight and its dequantize; or the answer, where the inputs decide it."""
    if node.op not in GEMM_OPS:
        dqs = [_dq_producer(v) for v in node.operands if isinstance(v.type, TensorType)]
        if not dqs or any(d is None for d in dqs):
            return _Decided()
        return _not_dynamic(dqs, [])
    data = _dq_producer(linear.input if linear is not None else (pad.input if pad is not None else node.input))
    weight_dq, layout = _weight_dq(node.weight)
    if weight_dq is None and data is None:
        return _Decided()
    if weight_dq is not None and weight_dq.op == AFFINE_DEQUANTIZE:
        if data is None and node.op == aten.linear and linear is None:
            return _Decided(*weight_only_unit(node, weight_dq, layout, options))
        return _Decided(verdict=Verdict(False, AFFINE_RULE, AFFINE_DECOMPOSED))
    if weight_dq is None and float_gemm_of_dequantized_input(node, options):
        return _Decided()  # an fp32 op reading a dequantized activation (float_verdict decides)
    if weight_dq is None or data is None:
        return _Decided(verdict=Verdict(False, "quant", "only one of input and weight is quantized"))
    return _not_dynamic([data, weight_dq], layout)


def _not_dynamic(quantized_inputs: list[Node], layout: list[Node]) -> tuple[list[Node], list[Node]] | _Decided:
    if any(d.op in (quantized_decomposed.dequantize_per_tensor.tensor, AFFINE_DEQUANTIZE) for d in quantized_inputs):
        return _Decided()  # dynamic pattern (torchao's affine ops: dynamically quantized linears only)
    return quantized_inputs, layout


def _static_output(node: Node, linear: DecomposedLinear | None, pad: Node | None) -> tuple[list[Node], Node | None]:
    """The nodes of the pattern from its pad to its output (op -> [relu/hardtanh]), and the node
    that reads the output: the pattern's quantize where it is one."""
    chain = ([pad] if pad is not None else []) + [node] + (list(linear.nodes) if linear is not None else [])
    output = linear.output if linear is not None else node.results[0]
    user = output.single_user()
    if user is not None and user.op in FUSED_ACTIVATIONS and user.operands[0] is output:
        after = user.results[0].single_user()
        if after is not None and after.op in QUANTIZE_OPS:
            chain.append(user)
            user = after
    return chain, user


def _static_constraints(node: Node, options: Options, linear: DecomposedLinear | None, pad: Node | None,
                        quantized_inputs: list[Node], quantize: Node) -> Verdict | None:
    """Why XNNPACK cannot run the statically quantized pattern of ``node``, or None."""
    if STATIC not in options.precisions:
        return Verdict(False, "precision", "static quantization is not among config_precisions")
    rule = RULES.get(node.op)
    if rule is None or STATIC not in rule.precisions:
        return Verdict(False, "quant", "XNNPACK has no statically quantized version of this op")
    problem = check_rank(node) or next(filter(None, (check_rank(v) for v in (linear.reshapes if linear else ()))), None)
    if problem:
        return problem
    reason = rule.reject_reason(node, options) or (RULES[pad.op].reject_reason(pad, options) if pad is not None else None)
    if reason:
        return Verdict(False, "constraint", reason)
    if node.op in SAME_QPARAMS_OPS and _qparams(quantized_inputs[0]) != _qparams(quantize):
        return Verdict(False, "quant", "its input and output are quantized differently (XNNPACK's quantized "
                                       f"{node.op.split('.')[1]} keeps the quantization parameters)")
    if node.op == aten.convolution:
        reason = _quantized_conv_reason(node, quantized_inputs[1])
        if reason:
            return Verdict(False, "quant", reason)
    if node.op in GEMM_OPS and node.op != aten.convolution and _int4_odd_input_channels(quantized_inputs[1]):
        return Verdict(False, "quant", INT4_ODD_INPUT_CHANNELS.format(k=quantized_inputs[1].results[0].shape[-1]))
    return None


WEIGHT_ONLY_BIAS_REWRITE = "xnnpack.weight-only-linear-bias"


def weight_only_linear_reason(node: Node) -> str | None:
    """Why ``linear(x, dequantize_affine(w))`` cannot run in XNNPACK as an fp32 x int8 per-channel
    (qc8w) fully connected, or None (the bias not considered). ``w`` is torchao's weight-only
    quantization (``IntxWeightOnlyConfig``, ExecuTorch's "8w"): a constant int8 weight per output
    channel, zero points 0; ``x`` fp32, not dequantized."""
    weight_dq = dequantized_source(node.weight) if node.op == aten.linear else None
    if weight_dq is None or weight_dq.op != AFFINE_DEQUANTIZE:
        return "not a linear with a torchao-quantized weight"
    if _dq_producer(node.input) is not None:
        return "its input is quantized"
    reason = _affine_weight_reason(weight_dq)
    if reason is None:
        a = weight_dq.attributes
        group = (a.get("block_size") or [0, 0])[-1]
        if (a.get("quant_min"), a.get("quant_max")) == (-8, 7) or group != weight_dq.operands[0].shape[-1]:
            reason = "an int4 or group-wise weight (XNNPACK runs weight-only quantization with int8 weights per output channel)"
    if reason is None and node.input.dtype is not DType.f32:
        reason = f"a {node.input.dtype} input (XNNPACK's fully connected with an int8 weight takes fp32)"
    return reason


def weight_only_unit(node: Node, weight_dq: Node, layout: list[Node], options: Options) -> tuple[Unit | None, Verdict | None]:
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
    reason = weight_only_linear_reason(node)
    if reason is None and node.operand("bias") is not None and WEIGHT_ONLY_BIAS_REWRITE not in options.rewrites:
        reason = (f"a bias (ExecuTorch's XNNPACK serializer cannot take an fp32 bias with a quantized weight; xir's "
                  f"transform pass {WEIGHT_ONLY_BIAS_REWRITE} adds it after the linear: run transform_passes())")
    if reason is None and FP32 not in options.precisions:
        reason = "fp32 is not among config_precisions"
    if reason is None:
        reason = (check_rank(node) or check_float_dtypes(node, options, False, "") or Verdict(True)).reason or None
    if reason is None:
        reason = RULES[node.op].reject_reason(node, options)
    if reason is not None:
        return None, Verdict(False, AFFINE_RULE, f"int8 weight-only linear: {reason}")
    return Unit(node, [weight_dq] + layout + [node], FP32, [weight_dq]), None


def _quantized_conv_pad(conv: Node) -> Node | None:
    """The zero padding between a conv's dequantized input and the conv (what ``padding='same'``
    with an even kernel exports as: ``dequantize -> constant_pad_nd -> convolution``), delegated
    with the quantized conv as ExecuTorch's stock partitioner does (its ConvolutionConfig takes
    the pad as the conv's activation dependency). XNNPACK's preprocessing (InsertPadQDQPass) then
    quantizes the pad's output with its input's parameters, and XNNPACK pads in int8 with the
    zero point, which dequantizes to exactly 0.0: the same numbers as padding the float tensor.

    Only where that pass applies and the stock rule holds: a non-transposed conv, a pad read by
    the conv alone, value 0.0, no negative amounts, spatial dims only, its input a per-tensor
    dequantize (the default overload, which that pass looks for). None otherwise."""
    if conv.op != aten.convolution or conv.attributes.get("transposed", False):
        return None
    pad = conv.input.producer
    if pad is None or pad.op != aten.constant_pad_nd or conv.input.single_user() is not conv:
        return None
    source = pad.input.producer
    if source is None or source.op != quantized_decomposed.dequantize_per_tensor:
        return None
    spatial = 2 * (conv.weight.rank - 2)
    if not quantized_by_preprocessing(pad) or any(list(pad.attributes.get("pad") or [])[spatial:]):
        return None
    return pad


# XNNPACK moves quantized elements of these without requantizing: input and output must share qparams.
# hardtanh too: a quantized relu6 whose output XNNPACKQuantizer quantizes differently from its input
# (after a max pool) came out wrong by 1.1-1.4 (fuzz static seed 2427; stock's etal program too)
SAME_QPARAMS_OPS = (aten.slice_copy.Tensor, aten.view_copy, aten.permute_copy, aten.unsqueeze_copy,
                    aten.hardtanh)


def _qparams(node: Node) -> tuple:
    a = node.attributes
    return (a.get("scale"), a.get("zero_point"), a.get("dtype"))


def _quantized_conv_reason(conv: Node, weight_dq: Node) -> str | None:
    transposed = conv.attributes.get("transposed", False)
    groups = conv.attributes.get("groups", 1)
    per_channel = weight_dq.op == quantized_decomposed.dequantize_per_channel
    if transposed and per_channel:
        axis = weight_dq.attributes.get("axis", 0)
        if groups != 1:
            return f"per-channel quantized transposed conv with groups={groups} (XNNPACK rejects it)"
        if axis != 1:
            return f"per-channel quantized transposed conv quantized along axis {axis}, not the output-channel axis 1"
    return None


DYNAMIC_PATTERNS = {  # dequantize of the activation -> (its quantize, its choose_qparams)
    quantized_decomposed.dequantize_per_tensor.tensor: (quantized_decomposed.quantize_per_tensor.tensor,
                                                          quantized_decomposed.choose_qparams.tensor),
    AFFINE_DEQUANTIZE: (AFFINE_QUANTIZE, AFFINE_CHOOSE_QPARAMS),
}
LINEAR_OPS = (aten.linear, aten.addmm, aten.mm)
AFFINE_DECOMPOSED = ("a torchao-quantized weight, but not read by a linear whose input is torchao's per-token dynamic "
                     "quantization (a linear that to_edge decomposed, its quantize/dequantize ops inside the pattern: "
                     "ExecuTorch's XNNPACK preprocessing would rebuild the linear from the raw int8 weight; keep it "
                     "whole with to_edge_transform_and_lower)")
# the rule of a torchao-quantized linear XNNPACK cannot run: its quantize/dequantize ops have no
# ExecuTorch kernel, so left outside the program cannot run at all (the partitioner raises)
AFFINE_RULE = "affine"
# the same for a quantized_decomposed pattern whose ops ExecuTorch's kernels refuse (an fp16
# dynamically quantized linear XNNPACK gets wrong: choose_qparams aborts on fp16)
UNRUNNABLE_RULE = "unrunnable"


def dynamic_unit(node: Node, options: Options, linear: DecomposedLinear | None = None) -> tuple[Unit | None, Verdict | None]:
    """x -> choose_qparams -> quantize -> dequantize -> op(., dequantize(weight)), with
    quantized_decomposed's per-tensor ops (XNNPACK quantizes per token) or torchao's affine ones
    (per token; the weight per channel or per group of input channels).
    For a decomposed linear (``linear``), the dequantize is that of the whole linear's input."""
    if node.op not in LINEAR_OPS + (aten.convolution,):
        return None, None
    dq = (linear.input if linear is not None else node.input).producer
    if dq is None or dq.op not in DYNAMIC_PATTERNS:
        return None, None
    quantize_op, choose_op = DYNAMIC_PATTERNS[dq.op]
    affine = dq.op == AFFINE_DEQUANTIZE
    q = dq.operands[0].producer
    choose = q.operands[1].producer if q is not None and len(q.operands) > 1 else None
    if affine and (choose is None or choose.op != choose_op or len(dq.operands) < 3
                   or dq.operands[1].producer is not choose or dq.operands[2].producer is not choose):
        return None, None  # an affine dequantize with fixed qparams: not dynamic quantization
    if q is None or q.op != quantize_op:
        return None, Verdict(False, "quant", "dynamic dequantize without its quantize")
    if choose is None or choose.op != choose_op:
        return None, Verdict(False, "quant", "dynamic quantize without choose_qparams")
    if DYNAMIC not in options.precisions:
        if linear is None and fp32_of_dequantized_weight(node, options):
            return None, None  # an fp32 linear on its dequantized input and weight (float_verdict decides)
        return None, Verdict(False, "precision", "dynamic quantization is not among config_precisions")
    weight_dq, layout = _weight_dq(node.weight)
    if weight_dq is None or not weight_dq.operands[0].is_constant:
        return None, Verdict(False, "quant", "dynamically quantized input but the weight is not a quantized constant")
    verdict = _dynamic_quantization_verdict(node, affine, q, dq, choose, weight_dq)
    if verdict is not None:
        return None, verdict
    problem = check_rank(node) or check_rank(dq) or check_rank(choose) or \
        next(filter(None, (check_rank(v) for v in (linear.reshapes if linear else ()))), None) or \
        check_float_dtypes(node, options, True, "")
    if problem:
        return None, problem
    rule = RULES[node.op]
    reason = rule.reject_reason(node, options)
    if reason:
        return None, Verdict(False, "constraint", reason)
    nodes = [choose, q, dq, weight_dq] + layout + [node] + (linear.nodes if linear is not None else [])
    return Unit(node, nodes, DYNAMIC, [q, dq, weight_dq]), None


def _dynamic_quantization_verdict(node: Node, affine: bool, q: Node, dq: Node, choose: Node, weight_dq: Node) -> Verdict | None:
    """Why XNNPACK cannot run ``node`` on its dynamically quantized activation (``choose`` ->
    ``q`` -> ``dq``) and its quantized weight (``weight_dq``), or None: the quantization schemes
    (torchao's affine ones in a linear only, a per-channel weight otherwise, no int4 weight with
    an odd number of input channels) and, for a conv, what XNNPACK's dynamically quantized conv takes."""
    if affine:
        reason = _affine_activation_reason(q, dq, choose) or (
            "torchao's affine quantization runs in XNNPACK in a linear only" if node.op not in LINEAR_OPS else None)
        reason = reason or (_affine_weight_reason(weight_dq) if weight_dq.op == AFFINE_DEQUANTIZE else
                            "a torchao per-token activation with a quantized_decomposed weight")
        if reason:
            return Verdict(False, AFFINE_RULE, reason)
    elif weight_dq.op != quantized_decomposed.dequantize_per_channel:
        return Verdict(False, "quant", "dynamic quantization with a per-tensor weight (XNNPACK needs per-channel)")
    elif node.op in LINEAR_OPS and _int4_odd_input_channels(weight_dq):
        reason = INT4_ODD_INPUT_CHANNELS.format(k=weight_dq.results[0].shape[-1])
        if choose.operands[0].dtype is not DType.f32:  # left outside, it aborts the program at run time
            return Verdict(False, UNRUNNABLE_RULE, f"{reason}; and outside XNNPACK it cannot run either: ExecuTorch's "
                                                   f"choose_qparams kernel takes an fp32 input, this one is "
                                                   f"{choose.operands[0].dtype}")
        return Verdict(False, "quant", reason)
    if node.op == aten.convolution:
        groups, kernel = node.attributes.get("groups", 1), node.operands[1]
        if kernel.rank != 4:
            return Verdict(False, "quant", "a dynamically quantized conv must be 2-D")
        if groups != 1 and _depthwise(kernel.shape, groups, bool(node.attributes.get("transposed", False))):
            return Verdict(False, "quant", "a dynamically quantized conv cannot be depthwise")
        reason = _quantized_conv_reason(node, weight_dq)  # (a transposed one: weight per output channel, axis 1)
        if reason:
            return Verdict(False, "quant", reason)
    return None


def _depthwise(kernel_shape, groups: int, transposed: bool) -> bool:
    """One input channel per group (XNNPACK's depthwise conv, which has no dynamically quantized
    version). The kernel is (out, in/groups, ...), or (in, out/groups, ...) transposed."""
    return (kernel_shape[0] // groups if transposed else kernel_shape[1]) == 1


INT4_ODD_INPUT_CHANNELS = ("int4 weight (range [-8, 7]) per output channel with an odd number of input channels ({k}): "
                           "XNNPACK 1.5.1 computes every row but the first of a 2- to 15-row input wrong")


def _int4_odd_input_channels(weight_dq: Node) -> bool:
    """A linear's weight quantized per output channel to 4 bits (XNNPACK's qc4w), with an odd number
    of input channels. (Measured on the runtime: with such a weight, rows 2.. of an input of 2 to
    15 rows come out wrong, by as much as the outputs themselves; 16 rows and more, and 1 row, are
    right. An even number of input channels is right for every row count. fp16 activations
    (qd8-f16-qc4w) alike: wrong on 2 and 5 rows for 3 to 127 odd input channels, so the rule holds
    for every activation dtype.)"""
    if weight_dq.op != quantized_decomposed.dequantize_per_channel:
        return False
    a = weight_dq.attributes
    if (a.get("quant_min"), a.get("quant_max"), a.get("dtype")) != (-8, 7, DType.i8):
        return False
    weight = weight_dq.results[0]
    return weight.rank == 2 and isinstance(weight.shape[1], int) and weight.shape[1] % 2 == 1


def _affine_activation_reason(q: Node, dq: Node, choose: Node) -> str | None:
    """Why XNNPACK cannot run torchao's dynamic activation quantization as its own (per token,
    int8), or None. (XNNPACK computes the scale and zero point itself, per row.)"""
    x = q.operands[0]
    per_token = [1] * (x.rank - 1) + [x.shape[-1]] if x.rank else []
    for n in (choose, q, dq):
        block = n.attributes.get("block_size")
        if block is None or len(block) != x.rank or any(
                not same_dim(b, want) for b, want in zip(block, per_token)):
            return (f"activation quantized in blocks of {block}, not per token ({per_token}): XNNPACK quantizes "
                    "each row of the input")
    dtypes = {choose.attributes.get("target_dtype"), q.attributes.get("output_dtype"), dq.attributes.get("input_dtype")}
    if dtypes != {DType.i8}:
        return f"activation quantized to {', '.join(sorted(str(d) for d in dtypes))} (XNNPACK quantizes it to int8)"
    return None


def _affine_weight_reason(weight_dq: Node) -> str | None:
    """Why XNNPACK cannot take this torchao-quantized linear weight, or None. XNNPACK runs an int8
    weight per output channel (a group spanning every input channel) and an int4 one (values in
    [-8, 7]) per group of input channels, the group a multiple of 32; both symmetric (its weights
    have no zero point)."""
    operands = weight_dq.operands
    if len(operands) < 3:
        return "the weight's dequantize has no zero-point tensor (ExecuTorch's XNNPACK lowering reads one)"
    if not all(v.is_constant for v in operands[:3]):
        return "the weight's scales and zero points are not constants"
    weight, scale, zero_point = operands[:3]
    if weight.rank != 2 or not weight.type.is_static or not scale.type.is_static:
        return f"a {weight.rank}-D weight (XNNPACK's quantized linear takes a 2-D one)"
    block = weight_dq.attributes.get("block_size") or []
    out_channels, in_channels = weight.shape
    if len(block) != 2 or block[0] != 1 or not isinstance(block[1], int) or block[1] <= 0:
        return f"weight quantized in blocks of {block} (XNNPACK quantizes per output channel or per group of input channels)"
    group = block[1]
    if in_channels % group or scale.type.numel() * group != weight.type.numel():
        return f"weight groups of {group} do not tile its {in_channels} input channels with one scale each"
    if weight_dq.attributes.get("input_dtype") is not DType.i8 or weight.dtype is not DType.i8:
        return f"weight stored as {weight.dtype} (XNNPACK takes int8 data)"
    qmin, qmax = weight_dq.attributes.get("quant_min"), weight_dq.attributes.get("quant_max")
    if (qmin, qmax) == (-8, 7):
        if group % 32:
            return (f"Delegation to XNNPACK requires group_size to be a multiple of 32, but got {group} (the int4 weight "
                    f"is quantized in groups of {group} input channels)")
    elif qmin in (-128, -127) and qmax == 127:
        if group != in_channels:
            return f"int8 weight in groups of {group} input channels (XNNPACK groups int4 weights only)"
    else:
        return f"weight range [{qmin}, {qmax}] (XNNPACK takes int4 [-8, 7] or int8 weights)"
    if _all_zero(zero_point.data) is False:  # (unknown data: taken, as ExecuTorch's own partitioner does)
        return "weight zero points other than 0 (XNNPACK's quantized weights are symmetric: it would ignore them)"
    return None


def _all_zero(data) -> bool | None:
    """Whether a constant's data is all zeros; None when its data is not known here.

    ExecuTorch hands partitioners a copy of the program whose parameters are fake tensors (no
    data); the real tensor each was made from is found through the fake mode's memo. (The
    evaluation runs outside any fake mode the lowering may be in.)"""
    import torch

    try:
        from torch._subclasses.fake_tensor import FakeTensor, unset_fake_temporarily
    except ImportError:  # pragma: no cover (older torch)
        return None
    if isinstance(data, FakeTensor):
        data = _real_tensor_of(data)
    if not isinstance(data, torch.Tensor) or isinstance(data, FakeTensor):
        return None
    with unset_fake_temporarily():
        return not bool((data != 0).any())


def _real_tensor_of(fake):
    """The real tensor a fake one was made from (``fake_mode.from_tensor``), or None."""
    try:
        converter = fake.fake_mode.fake_tensor_converter
        memo = converter.tensor_memo
        ids = [tid for tid, value in memo.items() if value is fake]
        if not ids:
            return None
        for real, tid in converter.meta_converter.describer.lookup_tensor.items():
            if tid == ids[0]:
                return real
    except (AttributeError, TypeError, RuntimeError):  # private torch API: not worth failing for
        return None
    return None


def convert_unit(node: Node, options: Options) -> tuple[Unit | None, Verdict]:
    """A standalone per-tensor quantize or dequantize, run by XNNPACK as a conversion."""
    if STATIC not in options.precisions:
        return None, Verdict(False, "precision", "static quantization is not among config_precisions")
    if node.op not in (quantized_decomposed.quantize_per_tensor, quantized_decomposed.dequantize_per_tensor):
        return None, Verdict(False, "quant", "runs in XNNPACK only folded into a quantized op")
    problem = check_rank(node)
    if problem:
        return None, problem
    if node.attributes.get("dtype") not in (DType.i8, DType.u8):
        return None, Verdict(False, "dtype", f"quantized dtype {node.attributes.get('dtype')} (XNNPACK converts int8/uint8)")
    float_side = node.operands[0] if node.op == quantized_decomposed.quantize_per_tensor else node.results[0]
    if float_side.dtype is not DType.f32:
        return None, Verdict(False, "dtype", f"{float_side.dtype} float side (XNNPACK converts f32)")
    if node.op == quantized_decomposed.quantize_per_tensor and _quantizes_float_conv1d(node):
        return None, Verdict(False, "quant", QUANTIZED_FLOAT_CONV1D)
    return Unit(node, [node], "convert"), SUPPORTED


QUANTIZED_FLOAT_CONV1D = (
    "it quantizes the result of an fp32 1-D conv: in a delegate with that conv, XNNPACK's "
    "preprocessing (Conv1dUnsqueezePass) folds a quantization into the conv's output, and XNNPACK "
    "cannot make a conv of fp32 input and weight with an int8 output ('Failed to create "
    "deconvolution node', stock's program too; fuzz static seed 1301)")


def _quantizes_float_conv1d(quantize: Node) -> bool:
    """Whether ``quantize`` reads a 1-D conv (kernel of rank 3) with no dequantized weight, every
    reader of which quantizes. XNNPACK's Conv1dUnsqueezePass puts an implicit quantize/dequantize
    pair after such a conv, making its output int8. Outside the delegate, the quantize leaves the
    conv's result fp32 at the delegate's edge, and the conv runs in XNNPACK. A relu or hardtanh
    that is the conv's only reader counts as the conv: XNNPACK's FuseActivationPass, which runs
    before, folds it into the conv, whose readers are then the activation's (fuzz static seed
    2744: a grouped ConvTranspose1d, relu6, then a quantized linear; "Failed to create
    deconvolution node", stock's program too)."""
    source = quantize.operands[0].producer
    readers = source.results[0].users if source is not None else []
    if source is not None and source.op in FUSED_ACTIVATIONS:
        conv = source.operands[0].producer
        if conv is None or len({id(u) for u in conv.results[0].users}) != 1:
            return False
        source = conv
    # (a quantized conv, whose weight is a dequantize, has its quantize folded into its unit)
    return source is not None and is_float_conv1d(source) and all(user.op in QUANTIZE_OPS for user in readers)


def is_float_conv1d(node: Node) -> bool:
    """A 1-D conv (kernel of rank 3) whose weight is no dequantize: one XNNPACK's
    Conv1dUnsqueezePass makes 2-D in fp32, with quantizes and dequantizes of its own around it
    where its input is a dequantize or its readers all quantize."""
    if node.op != aten.convolution or node.weight.rank != 3:
        return False
    weight = node.weight.producer
    return weight is None or weight.op not in DEQUANTIZE_OPS


def quantized_by_preprocessing(pad: Node) -> bool:
    """Whether XNNPACK's preprocessing (InsertPadQDQPass) would quantize the output of this pad when
    it reads a dequantize, folded or not: padding value 0.0 and no negative amount (what that pass
    looks for). Such a pad between conversions would get an f32 input and an int8 output (measured:
    "Failed to create StaticConstantPad node" at load, with stock's program too; fuzz static seeds
    1074, 1098). Another value is left alone, and the pad runs in fp32 like the other ops (fuzz
    static seed 1243: stock delegates a pad with -1 and is right)."""
    amounts = list(pad.attributes.get("pad") or [])
    return float(pad.attributes.get("value", 0) or 0) == 0.0 and not any(
        not isinstance(a, int) or a < 0 for a in amounts)


def may_run_between_conversions(node: Node) -> bool:
    """The ops :func:`float_between_conversions` considers (and xnnpack.dequantize-per-float-reader
    gives a dequantize of their own): not a quantize/dequantize, not a pad XNNPACK's preprocessing
    would quantize (:func:`quantized_by_preprocessing`); a GEMM only as :func:`float_gemm_of_static_input`."""
    if node.op == aten.constant_pad_nd and quantized_by_preprocessing(node):
        return False
    if node.op in GEMM_OPS:
        return float_gemm_of_static_input(node)
    return node.op not in QUANTIZE_OPS and node.op not in DEQUANTIZE_OPS and node.op not in CHOOSE_QPARAMS_OPS


def float_gemm_of_static_input(node: Node) -> bool:
    """A conv or (whole) linear whose weights are float constants and whose activation is a
    statically quantized tensor dequantized: what XNNPACKQuantizer leaves when it quantizes the
    op's input for another reader but not the op (fuzz static seeds 1412, 1538). ExecuTorch's stock
    partitioner delegates it in fp32 (its weight is no dequantize), the dequantize beside it as a
    conversion. Not a decomposed linear (XNNPACK's preprocessing rebuilds it from its source
    partition), not a dynamically quantized activation."""
    if node.op not in (aten.convolution, aten.linear) or node.definition is None:
        return False
    source = node.input.producer
    if source is None or source.op != quantized_decomposed.dequantize_per_tensor:
        return False
    return all(node.operand(name) is None or node.operand(name).is_constant for name in node.definition.weights)


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
    GEMMs only with float constant weights (:func:`float_gemm_of_static_input`); not zero pads
    (:func:`quantized_by_preprocessing`)."""
    if STATIC not in options.precisions:
        return
    folded = {id(n) for unit in {id(u): u for u in unit_of.values()}.values() for n in unit.implicit}
    for node in graph:
        verdict = verdicts.get(id(node))
        if id(node) in unit_of or verdict is None or verdict.rule != "quant" or not may_run_between_conversions(node):
            continue
        dequantizes = [v.producer for v in node.operands if v.producer is not None and v.producer.op in DEQUANTIZE_OPS]
        if not dequantizes or any(id(dq) in folded or any(u is not node for u in dq.results[0].uses) for dq in dequantizes):
            continue
        as_float = float_verdict(node, options, dequantized_ok=True)
        if as_float.supported:
            verdicts[id(node)] = as_float
            claim(Unit(node, _weight_layout_nodes(node) + [node]))
        else:  # the reason it cannot run in fp32 either
            verdicts[id(node)] = Verdict(False, as_float.rule, f"{verdict.reason}; in fp32: {as_float.reason}")


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
    linears = decomposed_linears(graph)
    for node in graph:
        if node.op in qdq_ops:
            continue
        linear = linears.get(id(node))
        unit, problem = dynamic_unit(node, options, linear)
        if unit is None and problem is None:
            unit, problem = static_unit(node, options, linear)
        if unit is None and problem is None and linear is not None:
            unit, _ = decomposed_float_unit(linear, options)  # else: the matrix multiply alone, below
        if unit is not None:
            claim(unit)
            continue
        if problem is not None:
            verdicts[id(node)] = problem
            continue
        if id(node) in unit_of:
            continue  # a fused activation claimed by its op
        if node.op == aten._native_batch_norm_legit_no_training:
            verdict = batch_norm_verdict(node, options)
        else:
            verdict = float_verdict(node, options)
        verdicts[id(node)] = verdict
        if verdict.supported:
            claim(Unit(node, _weight_layout_nodes(node) + [node]))
    float_between_conversions(graph, options, verdicts, unit_of, claim)
    for node in graph:
        if node.op in qdq_ops and id(node) not in unit_of:
            unit, verdict = convert_unit(node, options)
            verdicts[id(node)] = verdict
            if unit is not None:
                claim(unit)
    return Capability(list(units.values()), verdicts, unit_of, linears)
