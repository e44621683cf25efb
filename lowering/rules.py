"""What ExecuTorch 1.5.1's XNNPACK backend can define and run, as data.

One :class:`OpRule` per edge op the stock partitioner handles (its ``ALL_PARTITIONER_CONFIGS``):
the precisions it takes (fp32 = float, static or dynamic quantization), whether XNNPACK can
define it with bf16 tensors, and its op-specific constraint. On top of every rule, the
capability check (:mod:`lowering.capability`) requires every input and output of a delegated
node to have rank <= 6 and an allowed dtype.

Where stock's configs accept something XNNPACK computes differently from eager PyTorch, the
rule here is stricter and says so (e.g. ``gelu`` with ``approximate='tanh'``).
"""

from __future__ import annotations

from typing import Callable

import attrs

from xir import DType, Node, TensorType, Value
from xir.ops import aten, dim_order_ops, family, quantized_decomposed

from .ops import xir_ops

MAX_RANK = 6
FP32, STATIC, DYNAMIC = "fp32", "static", "dynamic"
ALL_PRECISIONS = frozenset({FP32, STATIC, DYNAMIC})

Check = Callable[[Node, object], "str | None"]  # (node, options) -> reason it is rejected, or None


@attrs.frozen
class OpRule:
    op: str
    precisions: frozenset
    bf16: bool = True
    check: Check | None = None
    constraint: str = ""  # the constraint in words, for reports and `xir explain`
    bf16_reason: str = ""
    # the check is about the graph's structure (e.g. whether a result is used), not types: it
    # decides before the rank and dtype checks, whose reasons would hide it
    structural: bool = False

    def reject_reason(self, node: Node, options=None) -> str | None:
        """Why XNNPACK cannot take ``node`` under this rule: its weights (by the op's definition)
        are not constants, or the op-specific check fails; None when it can."""
        return static_weights_problem(node, options) or (self.check(node, options) if self.check else None)


# ------------------------------------------------------------------ helpers for constraints


def producer_op(value: Value) -> str | None:
    return value.producer.op if value.producer is not None else None


WEIGHT_LAYOUT_OPS = (aten.permute_copy, aten.view_copy, aten.t_copy)


def through_layout(value: Value) -> tuple[Value, list[Node]]:
    """Walk back from ``value`` through layout ops (permute/view/transpose) that are the only use
    of their result: the value they start from, and those ops in program order. A linear
    decomposed to addmm reads its weight as ``permute(w)``; this is the one walk that sees it."""
    chain: list[Node] = []
    while value.producer is not None and value.producer.op in WEIGHT_LAYOUT_OPS and value.single_user() is not None:
        chain.append(value.producer)
        value = value.producer.input
    return value, chain[::-1]


def weight_chain(value: Value) -> list[Node] | None:
    """The layout ops between a constant and ``value``, in program order; None if ``value`` is
    not a constant seen through such ops."""
    source, chain = through_layout(value)
    return chain if source.is_constant else None


def dequantized_source(value: Value) -> Node | None:
    """The dequantize behind ``value``, seen through layout ops, or None."""
    source, _ = through_layout(value)
    producer = source.producer
    return producer if producer is not None and producer.op in DEQUANTIZE_OPS else None


def is_static(value: Value) -> bool:
    """A constant (parameter, buffer, lifted constant), possibly behind a dequantize or behind
    layout ops."""
    source, _ = through_layout(value)
    if source.is_constant:
        return True
    dequantize = dequantized_source(value)
    return dequantize is not None and quantized_data(dequantize).is_constant


def quantized_data(node: Node) -> Value:
    """The tensor a quantize, dequantize or choose-qparams op reads: its first operand (``input``
    where the op is defined; torchao's affine ops are opaque, their operands have no names)."""
    return node.operands[0]


def static_weights_problem(node: Node, options=None) -> str | None:
    """XNNPACK takes an op's weights (the operands its definition marks as weights) only as
    constants. With ``force_non_static_weights_for_f32_linear`` a linear's weight may be dynamic."""
    definition = node.definition
    for name in definition.weights if definition is not None else ():
        if (
            name == "weight"
            and node.op == aten.linear
            and getattr(options, "force_non_static_weights_for_f32_linear", False)
        ):
            continue
        value = node.operand(name)
        if value is not None and not is_static(value):
            return f"{name} is not a constant"
    return None


def attr(node: Node, name: str, default=None):
    return node.attributes.get(name, default)


def _static_shape(node: Node, options=None) -> str | None:
    for v in list(node.operands) + list(node.results):
        if hasattr(v.type, "is_static") and not v.type.is_static:
            return "needs static shapes (a dim is symbolic)"
    return None


# ---------------------------------------------------------------- op-specific constraints


def _alpha_one(node: Node, options=None) -> str | None:
    alpha = attr(node, "alpha", 1)
    return None if alpha == 1 else f"alpha={alpha} (XNNPACK adds/subtracts with alpha 1 only)"


def _gelu(node: Node, options=None) -> str | None:
    approximate = attr(node, "approximate", "none")
    if approximate != "none":
        return f"approximate={approximate!r}: XNNPACK computes exact GELU, which differs from the tanh approximation"
    if node.results[0].dtype is DType.f16:
        return "f16 GELU is not supported by XNNPACK"
    return None


def _pow(node: Node, options=None) -> str | None:
    exponent = attr(node, "exponent")
    if isinstance(exponent, bool) or not isinstance(exponent, int) or exponent != 2:
        return f"exponent {exponent!r}: XNNPACK only squares (integer exponent 2)"
    return None


def _addmm(node: Node, options=None) -> str | None:
    if node.attribute("beta") != 1 or node.attribute("alpha") != 1:
        return "beta/alpha other than 1"
    return None


def _convolution(node: Node, options=None) -> str | None:
    weight = node.weight
    if weight.rank not in (3, 4):
        return (
            f"{weight.rank - 2}-D convolution (XNNPACK has 1-D and 2-D convolution only; xir's transform pass "
            "xnnpack.decompose-conv3d rewrites a 3-D one into 2-D convolutions)"
        )
    if attr(node, "transposed", False):
        stride = attr(node, "stride", [1]) or [1]
        output_padding = attr(node, "output_padding", [0]) or [0]
        if any(
            pad >= step
            for pad, step in zip(output_padding, stride * len(output_padding) if len(stride) == 1 else stride)
        ):
            return (
                f"a transposed convolution with output_padding {list(output_padding)} not below its stride "
                f"{list(stride)} (XNNPACK's deconvolution needs it below; found by the fuzzer: it fails at run time)"
            )
    return None


def _pooling_input(node: Node) -> str | None:
    rank = node.input.rank
    return (
        None
        if rank == 4
        else f"{rank}-D input (XNNPACK pools 4-D NCHW tensors; an unbatched 3-D one it cannot lay out)"
    )


def _avg_pool2d(node: Node, options=None) -> str | None:
    problem = _pooling_input(node)
    if problem:
        return problem
    kernel = attr(node, "kernel_size")
    padding = attr(node, "padding", [0, 0]) or [0, 0]
    if attr(node, "ceil_mode", False):
        return "ceil_mode=True"
    if attr(node, "count_include_pad", True) and any(p != 0 for p in padding):
        return "count_include_pad=True with padding"
    divisor = attr(node, "divisor_override")
    if divisor is not None and kernel is not None and divisor != kernel[0] * kernel[-1]:
        return f"divisor_override={divisor}"
    return None


def _max_pool2d(node: Node, options=None) -> str | None:
    problem = _pooling_input(node)
    if problem:
        return problem
    kernel = attr(node, "kernel_size")
    stride = attr(node, "stride") or kernel
    kernel = list(kernel) * (2 // len(kernel)) if kernel else kernel
    stride = list(stride) * (2 // len(stride)) if stride else stride
    if any(s > k for s, k in zip(stride, kernel)):
        return f"stride {stride} larger than kernel {kernel}"
    if attr(node, "ceil_mode", False):
        return _static_shape(node)
    return None


def _max_pool2d_with_indices(node: Node, options=None) -> str | None:
    if not node.results[1].is_unused():
        return "its indices are used (XNNPACK max pooling has no indices)"
    return _max_pool2d(node, options)


def _max_dim(node: Node, options=None) -> str | None:
    """``torch.max(x, dim, keepdim=True)`` whose indices are unused: XNNPACK's preprocessing
    makes it an ``amax`` and defines a max pooling over the whole of dim 2 or 3 (in NHWC). Its
    visitor reads the dim as written (2 or 3, not -1 or -2) and the size of that dim (static)."""
    if not node.results[1].is_unused():
        return "its indices are used (XNNPACK would need an argmax pooling, which stock keeps outside too)"
    x = node.input
    if x.rank != 4:
        return f"input rank {x.rank} (XNNPACK reduces a 4-D input over dim 2 or 3)"
    dim = attr(node, "dim")
    if dim not in (2, 3):
        return f"dim {dim}: XNNPACK's visitor takes dim 2 or 3 (as written, not negative)"
    if not attr(node, "keepdim", False):
        return "keepdim=False (XNNPACK's max pooling keeps the dim)"
    size = x.shape[dim]
    if not isinstance(size, int):
        return f"the reduced dim is symbolic ({size}): XNNPACK's pooling window is fixed"
    return None


def _mean_dim(node: Node, options=None) -> str | None:
    x = node.input
    dims = attr(node, "dim") or []
    if x.rank != 4:
        return f"input rank {x.rank} (XNNPACK reduces 4-D inputs over dims 2 and 3)"
    if sorted(d % 4 for d in dims) != [2, 3]:
        return f"dims {dims}: only the two spatial dims (2, 3)"
    if not attr(node, "keepdim", False):
        return "keepdim=False"
    if attr(node, "dtype") is not None:
        return "a dtype argument"
    return None


# ops whose constant operands must be static tensors inside XNNPACK (weights, biases, statistics);
# other 0-D constants are passed to the delegate as inputs (lowering.fx.partitioner.emit_tags)
STATIC_OPERAND_OPS = (
    aten.linear,
    xir_ops.linear_f16w,
    aten.addmm,
    aten.mm,
    aten.convolution,
    aten.prelu,
    quantized_decomposed.dequantize_per_channel,
    quantized_decomposed.dequantize_per_tensor,
    aten._native_batch_norm_legit_no_training,
    aten.permute_copy,
)


# ops XNNPACK's delegate keeps in channels-last (NHWC) layout, and ops after which it is NCHW again
# (its channels-last pass gives them contiguous inputs; a permute is not one of them: it permutes
# the channels-last tensor, and its result stays channels-last, fuzz bf16 seed 20342). A max.dim
# becomes an amax in XNNPACK's preprocessing; an amax in the program has no rule and stays outside.
CHANNELS_LAST_OPS = (
    aten.convolution,
    aten.avg_pool2d,
    aten.max_pool2d,
    aten.max_pool2d_with_indices,
    aten.max.dim,
    aten.upsample_bilinear2d.vec,
    aten.mean.dim,
    aten.prelu,
    aten._native_batch_norm_legit_no_training,
)
LAYOUT_RESET_OPS = (
    aten.view_copy,
    aten.squeeze_copy,
    aten.unsqueeze_copy,
    aten.linear,
    xir_ops.linear_f16w,
    aten.mm,
    aten.addmm,
    aten.bmm,
    xir_ops.bmm_f32out,
)


def after_channels_last_op(value: Value, within: set, limit: int = 256) -> Node | None:
    """A conv/pool/... upstream of ``value`` through layout-preserving ops, if any, through the
    nodes whose ids are in ``within`` only (a group's: a delegate's inputs arrive contiguous). One
    its rule rejects stays outside XNNPACK, and its result arrives contiguous too (a mean over
    dims 0 and 1 before a 4-D softmax; fuzz static seed 1011)."""
    seen, stack = set(), [value]
    while stack and len(seen) < limit:
        v = stack.pop()
        p = v.producer
        if p is None or id(p) in seen or id(p) not in within:
            continue
        seen.add(id(p))
        if p.op in CHANNELS_LAST_OPS:
            rule = RULES.get(p.op)
            if rule is None or rule.reject_reason(p) is not None:
                continue
            return p
        if p.op not in LAYOUT_RESET_OPS:
            stack.extend(p.operands)
    return None


def _softmax(node: Node, options=None) -> str | None:
    dim = attr(node, "dim")
    rank = node.input.rank
    if dim not in (-1, rank - 1):
        return f"softmax over dim {dim}, not the last dim"
    # (a 4-D one after a conv, a pooling, ... in the same delegate is put in one of its own:
    # lowering.partition._softmaxes_after_channels_last_ops)
    return None


def _cat(node: Node, options=None) -> str | None:
    if len(node.operands) < 2:  # (the same tensor twice is fine: measured, XNNPACK concatenates it)
        return "fewer than two inputs"
    return None


SYMBOLIC_SLICE = (
    "a symbolic bound: ExecuTorch's XNNPACK serializer writes a slice's offsets and sizes as integers; "
    "a bound computed at run time cannot be written"
)


def slice_bounds(node: Node) -> tuple[int, int, int] | None:
    """``(dim, start, end)`` of ``slice_copy`` ``node``, in range of its sliced dim, or None when
    they are not known at lowering time: a bound computed at run time, or a symbolic sliced dim
    whose slice has not a static length from a non-negative start (``x[:, :1]`` has; ``x[:, 1:]``
    has not)."""
    x = node.input.type
    dim = attr(node, "dim", 0) % x.rank
    size, length = x.shape[dim], node.result.type.shape[dim]
    start, end = attr(node, "start"), attr(node, "end")
    if not isinstance(start, (int, type(None))) or not isinstance(end, (int, type(None))):
        return None
    start = start or 0
    if not isinstance(size, int):
        fixed = isinstance(length, int) and start >= 0 and end is not None and end >= 0 and end - start == length
        return (dim, start, end) if fixed else None
    start = start + size if start < 0 else start
    end = size if end is None else (end + size if end < 0 else end)
    start, end = min(max(start, 0), size), min(max(end, 0), size)
    return dim, start, max(start, end)


def _slice(node: Node, options=None) -> str | None:
    if attr(node, "step", 1) != 1:
        return f"step {attr(node, 'step')}"
    if any(not isinstance(attr(node, name), (int, type(None))) for name in ("start", "end")):
        return SYMBOLIC_SLICE
    if not node.input.type.is_static:  # (stock's visitor writes a symbolic dim's upper bound as its size)
        if slice_bounds(node) is None:
            return (
                "slices a symbolic dim to a length computed at run time (XNNPACK's slice sizes are written as integers)"
            )
        return (
            "a slice of a symbolic shape (ExecuTorch's XNNPACK serializer writes its upper bound as the size; "
            "xir's transform pass xnnpack.slices-as-xir-slices writes it as xir.slice: run transform_passes())"
        )
    if any(d == 0 for v in list(node.operands) + list(node.results) for d in v.shape):
        return "an empty dim"
    return None


def _select(node: Node, options=None) -> str | None:
    """ExecuTorch's XNNPACK backend has no select: ``xnnpack.select-as-slice`` writes one as a slice
    and a view where XNNPACK takes those; the reason this one is not."""
    x = node.input.type
    if isinstance(x, TensorType) and x.rank and not isinstance(x.shape[attr(node, "dim", 0) % x.rank], int):
        return (
            "selects from a symbolic dim (e.g. the last token of a dynamic length): XNNPACK's slice offset "
            "would be computed at run time"
        )
    return (
        "XNNPACK has no select (xnnpack.select-as-slice writes one of a static dim of a 2-D to 6-D float tensor "
        "as a slice and a view: run transform_passes())"
    )


def _cast(node: Node, options=None) -> str | None:
    """ExecuTorch's XNNPACK backend defines no dtype cast (its passes drop dtype-changing copies):
    ``xnnpack.casts-as-converts`` writes one between f32 and bf16 as xir.convert where XNNPACK
    takes it; the reason this one is not."""
    if node.input.dtype == node.results[0].dtype:
        return "a copy that keeps the dtype and changes the layout, which ExecuTorch's XNNPACK backend does not define"
    return (
        "a dtype cast, which ExecuTorch's XNNPACK backend does not define (with enable_bf16, "
        "xnnpack.casts-as-converts writes an f32 <-> bf16 cast as xir.convert, but not an upcast whose f32 "
        "result leaves the delegate, nor a cast of other dtypes)"
    )


def _xir_slice(node: Node, options=None) -> str | None:
    if any(d == 0 for v in list(node.operands) + list(node.results) for d in v.shape):
        return "an empty dim"
    return None


def _view(node: Node, options=None) -> str | None:
    size = attr(node, "size") or []
    if any(not isinstance(d, int) for d in size):
        return "the new shape has a symbolic size"
    if sum(1 for d in size if d == -1) > 1:
        return "more than one -1 in the new shape"
    return None


def _unsqueeze(node: Node, options=None) -> str | None:
    dim = attr(node, "dim")
    rank = node.input.rank
    if dim not in (-1, rank):
        return f"unsqueeze at dim {dim}, XNNPACK only adds a trailing dim"
    return None


def _pad(node: Node, options=None) -> str | None:
    pad = attr(node, "pad") or []
    if any(p < 0 for p in pad):
        return "negative padding"
    return None


def _upsample_bilinear(node: Node, options=None) -> str | None:
    x = node.input
    if x.rank != 4:
        return f"input rank {x.rank}"
    scales = attr(node, "scale_factors")
    if scales and not attr(node, "align_corners", False) and any(float(s) != int(s) for s in scales):
        return (
            f"scale factors {scales}: XNNPACK maps coordinates by the output size, PyTorch by the scale "
            "(they differ for non-integer scales)"
        )
    return _static_shape(node)


def _same_dtype_convert(node: Node, options=None) -> str | None:
    if node.input.dtype != node.results[0].dtype:
        return f"converts {node.input.dtype} to {node.results[0].dtype} (XNNPACK takes layout-only copies)"
    dim_order = attr(node, "dim_order")
    if dim_order is not None and sorted(dim_order) != list(range(node.results[0].rank)):
        return f"invalid dim order {dim_order}"
    return None


def dim_order_of(value: Value) -> tuple[int, ...] | None:
    """The dim order of ``value`` as torch.export traced it (``meta["val"].dim_order()`` of the FX
    node it was imported from), or None when unknown (IR text, a node a pass made and nothing
    imported again since). The IR's types carry no layout: this is the one place that asks."""
    fx_node = value.fx_node if value.is_input else (value.producer.fx_node if value.producer is not None else None)
    meta = getattr(fx_node, "meta", None) or {}
    val = meta.get("val")
    if isinstance(val, (tuple, list)):
        val = val[value.index] if value.index < len(val) else None
    try:
        return tuple(val.dim_order())
    except Exception:  # not a tensor, or strides dim_order() cannot name
        return None


def _clone(node: Node, options=None) -> str | None:
    """XNNPACK's clone is a plain copy: stock delegates only a clone that keeps its input's dim
    order, and so does xir (a clone to or from channels-last stays outside as ExecuTorch's own
    copy). Where the dim orders are unknown, only a clone that preserves the format is taken."""
    if node.op == dim_order_ops._clone_dim_order:
        wanted = attr(node, "dim_order")
        if wanted is None:
            return None
        wanted = tuple(wanted)
        source = dim_order_of(node.input)
    else:
        memory_format = attr(node, "memory_format")
        if memory_format is None or memory_format.name == "preserve_format":
            return None
        source, wanted = dim_order_of(node.input), dim_order_of(node.results[0])
        if wanted is None:
            return f"changes the memory format to {memory_format.name} (the dim orders are unknown)"
    if source is None:
        return f"sets the dim order {list(wanted)} and its input's dim order is unknown"
    if source != wanted:
        return f"changes the dim order from {list(source)} to {list(wanted)} (XNNPACK's clone only copies)"
    return None


def _prelu(node: Node, options=None) -> str | None:
    if node.input.rank != 4:
        return f"{node.input.rank}-D input (XNNPACK's channels-last PReLU takes 4-D inputs)"
    return None


def _bmm_f32out(node: Node, options=None) -> str | None:
    if node.results[0].dtype is not DType.f32:
        return "its result must be f32"
    return None


def _xir_convert(node: Node, options=None) -> str | None:
    pair = {node.input.dtype, node.results[0].dtype}
    if not (pair <= {DType.f32, DType.bf16} or pair == {DType.bf16, DType.f16}):
        return f"converts {node.input.dtype} to {node.results[0].dtype}"
    return None


def _batch_norm(node: Node, options=None) -> str | None:
    # decided in capability/ (checks.BATCH_NORM_CHECKS), which sees the whole graph (fold partner, users)
    return None


# torchao's affine quantization (quantize_(model, Int8DynamicActivationIntxWeightConfig(...))): the
# activation quantized per token at run time, the weight per channel or per group of input
# channels. ExecuTorch has no kernel for them: they run only inside an XNNPACK linear.
AFFINE_DEQUANTIZE = "torchao.dequantize_affine"
AFFINE_QUANTIZE = "torchao.quantize_affine"
AFFINE_CHOOSE_QPARAMS = "torchao.choose_qparams_affine"

# the quantization families, by the traits of the op definitions (quantized_decomposed's and torchao's)
DEQUANTIZE_OPS = family("dequantize")
QUANTIZE_OPS = family("quantize")
CHOOSE_QPARAMS_OPS = family("choose-qparams")

# --------------------------------------------------------------------------------- the table

_F = frozenset({FP32})
_FS = frozenset({FP32, STATIC})
_FSD = frozenset({FP32, STATIC, DYNAMIC})
_NO_BF16 = "XNNPACK cannot define it with bf16 tensors (the runtime rejects it at load)"

RULES: dict[str, OpRule] = {
    r.op: r
    for r in [
        # elementwise, unary
        OpRule(aten.abs, _F),
        OpRule(aten.ceil, _F),
        OpRule(aten.floor, _F),
        OpRule(aten.neg, _F),
        OpRule(aten.sqrt, _F),
        OpRule(aten.rsqrt, _F),
        OpRule(aten.exp, _F),
        OpRule(aten.log, _F),
        OpRule(aten.sigmoid, _F),
        OpRule(aten.tanh, _F),
        OpRule(aten.sin, _F),
        OpRule(aten.cos, _F),
        OpRule(aten.relu, _FS),
        OpRule(aten.hardswish, _F),
        OpRule(aten.leaky_relu, _F),
        OpRule(aten.hardtanh, _FS),
        OpRule(aten.clamp, _FS),
        OpRule(aten.gelu, _F, check=_gelu, constraint="approximate='none' only; not f16"),
        OpRule(aten.pow.Tensor_Scalar, _F, check=_pow, constraint="exponent 2 (an int)"),
        # elementwise, binary
        OpRule(aten.add.Tensor, _FS, check=_alpha_one, constraint="alpha 1"),
        OpRule(aten.sub.Tensor, _FS, check=_alpha_one, constraint="alpha 1"),
        OpRule(aten.mul.Tensor, _FS),
        OpRule(aten.div.Tensor, _F),
        OpRule(aten.minimum, _F),
        OpRule(aten.maximum, _F),
        # matrix multiplies and convolution
        OpRule(aten.linear, _FSD, constraint="constant weight and bias"),
        OpRule(aten.addmm, _FSD, check=_addmm, constraint="constant weight and bias; alpha = beta = 1"),
        OpRule(aten.mm, _FSD, constraint="constant second matrix"),
        OpRule(
            aten.bmm,
            _F,
            bf16=False,
            bf16_reason="XNNPACK multiplies bf16 matrices into an fp32 result only "
            "(xir's transform pass xnnpack.bf16-bmm-f32-output rewrites it; run transform_passes())",
        ),
        OpRule(
            aten.convolution,
            _FSD,
            bf16=False,
            check=_convolution,
            constraint="1-D or 2-D; constant weight and bias",
            bf16_reason=_NO_BF16,
        ),
        # pooling, reductions, softmax
        OpRule(
            aten.avg_pool2d,
            _F,
            bf16=False,
            check=_avg_pool2d,
            bf16_reason=_NO_BF16,
            constraint="no ceil_mode; no count_include_pad with padding; divisor = kernel area",
        ),
        OpRule(
            aten.max_pool2d, _FS, bf16=False, check=_max_pool2d, bf16_reason=_NO_BF16, constraint="stride <= kernel"
        ),
        OpRule(
            aten.max_pool2d_with_indices,
            _FS,
            bf16=False,
            check=_max_pool2d_with_indices,
            bf16_reason=_NO_BF16,
            constraint="indices unused; stride <= kernel",
            structural=True,
        ),
        OpRule(
            aten.max.dim,
            _F,
            bf16=False,
            check=_max_dim,
            bf16_reason=_NO_BF16,
            structural=True,
            constraint="4-D input, dim 2 or 3, keepdim, indices unused",
        ),
        OpRule(
            aten.mean.dim,
            _FS,
            bf16=False,
            check=_mean_dim,
            bf16_reason=_NO_BF16,
            constraint="4-D input, dims (2, 3), keepdim",
        ),
        OpRule(aten._softmax, _F, bf16=False, check=_softmax, bf16_reason=_NO_BF16, constraint="last dim"),
        # data movement
        OpRule(aten.cat, _FS, check=_cat, constraint="at least two inputs"),
        OpRule(
            aten.slice_copy.Tensor,
            _FS,
            check=_slice,
            constraint="step 1, integer bounds, static shapes (symbolic: xir.slice)",
        ),
        OpRule(aten.permute_copy, _FS),
        OpRule(aten.view_copy, _FS, check=_view, constraint="static new shape, at most one -1"),
        OpRule(aten.unsqueeze_copy, _FS, check=_unsqueeze, constraint="trailing dim only"),
        OpRule(aten.constant_pad_nd, _F, check=_pad, constraint="no negative padding"),
        OpRule(
            aten.upsample_bilinear2d.vec,
            _F,
            bf16=False,
            check=_upsample_bilinear,
            bf16_reason=_NO_BF16,
            constraint="4-D, static output size",
        ),
        OpRule(aten.clone, _F, check=_clone, constraint="keeps its input's dim order"),
        OpRule(dim_order_ops._clone_dim_order, _F, check=_clone, constraint="keeps its input's dim order"),
        OpRule(dim_order_ops._to_dim_order_copy, _FS, check=_same_dtype_convert, constraint="no dtype change"),
        # normalization and others
        OpRule(
            aten._native_batch_norm_legit_no_training,
            _F,
            bf16=False,
            check=_batch_norm,
            constraint="folds into the conv/linear before it, or decomposes (rank 2-4)",
            bf16_reason="in bf16 a batch norm runs in XNNPACK only when it folds into a conv or linear",
        ),
        OpRule(aten.prelu, _F, check=_prelu, constraint="4-D input, constant weight"),
        # xir's own ops (lowering/fx/xnnpack_ops.py)
        OpRule(xir_ops.bmm_f32out, _F, check=_bmm_f32out, constraint="bf16 or f32 matrices, f32 result"),
        OpRule(xir_ops.linear_f16w, _F, constraint="f32 input and bias, f16 constant weight"),
        OpRule(xir_ops.convert, _F, check=_xir_convert, constraint="between f32 and bf16, or bf16 and f16"),
        OpRule(xir_ops.slice, _F, check=_xir_slice, constraint="not empty"),
        OpRule(aten._to_copy, _F, check=_cast, constraint="never: xnnpack.casts-as-converts writes it as xir.convert"),
        OpRule(
            aten.select_copy.int,
            _F,
            check=_select,
            constraint="never: xnnpack.select-as-slice writes it as a slice and a view",
        ),
        # quantization
        OpRule(quantized_decomposed.quantize_per_tensor, frozenset({STATIC})),
        OpRule(quantized_decomposed.dequantize_per_tensor, frozenset({STATIC})),
    ]
}
