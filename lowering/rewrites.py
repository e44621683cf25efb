"""XNNPACK-specific rewrites (named ``xnnpack.*``). Two create xir's own ops
(:mod:`lowering.xnnpack_ops`), which have no portable kernel, so they apply only where the
partitioner delegates the result; their ``enable_bf16`` option mirrors the partitioner's, which
sets it from its own settings. Each is a pattern set on the rewriter: it matches completely
before its first edit and says why it declined a node.
"""

from __future__ import annotations

import math

import attrs

from passes import PatternRewritePass, Rewriter, rewrite_pattern
from passes.rewriter import RewritePattern
from passes.pass_base import RENAMED_PASSES
from passes.remove_no_ops import layout_change
from xir import DType, Node, TensorType, Value

# xir's own ops (xir.bmm_f32out, xir.convert) are defined in xir.op_definitions; their torch ops and
# XNNPACK visitors (lowering.xnnpack_ops) register when lowering.writeback is imported: this module stays torch-free


@attrs.frozen
class Bf16Rewrite(PatternRewritePass, register=False):
    """A rewrite that creates xir's own ops for bf16: its rules run only with ``enable_bf16`` (the
    partitioner sets it from its own), since without it bf16 stays outside XNNPACK and xir's ops
    would have no kernel there."""

    enable_bf16: bool = False

    def patterns(self):
        return self.rules if self.enable_bf16 else ()


class _NotBf16(RewritePattern):
    """``rule``, declined on nodes with a bf16 operand or result."""

    def __init__(self, rule: RewritePattern):
        self.rule, self.ops, self.name = rule, rule.ops, rule.name

    def match_and_rewrite(self, node: Node, rewriter: Rewriter) -> bool:
        values = list(node.operands) + list(node.results)
        if any(isinstance(v.type, TensorType) and v.type.dtype is DType.bf16 for v in values):
            return rewriter.notify_match_failure(node, "bf16, and bf16 is not enabled: it stays outside XNNPACK")
        return self.rule.match_and_rewrite(node, rewriter)


@attrs.frozen
class DelegatedDtypeRewrite(PatternRewritePass, register=False):
    """A rewrite into ops for XNNPACK that declines bf16 nodes without ``enable_bf16`` (the
    partitioner sets it from its own): those stay outside XNNPACK, and rewritten they would only be
    more ops there (a mean as view -> mean -> view, a split as slices; fuzz fp32 10045, 10015)."""

    enable_bf16: bool = True

    def patterns(self):
        return self.rules if self.enable_bf16 else tuple(_NotBf16(rule) for rule in self.rules)


@rewrite_pattern("aten.bmm")
def bf16_bmm_f32_output(node: Node, rewriter: Rewriter) -> bool:
    """bf16 bmm => xir.bmm_f32out (bf16 x bf16 -> fp32) then xir.convert to bf16."""
    a, b = node.operands
    if node.result.dtype is not DType.bf16 or a.dtype is not DType.bf16 or b.dtype is not DType.bf16:
        return rewriter.notify_match_failure(node, "not a bf16 x bf16 -> bf16 bmm")
    wide = rewriter.op_before(node, "xir.bmm_f32out", [a, b])
    rewriter.replace_node(node, [rewriter.op_before(node, "xir.convert", [wide], dtype=DType.bf16)])
    return True


@attrs.frozen
class Bf16BmmF32Output(Bf16Rewrite):
    """Rewrite bf16 bmm as XNNPACK computes it: bf16 x bf16 -> fp32, then a convert to bf16."""

    name = "xnnpack.bf16-bmm-f32-output"
    rules = (bf16_bmm_f32_output,)


@rewrite_pattern("aten.bmm")
def bmm_distinct_operands(node: Node, rewriter: Rewriter) -> bool:
    """bmm(p, p) with ``p`` a permute => bmm(p, p') with ``p'`` a second permute of the same input.
    XNNPACK multiplies wrong when one transpose it computes feeds both operands of a batch matmul and
    moves the batch dim (measured on 3x3x3: every permutation but the identity and (0, 2, 1) wrong,
    by up to 11, in fp32 and bf16, with stock too; fuzz bf16 seed 20645). Two transposes are right."""
    a, b = node.operands
    if a is not b:
        return rewriter.notify_match_failure(node, "reads two different values")
    permute = a.producer
    if permute is None or permute.op != "aten.permute_copy":
        return rewriter.notify_match_failure(node, "the operand read twice is not a permute's result")
    second = rewriter.op_before(node, permute.op, list(permute.operands), **dict(permute.attributes))
    rewriter.set_operand(node, 1, second)
    return True


@attrs.frozen
class BmmDistinctOperands(DelegatedDtypeRewrite):
    """Give a bmm that reads one permute twice a second permute (see :func:`bmm_distinct_operands`)."""

    name = "xnnpack.bmm-distinct-operands"
    rules = (bmm_distinct_operands,)


# ops XNNPACK defines in fp32 but not in bf16
FP32_ONLY_OPS = ("aten.convolution", "aten.avg_pool2d", "aten.max_pool2d", "aten.max_pool2d_with_indices",
                 "aten.mean.dim", "aten._softmax", "aten.upsample_bilinear2d.vec")


@rewrite_pattern(*FP32_ONLY_OPS)
def bf16_in_fp32(node: Node, rewriter: Rewriter) -> bool:
    """bf16 op XNNPACK defines only in fp32 => xir.convert in, the op in fp32, xir.convert out."""
    from .capability import Options, float_verdict

    if node.results[0].dtype is not DType.bf16:
        return rewriter.notify_match_failure(node, "not bf16")
    if not all(r.is_unused() for r in node.results[1:]):
        return rewriter.notify_match_failure(node, "a second result (e.g. max pooling's indices) is used")
    verdict = float_verdict(node, Options(enable_bf16=True), as_fp32=True)
    if not verdict.supported:
        return rewriter.notify_match_failure(node, f"XNNPACK would not take it in fp32 either: {verdict.reason}")
    operands = []
    for value in node.operands:
        if not isinstance(value.type, TensorType) or value.dtype is not DType.bf16:
            operands.append(value)
        elif value.is_constant and value.data is not None:
            operands.append(rewriter.add_constant(f"{value.name}_f32", value.type.with_dtype(DType.f32),
                                                  value.data.float().contiguous(), value.input_kind))
        else:
            convert = rewriter.create("xir.convert", [value], attributes={"dtype": DType.f32})
            operands.append(rewriter.insert_before(node, convert).result)
    result_types = [r.type.with_dtype(DType.f32) if isinstance(r.type, TensorType) and r.dtype is DType.bf16 else r.type
                    for r in node.results]
    wide = rewriter.insert_before(node, rewriter.create(node.op, operands, result_types, dict(node.attributes)))
    narrow = rewriter.insert_before(node, rewriter.create("xir.convert", [wide.results[0]], attributes={"dtype": DType.bf16}))
    rewriter.replace_node(node, [narrow.result] + [None] * (len(node.results) - 1))
    return True


@attrs.frozen
class Bf16InFp32(Bf16Rewrite):
    """Run bf16 ops XNNPACK cannot define in bf16 (conv, pooling, mean, softmax, bilinear upsampling)
    in fp32 inside XNNPACK: convert in, compute in fp32 (constant weights converted once), convert out."""

    name = "xnnpack.bf16-in-fp32"
    rules = (bf16_in_fp32,)


@rewrite_pattern("aten.gelu")
def decompose_gelu_tanh(node: Node, rewriter: Rewriter) -> bool:
    """gelu(approximate='tanh') => 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))), in fp32:
    a bf16 one between casts to fp32 and back, since bf16 eager computes it in fp32 and rounds once."""
    import torch

    x = node.input
    if node.attribute("approximate") != "tanh":
        return rewriter.notify_match_failure(node, "exact GELU (XNNPACK runs it as it is)")
    if not isinstance(x.type, TensorType) or x.dtype not in (DType.f32, DType.bf16):
        return rewriter.notify_match_failure(node, "not f32 or bf16")
    from .rules import MAX_RANK

    if x.rank > MAX_RANK:  # (decomposed, it would only be more ops outside)
        return rewriter.notify_match_failure(node, f"{x.rank}-D: it stays outside XNNPACK, whole")
    narrow = x.dtype if x.dtype is not DType.f32 else None
    if narrow is not None:
        x = rewriter.op_before(node, "dim_order_ops._to_dim_order_copy", [x], dtype=DType.f32)

    def constant(label, number):
        return rewriter.add_constant(f"gelu_{label}", TensorType(DType.f32, ()), torch.tensor(number, dtype=torch.float32))

    def op(name, *operands):
        return rewriter.op_before(node, name, operands)

    cube = op("aten.mul.Tensor", op("aten.mul.Tensor", x, x), x)
    inner = op("aten.mul.Tensor", op("aten.add.Tensor", x, op("aten.mul.Tensor", cube, constant("k1", 0.044715))),
               constant("k0", math.sqrt(2 / math.pi)))
    tanh = op("aten.tanh", inner)
    result = op("aten.mul.Tensor", op("aten.mul.Tensor", x, op("aten.add.Tensor", tanh, constant("one", 1.0))),
                constant("half", 0.5))
    if narrow is not None:
        result = rewriter.op_before(node, "dim_order_ops._to_dim_order_copy", [result], dtype=narrow)
    rewriter.replace_node(node, [result])
    return True


@attrs.frozen
class DecomposeGeluTanh(PatternRewritePass):
    """GELU with approximate='tanh' as the fp32 multiplies, adds and tanh XNNPACK runs (XNNPACK's own
    GELU is the exact one)."""

    name = "xnnpack.decompose-gelu-tanh"

    rules = (decompose_gelu_tanh,)


_SCALAR_TO_TENSOR = {"aten.mul.Scalar": "aten.mul.Tensor", "aten.add.Scalar": "aten.add.Tensor",
                     "aten.sub.Scalar": "aten.sub.Tensor", "aten.div.Scalar": "aten.div.Tensor"}
_TORCH_DTYPES = {DType.f32: "float32", DType.bf16: "bfloat16", DType.f16: "float16"}


@rewrite_pattern(*_SCALAR_TO_TENSOR)
def scalar_operand_as_constant(node: Node, rewriter: Rewriter) -> bool:
    """x op scalar => x op constant (a 0-D tensor of x's dtype): XNNPACK takes only the tensor forms."""
    import torch

    x, other = node.input, node.attribute("other")
    if not isinstance(x.type, TensorType) or x.dtype not in _TORCH_DTYPES:
        return rewriter.notify_match_failure(node, "not a float tensor")
    if isinstance(other, bool) or not isinstance(other, (int, float)):
        return rewriter.notify_match_failure(node, f"the scalar {other!r} is not a number")
    alpha = node.attributes.get("alpha", 1)
    value = other * alpha  # x + alpha * other, folded
    constant = rewriter.add_constant("scalar", TensorType(x.dtype, ()),
                                     torch.tensor(value, dtype=getattr(torch, _TORCH_DTYPES[x.dtype])))
    rewriter.replace_node(node, [rewriter.op_before(node, _SCALAR_TO_TENSOR[node.op], [x, constant])])
    return True


@rewrite_pattern("aten.add.Tensor", "aten.sub.Tensor")
def alpha_as_multiply(node: Node, rewriter: Rewriter) -> bool:
    """x + alpha * y => x + (y * alpha), the same for sub: XNNPACK's add has no alpha, and
    ExecuTorch's portable add/sub with an alpha are wrong when the first operand is the one
    broadcast (measured: add(x[1], y[3], alpha=2) off by 2.1; fuzz fp32 seed 10978)."""
    import torch

    alpha = node.attributes.get("alpha", 1)
    if alpha in (None, 1) or isinstance(alpha, bool) or not isinstance(alpha, (int, float)):
        return rewriter.notify_match_failure(node, "no alpha")
    x, y = node.operands[0], node.operands[1]
    if not isinstance(y.type, TensorType) or y.dtype not in _TORCH_DTYPES or node.result.dtype != y.dtype:
        return rewriter.notify_match_failure(node, "not a float tensor operand")
    scale = rewriter.add_constant("alpha", TensorType(y.dtype, ()),
                                  torch.tensor(alpha, dtype=getattr(torch, _TORCH_DTYPES[y.dtype])))
    scaled = rewriter.op_before(node, "aten.mul.Tensor", [y, scale])
    rewriter.replace_node(node, [rewriter.op_before(node, node.op, [x, scaled])])
    return True


@attrs.frozen
class ScalarOperandsAsConstants(PatternRewritePass):
    """Rewrite mul/add/sub/div by a Python scalar as the tensor op with a 0-D constant, and an
    add/sub's alpha as a multiply by a 0-D constant (XNNPACK runs those)."""

    name = "xnnpack.scalar-operands-as-constants"

    rules = (scalar_operand_as_constant, alpha_as_multiply)


@rewrite_pattern("aten.mean.dim")
def mean_over_last_dims(node: Node, rewriter: Rewriter) -> bool:
    """mean over the trailing dims of x => view (1, rows, 1, cols), mean over (2, 3) keepdim, view
    back: XNNPACK reduces 4-D tensors over dims 2 and 3 (RMSNorm's mean(-1, keepdim=True))."""
    x = node.input
    if not isinstance(x.type, TensorType) or not x.type.is_static or x.rank < 1:
        return rewriter.notify_match_failure(node, "not a static tensor")
    if node.attribute("dtype") is not None:
        return rewriter.notify_match_failure(node, "a dtype argument")
    dims = sorted({d % x.rank for d in (node.attribute("dim") or range(x.rank))})
    if dims != list(range(x.rank - len(dims), x.rank)):
        return rewriter.notify_match_failure(node, f"dims {node.attribute('dim')} are not the trailing dims")
    if x.rank == 4 and dims == [2, 3]:
        return rewriter.notify_match_failure(node, "already a spatial mean XNNPACK takes")
    rows, cols = 1, 1
    for i, d in enumerate(x.shape):
        if i in dims:
            cols *= d
        else:
            rows *= d
    square = rewriter.op_before(node, "aten.view_copy", [x], size=[1, rows, 1, cols])
    mean = rewriter.op_before(node, "aten.mean.dim", [square], dim=[2, 3], keepdim=True)
    rewriter.replace_node(node, [rewriter.op_before(node, "aten.view_copy", [mean], size=list(node.result.shape))])
    return True


@attrs.frozen
class MeanOverLastDims(DelegatedDtypeRewrite):
    """Rewrite a mean over a tensor's trailing dims as a 4-D spatial mean between two views (XNNPACK runs it)."""

    name = "xnnpack.mean-over-last-dims"

    rules = (mean_over_last_dims,)


def _float_constant(rewriter: Rewriter, base: str, value_type: TensorType, number: float, shape=()):
    """A constant of ``value_type``'s float dtype filled with ``number``."""
    import torch

    dtype = getattr(torch, _TORCH_DTYPES[value_type.dtype])
    return rewriter.add_constant(base, TensorType(value_type.dtype, tuple(shape)), torch.full(tuple(shape), number, dtype=dtype))


@rewrite_pattern("aten.expand_copy")
def expand_as_broadcast(node: Node, rewriter: Rewriter) -> bool:
    """An expand that repeats elements => x * ones, the ones only as large as the repeated dims:
    XNNPACK has no expand but broadcasts a multiply (grouped-query attention's repeat_kv, the
    masks of encoders). Exact: x * 1 == x."""
    from .rules import MAX_RANK

    x, result = node.input.type, node.result.type
    if not isinstance(x, TensorType) or not isinstance(result, TensorType) or x.dtype not in _TORCH_DTYPES:
        return rewriter.notify_match_failure(node, "not a float tensor")
    if not x.is_static or not result.is_static:
        return rewriter.notify_match_failure(node, "symbolic shape")
    if not 1 <= result.rank <= MAX_RANK or result.numel() == 0:
        return rewriter.notify_match_failure(node, f"a {result.rank}-D or empty result: it would stay outside XNNPACK")
    if x.numel() == result.numel():
        return rewriter.notify_match_failure(node, "adds no elements (shape-ops-as-views makes it a view)")
    aligned = (1,) * (result.rank - x.rank) + tuple(x.shape)
    ones_shape = [size if have == 1 else 1 for have, size in zip(aligned, result.shape)]
    ones = _float_constant(rewriter, "expand_ones", result, 1.0, ones_shape)
    rewriter.replace_node(node, [rewriter.op_before(node, "aten.mul.Tensor", [node.input, ones])])
    return True


@attrs.frozen
class ExpandAsBroadcast(PatternRewritePass):
    """Rewrite an expand that repeats elements (float, static, rank 1-6) as a broadcasting multiply by ones."""

    name = "xnnpack.expand-as-broadcast"

    rules = (expand_as_broadcast,)


def _producer(value, *ops):
    node = value.producer
    return node if node is not None and node.op in ops else None


def _is_zero_fill(value) -> bool:
    node = _producer(value, "aten.full_like", "aten.zeros_like")
    return node is not None and (node.op == "aten.zeros_like" or node.attribute("fill_value") == 0)


def _all_masked_rows(condition, x, dim) -> bool:
    """condition == not any(not (x == -inf), dim, keepdim): the rows of x that are all -inf."""
    outer = _producer(condition, "aten.logical_not")
    any_ = outer and _producer(outer.operands[0], "aten.any.dim")
    inner = any_ and _producer(any_.operands[0], "aten.logical_not")
    eq = inner and _producer(inner.operands[0], "aten.eq.Scalar")
    if not eq or eq.operands[0] is not x or eq.attributes.get("other") != -math.inf:
        return False
    return bool(any_.attributes.get("keepdim")) and any_.attributes.get("dim") % x.rank == dim % x.rank


@rewrite_pattern("aten.where.self")
def safe_softmax(node: Node, rewriter: Rewriter) -> bool:
    """where(row all -inf, 0, softmax(x)) (PyTorch's _safe_softmax, which attention with a mask
    exports) => softmax(clamp(x, min=lowest)) * clamp(x/2 + highest, 0, 1). The clamp keeps a
    fully masked row finite (uniform instead of NaN) and the factor is 0 exactly where x is -inf
    and 1 elsewhere, so a fully masked row gives 0; in a row with any finite entry the -inf
    entries were already 0. All of it XNNPACK runs."""
    import torch

    condition, zeros, probabilities = node.operands
    softmax = _producer(probabilities, "aten._softmax")
    if softmax is None or not isinstance(softmax.input.type, TensorType):
        return rewriter.notify_match_failure(node, "not a where over a softmax")
    x = softmax.input
    if x.dtype not in _TORCH_DTYPES or not x.type.is_static:
        return rewriter.notify_match_failure(node, "not a static float softmax")
    if not _is_zero_fill(zeros) or zeros.type != probabilities.type or node.result.type != probabilities.type:
        return rewriter.notify_match_failure(node, "the other branch is not zeros like the softmax")
    if not _all_masked_rows(condition, x, softmax.attribute("dim")):
        return rewriter.notify_match_failure(node, "the condition is not 'the row is all -inf'")
    info = torch.finfo(getattr(torch, _TORCH_DTYPES[x.dtype]))

    def op(name, operands, **attributes):
        return rewriter.op_before(node, name, operands, **attributes)

    finite = op("aten.clamp", [x], min=float(info.min), max=None)
    new_softmax = op("aten._softmax", [finite], dim=softmax.attribute("dim"), half_to_float=softmax.attribute("half_to_float"))
    half = op("aten.mul.Tensor", [x, _float_constant(rewriter, "softmax_half", x.type, 0.5)])
    shifted = op("aten.add.Tensor", [half, _float_constant(rewriter, "softmax_highest", x.type, float(info.max))])
    keep = op("aten.clamp", [shifted], min=0.0, max=1.0)
    rewriter.replace_node(node, [op("aten.mul.Tensor", [new_softmax, keep])])
    return True


@attrs.frozen
class SafeSoftmax(PatternRewritePass):
    """Rewrite a softmax whose all--inf rows are set to 0 (attention with a mask) as ops XNNPACK runs."""

    name = "xnnpack.safe-softmax"

    rules = (safe_softmax,)


def _norm_input_problem(node: Node, x: Value, min_rank: int, what: str) -> str | None:
    """Why the fp32 norm ``node`` of ``x`` is not decomposed, or None."""
    from .rules import MAX_RANK

    if not isinstance(x.type, TensorType) or x.dtype is not DType.f32:
        return f"not an f32 {what}"
    if not x.type.is_static or not min_rank <= x.rank <= MAX_RANK:
        return f"symbolic shape or rank not {min_rank} to {MAX_RANK}"
    if not all(r.is_unused() for r in node.results[1:]):
        return "its mean/rstd outputs are used"
    return None


def _normalize(node: Node, rewriter: Rewriter, x: Value, dims: list, base: str) -> Value:
    """(x - mean(x)) * rsqrt(mean((x - mean(x))**2) + eps) over ``dims``, before ``node``, with
    ``node``'s eps as a constant named after ``base``."""
    def op(name, operands, **attributes):
        return rewriter.op_before(node, name, operands, **attributes)

    mean = op("aten.mean.dim", [x], dim=dims, keepdim=True)
    centered = op("aten.sub.Tensor", [x, mean])
    variance = op("aten.mean.dim", [op("aten.mul.Tensor", [centered, centered])], dim=dims, keepdim=True)
    eps = _float_constant(rewriter, base, x.type, float(node.attribute("eps")))
    return op("aten.mul.Tensor", [centered, op("aten.rsqrt", [op("aten.add.Tensor", [variance, eps])])])


@rewrite_pattern("aten.native_layer_norm")
def decompose_layer_norm(node: Node, rewriter: Rewriter) -> bool:
    """fp32 layer norm => mean, subtract, mean of squares, add eps, rsqrt, multiply (weight),
    add (bias): XNNPACK has no layer norm but runs each of these (the means over the trailing dims
    through xnnpack.mean-over-last-dims, which runs after this pass). bf16 layer norms are fp32
    ones by then (layer-norm-in-fp32)."""
    x = node.input
    problem = _norm_input_problem(node, x, 1, "layer norm (layer-norm-in-fp32 widens bf16 ones first)")
    if problem:
        return rewriter.notify_match_failure(node, problem)
    dims = list(range(x.rank - len(node.attribute("normalized_shape")), x.rank))
    result = _normalize(node, rewriter, x, dims, "layer_norm_eps")
    weight, bias = node.operand("weight"), node.operand("bias")
    if weight is not None:
        result = rewriter.op_before(node, "aten.mul.Tensor", [result, weight])
    if bias is not None:
        result = rewriter.op_before(node, "aten.add.Tensor", [result, bias])
    rewriter.replace_node(node, [result, None, None])
    return True


@attrs.frozen
class DecomposeLayerNorm(PatternRewritePass):
    """Rewrite fp32 layer norms (result only, static, rank 1-6) as the means, multiplies and adds XNNPACK runs."""

    name = "xnnpack.decompose-layer-norm"

    rules = (decompose_layer_norm,)


@rewrite_pattern("aten.native_group_norm")
def decompose_group_norm(node: Node, rewriter: Rewriter) -> bool:
    """fp32 group norm of x (N, C, *spatial) => view (N, G, C/G * spatial), mean, subtract, mean of
    squares, add eps, rsqrt, multiply, view back, multiply by the weight and add the bias (as
    (C, 1, ...) constants): XNNPACK has no group norm but runs each of these (the means through
    xnnpack.mean-over-last-dims, which runs after this pass). ExecuTorch's portable group norm,
    where it stays otherwise, is also less accurate (fuzz fp32 11651: off by 2.6e-4 of the
    output's size)."""
    if len(node.operands) not in (1, 3):  # (the input; with a weight and a bias)
        return rewriter.notify_match_failure(node, "a weight without a bias, or a bias without a weight")
    x, weight, bias = (list(node.operands) + [None, None])[:3]
    problem = _norm_input_problem(node, x, 2, "group norm")
    if problem:
        return rewriter.notify_match_failure(node, problem)
    n, c, groups = x.shape[0], x.shape[1], int(node.attribute("group"))
    if groups < 1 or c % groups:
        return rewriter.notify_match_failure(node, f"{c} channels in {groups} groups")
    if any(v is not None and (not v.is_constant or v.data is None) for v in (weight, bias)):
        return rewriter.notify_match_failure(node, "a weight or bias that is not a constant")
    size = math.prod(x.shape[1:])
    grouped = rewriter.op_before(node, "aten.view_copy", [x], size=[n, groups, size // groups])
    normed = _normalize(node, rewriter, grouped, [2], "group_norm_eps")
    result = rewriter.op_before(node, "aten.view_copy", [normed], size=list(x.shape))
    per_channel = (c,) + (1,) * (x.rank - 2)
    for value, name, base in ((weight, "aten.mul.Tensor", "group_norm_weight"), (bias, "aten.add.Tensor", "group_norm_bias")):
        if value is not None:
            constant = rewriter.add_constant(base, TensorType(DType.f32, per_channel), value.data.reshape(per_channel))
            result = rewriter.op_before(node, name, [result, constant])
    rewriter.replace_node(node, [result, None, None])
    return True


@attrs.frozen
class DecomposeGroupNorm(PatternRewritePass):
    """Rewrite fp32 group norms (result only, static, rank 2-6, constant weight and bias) as the
    views, means, multiplies and adds XNNPACK runs."""

    name = "xnnpack.decompose-group-norm"

    rules = (decompose_group_norm,)


@rewrite_pattern("aten.split_with_sizes_copy", "aten.split_copy.Tensor")
def split_as_slices(node: Node, rewriter: Rewriter) -> bool:
    """split(x, sizes, dim) => one slice_copy per used piece (XNNPACK slices; it has no split in
    ExecuTorch's XNNPACK backend). Fused projections split this way: Phi-3's QKV and gate/up."""
    x = node.operands[0] if node.operands else None
    if x is None or not isinstance(x.type, TensorType) or not x.type.is_static:
        return rewriter.notify_match_failure(node, "not a static tensor")
    from .rules import MAX_RANK

    if x.rank > MAX_RANK:  # (decomposed, it would only be more ops outside)
        return rewriter.notify_match_failure(node, f"{x.rank}-D: it stays outside XNNPACK, whole")
    dim = node.attributes.get("dim", 0) % x.rank
    if node.op == "aten.split_with_sizes_copy":
        sizes = list(node.attributes.get("split_sizes") or [])
    else:
        size = node.attributes.get("split_size")
        sizes = [min(size, x.shape[dim] - start) for start in range(0, x.shape[dim], size)] if size else []
    if len(sizes) != len(node.results) or sum(sizes) != x.shape[dim]:
        return rewriter.notify_match_failure(node, f"split sizes {sizes} do not match its {len(node.results)} results")
    pieces, start = [], 0
    for size, result in zip(sizes, node.results):
        if result.is_unused():
            pieces.append(None)
        else:
            piece = rewriter.create("aten.slice_copy.Tensor", [x], [result.type],
                                    attributes={"dim": dim, "start": start, "end": start + size, "step": 1})
            pieces.append(rewriter.insert_before(node, piece).result)
        start += size
    rewriter.replace_node(node, pieces)
    return True


@attrs.frozen
class SplitAsSlices(DelegatedDtypeRewrite):
    """Rewrite a static split as the slices of its used pieces."""

    name = "xnnpack.split-as-slices"

    rules = (split_as_slices,)


CASTS = ("dim_order_ops._to_dim_order_copy", "aten._to_copy")


@rewrite_pattern(*CASTS)
def cast_as_convert(node: Node, rewriter: Rewriter) -> bool:
    """A bf16 <-> f32 cast that keeps the layout => xir.convert, which XNNPACK runs. Only where it
    will be delegated (rank 1 to 6, not empty): xir.convert has no portable kernel."""
    from .rules import MAX_RANK

    x, result = node.input.type, node.result.type
    if not isinstance(x, TensorType) or not isinstance(result, TensorType) or {x.dtype, result.dtype} != {DType.f32, DType.bf16}:
        return rewriter.notify_match_failure(node, "not a cast between f32 and bf16")
    if not 1 <= x.rank <= MAX_RANK or not x.is_static or x.numel() == 0:
        return rewriter.notify_match_failure(node, f"{x.rank}-D or symbolic or empty: it would stay outside XNNPACK")
    change = layout_change(node)
    if change:
        return rewriter.notify_match_failure(node, change)
    if result.dtype is DType.f32:
        # measured: an f32 result of a bf16 -> f32 convert that leaves the delegate (returned, or read
        # by an op left outside) corrupts another output of the delegate. Convert only what XNNPACK
        # reads on: every reader is an op it takes.
        from .capability import Options, float_verdict

        options = Options(enable_bf16=True)
        readers = node.result.users
        if any(user.is_return or not float_verdict(user, options).supported for user in readers):
            return rewriter.notify_match_failure(node, "an upcast whose result is returned or read by an op XNNPACK does not take")
    rewriter.replace_node(node, [rewriter.op_before(node, "xir.convert", [node.input], dtype=result.dtype)])
    return True


@attrs.frozen
class CastsAsConverts(Bf16Rewrite):
    """Rewrite bf16 <-> f32 casts (rank 1-6, same layout) as xir.convert, which XNNPACK runs (with enable_bf16)."""

    name = "xnnpack.casts-as-converts"
    rules = (cast_as_convert,)


for _cls in (Bf16BmmF32Output, Bf16InFp32, DecomposeGeluTanh):
    RENAMED_PASSES[_cls.name.removeprefix("xnnpack.")] = _cls.name


@rewrite_pattern("aten.linear")
def weight_only_linear_bias(node: Node, rewriter: Rewriter) -> bool:
    """linear(x, dequantize_affine(w), b) => linear(x, dequantize_affine(w)) + b, for torchao's int8
    weight-only linears XNNPACK runs as an fp32 x qc8w fully connected (ExecuTorch's serializer
    quantizes the bias of a linear whose weight is quantized, and refuses it with an fp32 input)."""
    from .capability import weight_only_linear_reason

    bias = node.operand("bias")
    if bias is None:
        return rewriter.notify_match_failure(node, "no bias")
    reason = weight_only_linear_reason(node)
    if reason is not None:
        return rewriter.notify_match_failure(node, reason)
    product = rewriter.op_before(node, "aten.linear", [node.input, node.weight])
    rewriter.replace_node(node, [rewriter.op_before(node, "aten.add.Tensor", [product, bias])])
    return True


@attrs.frozen
class WeightOnlyLinearBias(PatternRewritePass):
    """Add the bias of a torchao int8 weight-only linear after it (XNNPACK's qc8w fully connected
    with an fp32 input takes no bias through ExecuTorch's serializer)."""

    name = "xnnpack.weight-only-linear-bias"

    rules = (weight_only_linear_bias,)


@rewrite_pattern("quantized_decomposed.dequantize_per_tensor")
def dequantize_per_float_reader(node: Node, rewriter: Rewriter) -> bool:
    """A dequantize read by several ops, some of which are no quantized pattern XNNPACK runs (they
    run in fp32 on the dequantized tensor): each of those gets a dequantize of its own (the same
    op on the same operands: the same values). A dequantize shared with a quantized op is folded
    into it, and XNNPACK would hand the other readers the int8 tensor; one shared with a graph
    output after a convolution is moved by XNNPACK's channels-last pass for all its readers."""
    from .capability import Options, float_verdict, may_run_between_conversions, static_unit

    result = node.results[0]
    if len(result.users) < 2:
        return rewriter.notify_match_failure(node, "read by one op")
    options = Options()
    readers = [r for r in result.users if not r.is_return and may_run_between_conversions(r)
               and static_unit(r, options)[0] is None and float_verdict(r, options, dequantized_ok=True).supported]
    if len(readers) == len(result.users):
        readers = readers[1:]  # the first keeps the original
    if not readers:
        return rewriter.notify_match_failure(node, "no reader runs in fp32 beside a shared dequantize")
    for reader in readers:
        copy = rewriter.op_before(reader, node.op, list(node.operands), **dict(node.attributes))
        for index, operand in enumerate(reader.operands):
            if operand is result:
                rewriter.set_operand(reader, index, copy)
    return True


@attrs.frozen
class DequantizePerFloatReader(PatternRewritePass):
    """Give each op that runs in fp32 on a shared dequantized tensor its own dequantize (see
    :func:`dequantize_per_float_reader`), so that XNNPACK runs it beside a conversion."""

    name = "xnnpack.dequantize-per-float-reader"

    rules = (dequantize_per_float_reader,)


_CLAMPS = ("aten.relu", "aten.hardtanh")


def _clamp_bounds(node: Node) -> tuple[float, float]:
    if node.op == "aten.relu":
        return 0.0, math.inf
    return float(node.attribute("min_val")), float(node.attribute("max_val"))


@rewrite_pattern(*_CLAMPS)
def merge_clamps(node: Node, rewriter: Rewriter) -> bool:
    """relu/hardtanh of a relu/hardtanh => one hardtanh (or relu) with the bounds of both. XNNPACK's
    preprocessing fuses an activation into the add, sub, mul, conv or linear before it by writing
    its bounds on that op, and a second activation after it then overwrites them: relu(relu6(x + b))
    ran as relu(x + b), without the upper bound (measured: wrong by up to 0.8; fuzz fp32 seed 11037)."""
    first = node.operands[0].producer
    if first is None or first.op not in _CLAMPS:
        return rewriter.notify_match_failure(node, "not an activation of an activation")
    (lo1, hi1), (lo2, hi2) = _clamp_bounds(first), _clamp_bounds(node)
    lo, hi = max(lo1, lo2), min(hi1, hi2)
    if lo > hi:
        return rewriter.notify_match_failure(node, f"the bounds [{lo1}, {hi1}] and [{lo2}, {hi2}] do not overlap")
    x = first.operands[0]
    if lo == 0.0 and hi == math.inf:
        merged = rewriter.op_before(node, "aten.relu", [x])
    else:
        merged = rewriter.op_before(node, "aten.hardtanh", [x], min_val=lo, max_val=hi)
    rewriter.replace_node(node, [merged])
    if not first.results[0].uses:
        rewriter.erase(first)  # (read by nothing else)
    return True


@attrs.frozen
class MergeClamps(PatternRewritePass):
    """Merge consecutive relu/hardtanh into one (see :func:`merge_clamps`)."""

    name = "xnnpack.merge-clamps"

    rules = (merge_clamps,)
