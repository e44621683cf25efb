"""capability's named checks, in tables by what they check: each a small function over a
*subject* (the node, the options and the pattern a unit builder found around it) answering why
XNNPACK cannot run it, or None. The builders (:mod:`.floats`, :mod:`.quantized`) run a table and
take the first check that fires; tests/lowering/test_capability_checks.py has one IR-text program
per check.

Subjects: :class:`Subject` (one node: :data:`TENSOR_CHECKS`, :data:`CONVERT_CHECKS`),
:class:`FloatSubject` (:data:`FLOAT_CHECKS`), :class:`BatchNormSubject` (:data:`BATCH_NORM_CHECKS`),
:class:`StaticPattern` (:data:`STATIC_CHECKS`), :class:`DynamicPattern` (:data:`DYNAMIC_PATTERN_CHECKS`,
then :data:`DYNAMIC_CHECKS`), :class:`WeightOnlySubject` (:data:`WEIGHT_ONLY_CHECKS`); a
torchao-quantized weight is checked by :data:`AFFINE_WEIGHT_CHECKS` in the last two."""

from __future__ import annotations

import functools
from collections.abc import Iterable

import attrs

from passes.fold_batch_norm import fold_target
from xir import DType, Node, TensorType, Value
from xir.ops import aten, quantized_decomposed

from ..ops import xir_ops
from ..rules import (
    AFFINE_DEQUANTIZE,
    DYNAMIC,
    FP32,
    MAX_RANK,
    RULES,
    STATIC,
    SYMBOLIC_SLICE,
    dequantized_source,
    is_static,
)
from .base import (
    AFFINE_RULE,
    GEMM_OPS,
    LINEAR_OPS,
    UNRUNNABLE_RULE,
    Check,
    Options,
    data_operand,
    dq_producer,
    when,
)
from .linears import DecomposedLinear, same_dim
from .patterns import (
    SAME_QPARAMS_OPS,
    depthwise,
    float_gemm_of_dequantized_input,
    fp32_of_dequantized_weight,
    int4_odd_input_channels,
    qparams,
    quantizes_float_conv1d,
)

# ---------------------------------------------------------------------------------- subjects


@attrs.frozen
class Subject:
    """One node, under the tensor checks (``allow_bf16``: whether XNNPACK defines it in bf16)."""

    node: Node
    options: Options
    allow_bf16: bool = True
    bf16_reason: str = ""

    @property
    def rank_nodes(self) -> tuple[Node, ...]:
        return (self.node,)

    @functools.cached_property
    def dtypes(self) -> frozenset:
        return frozenset(v.dtype for v in tensor_values(self.node))


@attrs.frozen
class FloatSubject:
    """A node computed in float. ``as_fp32``: as if its bf16 values were fp32; ``dequantized_ok``:
    its dequantized operands read as the float tensors they are (see :func:`.floats.float_verdict`)."""

    node: Node
    options: Options
    as_fp32: bool = False
    dequantized_ok: bool = False

    @functools.cached_property
    def rule(self):
        return RULES.get(self.node.op)

    @property
    def allow_bf16(self) -> bool:
        return self.rule.bf16 or self.as_fp32

    @property
    def bf16_reason(self) -> str:
        return self.rule.bf16_reason

    @property
    def rank_nodes(self) -> tuple[Node, ...]:
        return (self.node,)

    @functools.cached_property
    def dtypes(self) -> frozenset:
        return frozenset(v.dtype for v in tensor_values(self.node))


@attrs.frozen
class BatchNormSubject:
    """A batch norm, with whether it folds into the conv/linear before it (and why not)."""

    node: Node
    options: Options
    folds: bool
    fold_reason: str
    allow_bf16 = True
    bf16_reason = ""

    @classmethod
    def of(cls, node: Node, options: Options) -> BatchNormSubject:
        target, reason = fold_target(node)
        folds = target is not None and (target.op != aten.convolution or node.input.rank in (3, 4))
        return cls(node, options, folds, reason)

    @property
    def rank_nodes(self) -> tuple[Node, ...]:
        return (self.node,)

    @functools.cached_property
    def dtypes(self) -> frozenset:
        return frozenset(v.dtype for v in tensor_values(self.node))


@attrs.frozen
class StaticPattern:
    """A statically quantized pattern: ``inputs`` the dequantizes of the op's quantized inputs
    (for a GEMM: data, then weight, None where that one is not dequantized), ``layout`` the
    layout ops between a GEMM weight and its dequantize, ``chain`` the nodes from the pad to the
    output (op, fused activation), ``quantize`` the node reading the output."""

    node: Node
    options: Options
    linear: DecomposedLinear | None
    pad: Node | None
    inputs: tuple
    layout: tuple
    chain: tuple
    quantize: Node | None

    @property
    def weight(self) -> Node | None:
        return self.inputs[1] if self.node.op in GEMM_OPS else None

    @property
    def bias_dq(self) -> Node | None:
        bias = self.node.operand("bias") if self.node.op in GEMM_OPS and self.node.op != aten.mm else None
        return dq_producer(bias) if bias is not None else None

    @property
    def rank_nodes(self) -> tuple[Node, ...]:
        return (self.node,) + (self.linear.reshapes if self.linear is not None else ())


@attrs.frozen
class DynamicPattern:
    """x -> ``choose`` -> ``q`` -> ``dq`` -> op(., ``weight``) (``weight``: the weight's dequantize,
    ``layout`` the layout ops after it); ``quantize_op``/``choose_op`` the ops ``dq`` pairs with."""

    node: Node
    options: Options
    linear: DecomposedLinear | None
    dq: Node
    q: Node | None
    choose: Node | None
    quantize_op: str
    choose_op: str
    weight: Node | None
    layout: tuple
    allow_bf16 = True
    bf16_reason = ""

    @property
    def affine(self) -> bool:
        return self.dq.op == AFFINE_DEQUANTIZE

    @property
    def rank_nodes(self) -> tuple[Node, ...]:
        return (self.node, self.dq, self.choose) + (self.linear.reshapes if self.linear is not None else ())

    @functools.cached_property
    def dtypes(self) -> frozenset:
        return frozenset(v.dtype for v in tensor_values(self.node))


@attrs.frozen
class WeightOnlySubject:
    """``linear(x, dequantize_affine(w))``: ``weight`` the dequantize (None if it is not one)."""

    node: Node
    options: Options
    allow_bf16 = False
    bf16_reason = ""

    @property
    def weight(self) -> Node | None:
        return dequantized_source(self.node.weight) if self.node.op == aten.linear else None

    @property
    def rank_nodes(self) -> tuple[Node, ...]:
        return (self.node,)

    @functools.cached_property
    def dtypes(self) -> frozenset:
        return frozenset(v.dtype for v in tensor_values(self.node))


# ---------------------------------------------------------------------------- tensor checks

BF16_DISABLED = "bf16 (pass enable_bf16=True to delegate bf16 ops)"


def tensor_values(node: Node) -> Iterable[Value]:
    """The tensors a node reads, and those of its results that are used (its first always)."""
    for v in node.operands:
        if isinstance(v.type, TensorType):
            yield v
    for r in node.results:
        if isinstance(r.type, TensorType) and (not r.is_unused() or r.index == 0):
            yield r


def _dtypes(s) -> frozenset:
    return s.dtypes  # (each subject's, computed once)


def _rank(s) -> str | None:
    for node in s.rank_nodes:
        for v in list(node.operands) + list(node.results):
            if isinstance(v.type, TensorType) and v.rank > MAX_RANK:
                where = "input" if v.producer is not node else "output"
                return f"{v.rank}-D {where} {v.type} (XNNPACK takes at most {MAX_RANK}-D tensors)"
    return None


def _bf16_disabled(s) -> str | None:
    return BF16_DISABLED if DType.bf16 in _dtypes(s) and not s.options.enable_bf16 else None


def _bf16_not_supported(s) -> str | None:
    if DType.bf16 in _dtypes(s) and not s.allow_bf16:
        return s.bf16_reason or "XNNPACK cannot define it in bf16"
    return None


def _dtype_not_allowed(s) -> str | None:
    bad = _dtypes(s) - {DType.f32, DType.f16, DType.bf16}  # (bf16 where the checks before let it through)
    return (
        f"dtype {', '.join(sorted(d.value for d in bad))} (XNNPACK runs f32, f16 and bf16 float ops)" if bad else None
    )


# ops whose definitions take operands of different dtypes (and check them): an fp32 linear on an
# fp16 weight (XNNPACK's fully connected widens the weight when the program loads)
MIXED_DTYPE_OPS = (xir_ops.linear_f16w,)


def _mixed_operand_dtypes(s) -> str | None:
    if s.node.op in MIXED_DTYPE_OPS:
        return None
    dtypes = {v.dtype for v in s.node.operands if isinstance(v.type, TensorType)}
    return f"mixed operand dtypes {', '.join(sorted(d.value for d in dtypes))}" if len(dtypes) > 1 else None


def _empty_tensor(s) -> str | None:
    empty = any(isinstance(v.type, TensorType) and v.type.numel() == 0 for v in s.node.operands)
    return "an empty tensor" if empty else None


RANK = Check("rank", "rank", _rank)
# what every float computation checks: the rank of its tensors, then their dtypes
TENSOR_CHECKS: tuple[Check, ...] = (
    RANK,
    Check("bf16-disabled", "dtype", _bf16_disabled),
    Check("bf16-not-supported", "bf16", _bf16_not_supported),
    Check("dtype-not-allowed", "dtype", _dtype_not_allowed),
    Check("mixed-operand-dtypes", "dtype", _mixed_operand_dtypes),
    Check("empty-tensor", "constraint", _empty_tensor),
)


# ----------------------------------------------------------------------------- float checks

FP32_NOT_CONFIGURED = "fp32 is not among config_precisions"
READS_DEQUANTIZED = (
    "reads a dequantized tensor but is not a quantized pattern XNNPACK runs "
    "(e.g. a quantized op whose output is not quantized)"
)


def _reads_dequantized(s: FloatSubject) -> str | None:
    node, options = s.node, s.options
    for v in node.operands:
        if (
            dq_producer(v) is not None
            and not float_gemm_of_dequantized_input(node, options)
            and not fp32_of_dequantized_weight(node, options)
        ):
            return READS_DEQUANTIZED
    return None


def _symbolic_size_operand(s) -> str | None:
    """A view or slice with a size computed at run time (``view_copy(x) {size=[1, %s, 4, 8]}``,
    ``slice_copy(x) {end=%s}``): ExecuTorch's XNNPACK serializer writes a reshape's sizes as
    integers, with at most one inferred (-1), and a slice's sizes as integers."""
    if s.node.op not in (aten.view_copy, aten.slice_copy.Tensor) or not any(True for _ in list(s.node.inputs())[1:]):
        return None
    if s.node.op == aten.slice_copy.Tensor:
        return SYMBOLIC_SLICE
    result = s.node.results[0].type
    symbolic = sum(1 for d in getattr(result, "shape", ()) if not isinstance(d, int))
    if symbolic > 1:
        return (
            f"the new shape has {symbolic} symbolic sizes: ExecuTorch's XNNPACK serializer writes a reshape's "
            "sizes as integers, with at most one inferred (-1)"
        )
    return (
        "a symbolic size in the new shape (ExecuTorch's XNNPACK serializer writes a reshape's sizes as integers; "
        "xir's transform pass shape-ops-as-views writes it as -1: run transform_passes())"
    )


def _non_tensor_operand(s) -> str | None:
    for v in s.node.inputs():
        if not isinstance(v.type, TensorType):
            return f"a non-tensor operand of type {v.type} (e.g. a symbolic size)"
    return None


def _op_constraint(s) -> str | None:
    return RULES[s.node.op].reject_reason(s.node, s.options)


FP32_NOT_CONFIGURED_CHECK = Check(
    "fp32-not-configured", "precision", lambda s: FP32_NOT_CONFIGURED if FP32 not in s.options.precisions else None
)
# the rule of the node's op (lowering.rules); an op with none is "op"
OP_CONSTRAINT = Check("op-constraint", "constraint", _op_constraint)
# float_verdict: a node computed in float (fp32, f16, bf16)
FLOAT_CHECKS: tuple[Check, ...] = (
    Check(
        "opaque-op",
        "op",
        lambda s: (
            s.rule is None
            and s.node.definition is None
            and "opaque op: xir has no definition for it (xir.ops), so it is never delegated"
        ),
    ),
    Check("no-rule", "op", lambda s: s.rule is None and "XNNPACK has no rule for this op"),
    Check("quantized-only", "op", lambda s: FP32 not in s.rule.precisions and "only inside a quantized pattern"),
    FP32_NOT_CONFIGURED_CHECK,
    Check("symbolic-size-operand", "constraint", _symbolic_size_operand),
    Check("non-tensor-operand", "constraint", _non_tensor_operand),
    # a check about the graph's structure decides before the rank and dtypes, whose reasons would hide it
    Check("structural-constraint", "constraint", _op_constraint, applies=lambda s: s.rule.structural),
    *TENSOR_CHECKS,
    Check("reads-dequantized", "quant", _reads_dequantized, applies=lambda s: not s.dequantized_ok),
    OP_CONSTRAINT,
)


# ------------------------------------------------------------------------ batch norm checks


def _after_nd_linear(s: BatchNormSubject) -> str | None:
    x = s.node.input
    if x.producer is not None and x.producer.op == aten.linear and x.rank != 2:
        # XNNPACK's own preprocessing would fold it into the linear anyway, along the wrong dim
        return (
            f"{s.fold_reason}: XNNPACK 1.5.1 would fold it into the linear along that dim; "
            "xir's transform pass fold-batch-norm rewrites it as a multiply-add"
        )
    return None


def _not_decomposable(s: BatchNormSubject) -> str | None:
    x = s.node.input
    if x.rank not in (2, 3, 4) or not isinstance(x.shape[1], int):
        return f"does not fold and cannot be decomposed ({x.rank}-D input)"
    return None


def _statistics_not_constant(s: BatchNormSubject) -> str | None:
    statistics = (s.node.operand(name) for name in ("weight", "bias", "running_mean", "running_var"))
    return None if all(is_static(v) for v in statistics if v is not None) else "its statistics are not constants"


def _bn_input_bf16(s: BatchNormSubject) -> bool:
    return s.node.input.dtype is DType.bf16


# batch_norm_verdict: a batch norm folds into the conv/linear before it, or (fp32) decomposes
BATCH_NORM_CHECKS: tuple[Check, ...] = (
    Check(
        "batch-norm-stats-used",
        "constraint",
        lambda s: not all(r.is_unused() for r in s.node.results[1:]) and "its mean/var outputs are used",
    ),
    Check("batch-norm-after-nd-linear", "constraint", _after_nd_linear),
    Check(
        "batch-norm-bf16-disabled",
        "dtype",
        lambda s: not s.options.enable_bf16 and BF16_DISABLED,
        applies=_bn_input_bf16,
    ),
    Check(
        "batch-norm-bf16-unfolded",
        "bf16",
        lambda s: f"{RULES[s.node.op].bf16_reason} ({s.fold_reason or 'its conv is not delegated'})",
        applies=lambda s: _bn_input_bf16(s) and not s.folds,
    ),
    *TENSOR_CHECKS,
    Check("batch-norm-not-decomposable", "constraint", _not_decomposable, applies=lambda s: not s.folds),
    Check("batch-norm-stats-not-constant", "constraint", _statistics_not_constant, applies=lambda s: not s.folds),
)


# decomposed_float_unit: a float decomposed linear as one unit (the subject: the DecomposedLinear;
# its views then pass TENSOR_CHECKS)
DECOMPOSED_LINEAR_CHECKS: tuple[Check, ...] = (
    Check(
        "decomposed-linear-dequantized-input",
        "quant",
        lambda linear: dq_producer(linear.input) is not None and "reads a dequantized tensor",
    ),
)


# -------------------------------------------------------------------- shared quantized checks

STATIC_NOT_CONFIGURED = "static quantization is not among config_precisions"
INT4_ODD_INPUT_CHANNELS = (
    "int4 weight (range [-8, 7]) per output channel with an odd number of input channels ({k}): "
    "XNNPACK 1.5.1 computes every row but the first of a 2- to 15-row input wrong"
)
AFFINE_DECOMPOSED = (
    "a torchao-quantized weight, but not read by a linear whose input is torchao's per-token dynamic "
    "quantization (a linear that to_edge decomposed, its quantize/dequantize ops inside the pattern: "
    "ExecuTorch's XNNPACK preprocessing would rebuild the linear from the raw int8 weight; keep it "
    "whole with to_edge_transform_and_lower)"
)


def _is_per_channel_transposed_conv(s) -> bool:
    return (
        s.node.op == aten.convolution
        and s.node.attributes.get("transposed", False)
        and s.weight.op == quantized_decomposed.dequantize_per_channel
    )


def _transposed_conv_groups(s) -> str | None:
    groups = s.node.attributes.get("groups", 1)
    return f"per-channel quantized transposed conv with groups={groups} (XNNPACK rejects it)" if groups != 1 else None


def _transposed_conv_axis(s) -> str | None:
    axis = s.weight.attributes.get("axis", 0)
    if axis != 1:
        return f"per-channel quantized transposed conv quantized along axis {axis}, not the output-channel axis 1"
    return None


def _int4_odd(s) -> str | None:
    if s.node.op in LINEAR_OPS and int4_odd_input_channels(s.weight):
        return INT4_ODD_INPUT_CHANNELS.format(k=s.weight.results[0].shape[-1])
    return None


STATIC_NOT_CONFIGURED_CHECK = Check(
    "static-not-configured", "precision", lambda s: STATIC not in s.options.precisions and STATIC_NOT_CONFIGURED
)
# a quantized conv's weight scheme (static and dynamic: the weight per output channel, axis 1, when transposed)
QUANTIZED_CONV_CHECKS: tuple[Check, ...] = (
    Check(
        "transposed-conv-per-channel-groups", "quant", _transposed_conv_groups, applies=_is_per_channel_transposed_conv
    ),
    Check("transposed-conv-per-channel-axis", "quant", _transposed_conv_axis, applies=_is_per_channel_transposed_conv),
)
INT4_ODD_INPUT_CHANNELS_CHECK = Check("int4-odd-input-channels", "quant", _int4_odd)


# ---------------------------------------------------------------------------- static checks


def _one_side_quantized(s: StaticPattern) -> str | None:
    missing = s.node.op in GEMM_OPS and (s.inputs[0] is None or s.inputs[1] is None)
    return "only one of input and weight is quantized" if missing else None


def _output_not_quantized(s: StaticPattern) -> str | None:
    if s.quantize is None or s.quantize.op != quantized_decomposed.quantize_per_tensor:
        return (
            "its inputs are quantized but its output is not: XNNPACK has no quantized "
            f"{s.node.op.split('.')[1]} with a float output, so it stays outside with its Q/DQ"
        )
    return None


def _no_static_version(s: StaticPattern) -> str | None:
    rule = RULES.get(s.node.op)
    return (
        "XNNPACK has no statically quantized version of this op"
        if rule is None or STATIC not in rule.precisions
        else None
    )


def _requantizing(s: StaticPattern) -> str | None:
    if s.node.op in SAME_QPARAMS_OPS and qparams(s.inputs[0]) != qparams(s.quantize):
        return (
            "its input and output are quantized differently (XNNPACK's quantized "
            f"{s.node.op.split('.')[1]} keeps the quantization parameters)"
        )
    return None


def _quantized_input_rank(s: StaticPattern) -> str | None:
    for dq in list(s.inputs) + ([s.bias_dq] if s.bias_dq is not None else []):
        if dq.results[0].rank > MAX_RANK:
            return f"{dq.results[0].rank}-D quantized input"
    return None


# static_unit: every float operand of the op dequantized, its output (after a fused activation) quantized
STATIC_CHECKS: tuple[Check, ...] = (
    Check(
        "affine-weight-in-static-pattern",
        AFFINE_RULE,
        lambda s: AFFINE_DECOMPOSED,
        applies=lambda s: s.weight is not None and s.weight.op == AFFINE_DEQUANTIZE,
    ),
    Check("one-side-quantized", "quant", _one_side_quantized),
    Check("output-not-quantized", "quant", _output_not_quantized),
    STATIC_NOT_CONFIGURED_CHECK,
    Check("no-static-version", "quant", _no_static_version),
    RANK,
    OP_CONSTRAINT,
    Check(
        "pad-constraint",
        "constraint",
        lambda s: RULES[s.pad.op].reject_reason(s.pad, s.options),
        applies=lambda s: s.pad is not None,
    ),
    Check("requantizing-op", "quant", _requantizing),
    *QUANTIZED_CONV_CHECKS,
    INT4_ODD_INPUT_CHANNELS_CHECK,
    Check("quantized-input-rank", "rank", _quantized_input_rank),
)


# ----------------------------------------------------------------- torchao affine weight checks
# torchao's dequantize_affine is opaque to xir (no definition in xir.ops): its operands (data,
# scale, zero_point) are read by position, its block size, dtypes and range are attributes.


def _affine_qparams_not_constant(s) -> str | None:
    if not all(v.is_constant for v in s.weight.operands[:3]):  # (opaque: data, scale, zero_point)
        return "the weight's scales and zero points are not constants"
    return None


def _affine_not_2d(s) -> str | None:
    weight, scale = s.weight.operands[:2]  # (opaque: data, scale)
    if weight.rank != 2 or not weight.type.is_static or not scale.type.is_static:
        return f"a {weight.rank}-D weight (XNNPACK's quantized linear takes a 2-D one)"
    return None


def _block(s) -> list:
    return s.weight.attributes.get("block_size") or []


def _affine_block_size(s) -> str | None:
    block = _block(s)
    if len(block) != 2 or block[0] != 1 or not isinstance(block[1], int) or block[1] <= 0:
        return f"weight quantized in blocks of {block} (XNNPACK quantizes per output channel or per group of input channels)"
    return None


def _affine_groups_do_not_tile(s) -> str | None:
    weight, scale = s.weight.operands[:2]  # (opaque: data, scale)
    group, in_channels = _block(s)[1], weight.shape[1]
    if in_channels % group or scale.type.numel() * group != weight.type.numel():
        return f"weight groups of {group} do not tile its {in_channels} input channels with one scale each"
    return None


def _affine_not_int8_data(s) -> str | None:
    weight = s.weight.operands[0]  # (opaque: data first)
    if s.weight.attributes.get("input_dtype") is not DType.i8 or weight.dtype is not DType.i8:
        return f"weight stored as {weight.dtype} (XNNPACK takes int8 data)"
    return None


def _weight_range(s) -> tuple:
    return s.weight.attributes.get("quant_min"), s.weight.attributes.get("quant_max")


def _is_int4(s) -> bool:
    return _weight_range(s) == (-8, 7)


def _is_int8(s) -> bool:
    qmin, qmax = _weight_range(s)
    return qmin in (-128, -127) and qmax == 127


def _int4_group_size(s) -> str | None:
    group = _block(s)[1]
    if group % 32:
        return (
            f"Delegation to XNNPACK requires group_size to be a multiple of 32, but got {group} (the int4 weight "
            f"is quantized in groups of {group} input channels)"
        )
    return None


def _int8_grouped(s) -> str | None:
    group, in_channels = _block(s)[1], s.weight.operands[0].shape[1]  # (opaque: data first)
    return (
        f"int8 weight in groups of {group} input channels (XNNPACK groups int4 weights only)"
        if group != in_channels
        else None
    )


def _affine_zero_points(s) -> str | None:
    # (unknown data: taken, as ExecuTorch's own partitioner does)
    if _all_zero(s.weight.operands[2].data) is False:  # (opaque: data, scale, zero_point)
        return "weight zero points other than 0 (XNNPACK's quantized weights are symmetric: it would ignore them)"
    return None


# a torchao-quantized linear weight (subject.weight its dequantize_affine). XNNPACK runs an int8
# weight per output channel (a group spanning every input channel) and an int4 one (values in
# [-8, 7]) per group of input channels, the group a multiple of 32; both symmetric (its weights
# have no zero point)
AFFINE_WEIGHT_CHECKS: tuple[Check, ...] = (
    Check(
        "affine-weight-no-zero-point",
        AFFINE_RULE,
        lambda s: (
            len(s.weight.operands) < 3
            and ("the weight's dequantize has no zero-point tensor (ExecuTorch's XNNPACK lowering reads one)")
        ),
    ),
    Check("affine-weight-qparams-not-constant", AFFINE_RULE, _affine_qparams_not_constant),
    Check("affine-weight-not-2d", AFFINE_RULE, _affine_not_2d),
    Check("affine-weight-block-size", AFFINE_RULE, _affine_block_size),
    Check("affine-weight-groups-do-not-tile", AFFINE_RULE, _affine_groups_do_not_tile),
    Check("affine-weight-not-int8-data", AFFINE_RULE, _affine_not_int8_data),
    Check("int4-weight-group-size", AFFINE_RULE, _int4_group_size, applies=_is_int4),
    Check("int8-weight-grouped", AFFINE_RULE, _int8_grouped, applies=_is_int8),
    Check(
        "affine-weight-range",
        AFFINE_RULE,
        lambda s: "weight range [{}, {}] (XNNPACK takes int4 [-8, 7] or int8 weights)".format(*_weight_range(s)),
        applies=lambda s: not _is_int4(s) and not _is_int8(s),
    ),
    Check("affine-weight-zero-points", AFFINE_RULE, _affine_zero_points),
)


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


# --------------------------------------------------------------------------- dynamic checks


def _affine_activation_blocks(s: DynamicPattern) -> str | None:
    x = s.q.operands[0]  # (torchao's quantize_affine is opaque: its data first)
    per_token = [1] * (x.rank - 1) + [x.shape[-1]] if x.rank else []
    for n in (s.choose, s.q, s.dq):
        block = n.attributes.get("block_size")
        if block is None or len(block) != x.rank or any(not same_dim(b, want) for b, want in zip(block, per_token)):
            return (
                f"activation quantized in blocks of {block}, not per token ({per_token}): XNNPACK quantizes "
                "each row of the input"
            )
    return None


def _affine_activation_dtype(s: DynamicPattern) -> str | None:
    dtypes = {
        s.choose.attributes.get("target_dtype"),
        s.q.attributes.get("output_dtype"),
        s.dq.attributes.get("input_dtype"),
    }
    if dtypes != {DType.i8}:
        return f"activation quantized to {', '.join(sorted(str(d) for d in dtypes))} (XNNPACK quantizes it to int8)"
    return None


def _int4_odd_unrunnable(s: DynamicPattern) -> str | None:
    reason, dtype = _int4_odd(s), s.choose.input.dtype
    if reason and dtype is not DType.f32:  # left outside, it aborts the program at run time
        return (
            f"{reason}; and outside XNNPACK it cannot run either: ExecuTorch's choose_qparams kernel takes "
            f"an fp32 input, this one is {dtype}"
        )
    return None


def _dynamic_depthwise(s: DynamicPattern) -> str | None:
    groups, kernel = s.node.attributes.get("groups", 1), s.node.weight
    if groups != 1 and depthwise(kernel.shape, groups, bool(s.node.attributes.get("transposed", False))):
        return "a dynamically quantized conv cannot be depthwise"
    return None


def _affine(s: DynamicPattern) -> bool:
    return s.affine


def _not_affine(s: DynamicPattern) -> bool:
    return not s.affine


def _is_conv(s) -> bool:
    return s.node.op == aten.convolution


# dynamic_unit, first: the pattern x -> choose_qparams -> quantize -> dequantize is whole
DYNAMIC_PATTERN_CHECKS: tuple[Check, ...] = (
    Check(
        "dynamic-dequantize-without-quantize",
        "quant",
        lambda s: (s.q is None or s.q.op != s.quantize_op) and "dynamic dequantize without its quantize",
    ),
    Check(
        "dynamic-quantize-without-choose-qparams",
        "quant",
        lambda s: (s.choose is None or s.choose.op != s.choose_op) and "dynamic quantize without choose_qparams",
    ),
)
# then (unless an fp32 linear reads it: float_verdict decides) what XNNPACK's dynamically
# quantized linear and conv take: the quantization schemes (torchao's affine ones in a linear
# only, a per-channel weight otherwise, no int4 weight with an odd number of input channels), a
# 2-D, non-depthwise conv, then the op's tensors and rule
DYNAMIC_CHECKS: tuple[Check, ...] = (
    Check(
        "dynamic-not-configured",
        "precision",
        lambda s: DYNAMIC not in s.options.precisions and ("dynamic quantization is not among config_precisions"),
    ),
    Check(
        "dynamic-weight-not-quantized-constant",
        "quant",
        lambda s: (
            (s.weight is None or not data_operand(s.weight).is_constant)
            and ("dynamically quantized input but the weight is not a quantized constant")
        ),
    ),
    Check("affine-activation-not-per-token", AFFINE_RULE, _affine_activation_blocks, applies=_affine),
    Check("affine-activation-not-int8", AFFINE_RULE, _affine_activation_dtype, applies=_affine),
    Check(
        "affine-outside-linear",
        AFFINE_RULE,
        lambda s: s.node.op not in LINEAR_OPS and ("torchao's affine quantization runs in XNNPACK in a linear only"),
        applies=_affine,
    ),
    Check(
        "affine-activation-decomposed-weight",
        AFFINE_RULE,
        lambda s: (
            s.weight.op != AFFINE_DEQUANTIZE and ("a torchao per-token activation with a quantized_decomposed weight")
        ),
        applies=_affine,
    ),
    *when(_affine, AFFINE_WEIGHT_CHECKS),
    Check(
        "dynamic-per-tensor-weight",
        "quant",
        lambda s: (
            s.weight.op != quantized_decomposed.dequantize_per_channel
            and ("dynamic quantization with a per-tensor weight (XNNPACK needs per-channel)")
        ),
        applies=_not_affine,
    ),
    Check("int4-odd-input-channels-unrunnable", UNRUNNABLE_RULE, _int4_odd_unrunnable, applies=_not_affine),
    INT4_ODD_INPUT_CHANNELS_CHECK,
    Check(
        "dynamic-conv-not-2d",
        "quant",
        lambda s: s.node.weight.rank != 4 and ("a dynamically quantized conv must be 2-D"),
        applies=_is_conv,
    ),
    Check("dynamic-conv-depthwise", "quant", _dynamic_depthwise, applies=_is_conv),
    *QUANTIZED_CONV_CHECKS,
    *TENSOR_CHECKS,
    OP_CONSTRAINT,
)


# ----------------------------------------------------------------------- weight-only checks

WEIGHT_ONLY_BIAS_REWRITE = "xnnpack.weight-only-linear-bias"


def _weight_only_int4_or_grouped(s: WeightOnlySubject) -> str | None:
    group = _block(s)[-1] if _block(s) else 0
    if _is_int4(s) or group != s.weight.operands[0].shape[-1]:  # (opaque: data first)
        return (
            "an int4 or group-wise weight (XNNPACK runs weight-only quantization with int8 weights per output channel)"
        )
    return None


def _weight_only_bias(s: WeightOnlySubject) -> str | None:
    if s.node.operand("bias") is not None and WEIGHT_ONLY_BIAS_REWRITE not in s.options.rewrites:
        return (
            f"a bias (ExecuTorch's XNNPACK serializer cannot take an fp32 bias with a quantized weight; xir's "
            f"transform pass {WEIGHT_ONLY_BIAS_REWRITE} adds it after the linear: run transform_passes())"
        )
    return None


WEIGHT_ONLY_DEQUANTIZES = (AFFINE_DEQUANTIZE, quantized_decomposed.dequantize_per_channel)


def _is_affine(s) -> bool:
    return s.weight.op == AFFINE_DEQUANTIZE


def _is_per_channel(s) -> bool:
    return s.weight.op == quantized_decomposed.dequantize_per_channel


def _per_channel_weight(s: WeightOnlySubject) -> str | None:
    """A per-channel dequantized weight as XNNPACK's qc8w filter: a 2-D static int8 constant,
    quantized along its output channels (axis 0) in [-128|-127, 127], constant scales, zero points
    constant and 0 (XNNPACK's int8 weights are symmetric)."""
    dq = s.weight
    weight, scales = dq.input, dq.operand("scales")
    zero_points = dq.operand("zero_points")
    if weight.rank != 2 or not weight.type.is_static:
        return f"a {weight.rank}-D weight (XNNPACK's quantized linear takes a 2-D one)"
    if dq.attributes.get("axis") not in (0, -2):
        return f"a weight quantized along axis {dq.attributes.get('axis')}, not its output channels (axis 0)"
    if weight.dtype is not DType.i8 or dq.attributes.get("dtype") is not DType.i8:
        return f"weight stored as {weight.dtype} (XNNPACK takes int8 data)"
    if not _is_int8(s):
        return "weight range [{}, {}] (XNNPACK's weight-only linear takes int8 weights)".format(*_weight_range(s))
    if not scales.is_constant or zero_points is None or not zero_points.is_constant:
        return "the weight's scales and zero points are not constants"
    if _all_zero(zero_points.data) is False:
        return "weight zero points other than 0 (XNNPACK's quantized weights are symmetric: it would ignore them)"
    return None


# weight_only_linear_reason: linear(x, dequantize(w)) as XNNPACK's fp32 x int8 per-channel (qc8w)
# fully connected, the bias not considered. The dequantize is torchao's (IntxWeightOnlyConfig) or a
# per-channel one (what xnnpack.weight-only-int8-linear writes for ExecuTorch's qmode int8)
WEIGHT_ONLY_LINEAR_CHECKS: tuple[Check, ...] = (
    Check(
        "weight-only-not-quantized-linear",
        AFFINE_RULE,
        lambda s: (
            (s.weight is None or s.weight.op not in WEIGHT_ONLY_DEQUANTIZES)
            and "not a linear with an int8-quantized weight"
        ),
    ),
    Check(
        "weight-only-quantized-input",
        AFFINE_RULE,
        lambda s: dq_producer(s.node.input) is not None and "its input is quantized",
    ),
    *when(_is_affine, AFFINE_WEIGHT_CHECKS),
    Check("weight-only-int4-or-grouped", AFFINE_RULE, _weight_only_int4_or_grouped, applies=_is_affine),
    Check("weight-only-per-channel-weight", AFFINE_RULE, _per_channel_weight, applies=_is_per_channel),
    Check(
        "weight-only-input-dtype",
        AFFINE_RULE,
        lambda s: (
            s.node.input.dtype is not DType.f32
            and (f"a {s.node.input.dtype} input (XNNPACK's fully connected with an int8 weight takes fp32)")
        ),
    ),
)
# weight_only_unit: the whole unit (every reason then prefixed "int8 weight-only linear: ", rule "affine")
WEIGHT_ONLY_CHECKS: tuple[Check, ...] = (
    *WEIGHT_ONLY_LINEAR_CHECKS,
    Check("weight-only-bias", AFFINE_RULE, _weight_only_bias),
    FP32_NOT_CONFIGURED_CHECK,
    *TENSOR_CHECKS,
    OP_CONSTRAINT,
)


# --------------------------------------------------------------------------- convert checks

QUANTIZED_FLOAT_CONV1D = (
    "it quantizes the result of an fp32 1-D conv: in a delegate with that conv, XNNPACK's "
    "preprocessing (Conv1dUnsqueezePass) folds a quantization into the conv's output, and XNNPACK "
    "cannot make a conv of fp32 input and weight with an int8 output ('Failed to create "
    "deconvolution node', stock's program too; fuzz static seed 1301)"
)
_CONVERSIONS = (quantized_decomposed.quantize_per_tensor, quantized_decomposed.dequantize_per_tensor)


def _float_side_dtype(s: Subject) -> str | None:
    float_side = s.node.input if s.node.op == quantized_decomposed.quantize_per_tensor else s.node.results[0]
    return f"{float_side.dtype} float side (XNNPACK converts f32)" if float_side.dtype is not DType.f32 else None


# convert_unit: a standalone per-tensor quantize or dequantize, run by XNNPACK as a conversion
CONVERT_CHECKS: tuple[Check, ...] = (
    STATIC_NOT_CONFIGURED_CHECK,
    Check(
        "not-a-conversion",
        "quant",
        lambda s: s.node.op not in _CONVERSIONS and ("runs in XNNPACK only folded into a quantized op"),
    ),
    RANK,
    Check(
        "conversion-dtype",
        "dtype",
        lambda s: (
            s.node.attributes.get("dtype") not in (DType.i8, DType.u8)
            and (f"quantized dtype {s.node.attributes.get('dtype')} (XNNPACK converts int8/uint8)")
        ),
    ),
    Check("conversion-float-side", "dtype", _float_side_dtype),
    Check(
        "quantizes-float-conv1d",
        "quant",
        lambda s: quantizes_float_conv1d(s.node) and QUANTIZED_FLOAT_CONV1D,
        applies=lambda s: s.node.op == quantized_decomposed.quantize_per_tensor,
    ),
)


# every table, for tests and reports
TABLES: dict[str, tuple[Check, ...]] = {
    "tensor": TENSOR_CHECKS,
    "float": FLOAT_CHECKS,
    "batch-norm": BATCH_NORM_CHECKS,
    "decomposed-linear": DECOMPOSED_LINEAR_CHECKS,
    "static": STATIC_CHECKS,
    "dynamic-pattern": DYNAMIC_PATTERN_CHECKS,
    "dynamic": DYNAMIC_CHECKS,
    "affine-weight": AFFINE_WEIGHT_CHECKS,
    "weight-only": WEIGHT_ONLY_CHECKS,
    "convert": CONVERT_CHECKS,
}


def check_names() -> list[str]:
    """The name of every check of every table (each once)."""
    return list(dict.fromkeys(c.name for table in TABLES.values() for c in table))
