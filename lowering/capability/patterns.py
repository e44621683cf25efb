"""Predicates over the graph that capability's checks and unit builders share: which quantized or
float pattern a node is part of (no verdicts here)."""

from __future__ import annotations

from xir import DType, Node, Value
from xir.ops import aten, quantized_decomposed

from ..rules import (
    CHOOSE_QPARAMS_OPS,
    DEQUANTIZE_OPS,
    DYNAMIC,
    FP32,
    QUANTIZE_OPS,
    STATIC,
    dequantized_source,
    through_layout,
    weight_chain,
)
from .base import FUSED_ACTIVATIONS, GEMM_OPS, Options

# quantized_decomposed's dequantizes with an ExecuTorch kernel (left outside, they run there)
_KERNEL_DEQUANTIZES = (
    quantized_decomposed.dequantize_per_tensor,
    quantized_decomposed.dequantize_per_tensor.tensor,
    quantized_decomposed.dequantize_per_channel,
)

# XNNPACK moves quantized elements of these without requantizing: input and output must share qparams.
# hardtanh too: a quantized relu6 whose output XNNPACKQuantizer quantizes differently from its input
# (after a max pool) came out wrong by 1.1-1.4 (fuzz static seed 2427; stock's etal program too)
SAME_QPARAMS_OPS = (aten.slice_copy.Tensor, aten.view_copy, aten.permute_copy, aten.unsqueeze_copy, aten.hardtanh)


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
    return all(
        node.operand(name) is None or dequantized_source(node.operand(name)) is None for name in weights
    ) and all(v is node.input or v.producer is None or v.producer.op not in DEQUANTIZE_OPS for v in node.operands)


def _dequantized_constant(value: Value) -> bool:
    producer = value.producer
    return producer is not None and producer.op in _KERNEL_DEQUANTIZES and producer.input.is_constant


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
    if node.op == aten.permute_copy:
        return node.input.rank == 2 and _dequantized_constant(node.input)
    if node.op != aten.linear or not _dequantized_constant(node.weight):
        return False
    source = node.input.producer
    if source is None or source.op not in _KERNEL_DEQUANTIZES[:2]:
        return False
    bias = node.operand("bias")
    return bias is None or bias.is_constant


def is_float_conv1d(node: Node) -> bool:
    """A 1-D conv (kernel of rank 3) whose weight is no dequantize: one XNNPACK's
    Conv1dUnsqueezePass makes 2-D in fp32, with quantizes and dequantizes of its own around it
    where its input is a dequantize or its readers all quantize."""
    if node.op != aten.convolution or node.weight.rank != 3:
        return False
    weight = node.weight.producer
    return weight is None or weight.op not in DEQUANTIZE_OPS


def quantizes_float_conv1d(quantize: Node) -> bool:
    """Whether ``quantize`` reads a 1-D conv (kernel of rank 3) with no dequantized weight, every
    reader of which quantizes. XNNPACK's Conv1dUnsqueezePass puts an implicit quantize/dequantize
    pair after such a conv, making its output int8. Outside the delegate, the quantize leaves the
    conv's result fp32 at the delegate's edge, and the conv runs in XNNPACK. A relu or hardtanh
    that is the conv's only reader counts as the conv: XNNPACK's FuseActivationPass, which runs
    before, folds it into the conv, whose readers are then the activation's (fuzz static seed
    2744: a grouped ConvTranspose1d, relu6, then a quantized linear; "Failed to create
    deconvolution node", stock's program too)."""
    source = quantize.input.producer
    readers = source.results[0].users if source is not None else []
    if source is not None and source.op in FUSED_ACTIVATIONS:
        conv = source.input.producer
        if conv is None or len({id(u) for u in conv.results[0].users}) != 1:
            return False
        source = conv
    # (a quantized conv, whose weight is a dequantize, has its quantize folded into its unit)
    return source is not None and is_float_conv1d(source) and all(user.op in QUANTIZE_OPS for user in readers)


def zero_pad(pad: Node) -> bool:
    """A pad XNNPACK's preprocessing (InsertPadQDQPass) looks at: padding value 0.0 and no negative
    amount."""
    amounts = list(pad.attributes.get("pad") or [])
    return float(pad.attributes.get("value", 0) or 0) == 0.0 and not any(
        not isinstance(a, int) or a < 0 for a in amounts
    )


def quantized_by_preprocessing(pad: Node) -> bool:
    """Whether XNNPACK's preprocessing (InsertPadQDQPass) would quantize the output of this pad when
    it reads a dequantize, folded or not: a :func:`zero_pad` that no quantize reads (the pass
    leaves a pad whose output is quantized already). Such a pad between conversions would get an
    f32 input and an int8 output (measured: "Failed to create StaticConstantPad node" at load,
    with stock's program too; fuzz static seeds 1074, 1098). Another value is left alone, and the
    pad runs in fp32 like the other ops (fuzz static seed 1243: stock delegates a pad with -1 and
    is right), and so is a zero pad that a quantize reads (fuzz static seed 31009: XNNPACKQuantizer
    quantizes the output of a pad before a quantized linear; stock delegates it and is right). The
    pass sees the delegate's graph only: where that quantize is not in the pad's delegate, the
    plan's repair ``zero-pad-quantized-by-preprocessing`` leaves the pad outside."""
    return zero_pad(pad) and not any(reader.op in QUANTIZE_OPS for reader in pad.results[0].users)


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
    partition), not a dynamically quantized activation. A matrix product (``torch.matmul`` of the
    activation and a float parameter, which XNNPACKQuantizer does not quantize) only with the
    constant itself as its second operand (a decomposed linear's weight is a permute of it; fuzz
    static seeds 40001, 40037: stock delegates the product in fp32 and is right)."""
    if node.op not in (aten.convolution, aten.linear, aten.mm) or node.definition is None:
        return False
    source = node.input.producer
    if source is None or source.op != quantized_decomposed.dequantize_per_tensor:
        return False
    if node.op == aten.mm:
        weight = node.operands[1]
        return weight.producer is None and weight.is_constant and weight.dtype is DType.f32
    return all(node.operand(name) is None or node.operand(name).is_constant for name in node.definition.weights)


def weight_layout_nodes(node: Node) -> list[Node]:
    """Layout ops that turn a constant into this GEMM's weight: delegated with it, so the weight
    stays a constant inside the delegate (in per-op mode too)."""
    if node.op not in GEMM_OPS:
        return []
    return weight_chain(node.weight) or []


def weight_dq(value: Value) -> tuple[Node | None, list[Node]]:
    """The dequantize behind a GEMM weight, seen through layout ops (a linear decomposed to
    addmm reads ``permute(dequantize(w))``), and those layout ops."""
    return dequantized_source(value), through_layout(value)[1]


def quantized_conv_pad(conv: Node) -> Node | None:
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


def qparams(node: Node) -> tuple:
    a = node.attributes
    return (a.get("scale"), a.get("zero_point"), a.get("dtype"))


def depthwise(kernel_shape, groups: int, transposed: bool) -> bool:
    """One input channel per group (XNNPACK's depthwise conv, which has no dynamically quantized
    version). The kernel is (out, in/groups, ...), or (in, out/groups, ...) transposed."""
    return (kernel_shape[0] // groups if transposed else kernel_shape[1]) == 1


def int4_odd_input_channels(weight_dq: Node) -> bool:
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
