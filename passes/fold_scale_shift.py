"""fold-scale-shift-into-linears: fold a per-feature scale and shift (a norm's weight and bias)
into the weights and biases of the linears that read it.

RMSNorm ends with ``n * w`` and a layer norm with ``n * w + b``, ``w`` and ``b`` constants over
the last dim; in a pre-norm transformer (Llama, Qwen, Phi, ViT, SigLIP, ...) only linears read
the result (q, k and v; gate and up; fc1; the head). A linear is linear in its input, so

    linear(n * w + b, W, c)  =  linear(n, W * w, c + W @ b)

with ``W * w`` scaling each column of ``W`` (``W`` is [out, in], ``w`` over ``in``). Each of those
readers gets its own scaled weight (and bias) as new constants; the multiply and add are gone:
two elementwise ops over the whole activation per norm (one for RMSNorm), which for a 197-token
ViT are two of the larger non-GEMM costs of its layer.

Matched on ``mul(n, w)``, ``add(n, b)`` and ``add(mul(n, w), b)`` (the multiply read only by the
add), in fp32 only, with ``w``/``b`` constants of one element or of the last dim's size (shape
(K,) or (1, ..., K)) that do not broadcast ``n`` to a bigger shape, and the result read only by
``aten.linear`` as its input, each with a constant fp32 [out, K] weight read by nothing else
(a copy would store a tied weight twice; several of the linears may share one) and a constant
bias or none. Declined otherwise, with the reason: a result that is also a graph output or read by another op (a residual add, a
rotary embedding), a weight that is computed (a dequantized int4 or int8 weight: scaling it
would need requantizing), bf16 (the scaled weight would round once more than eager does).

The other way round, a product of a linear's output with one number, through views and permutes
that nothing else reads (attention's ``q * scale`` and ``k * scale`` of a decomposed SDPA), or
with one number per output feature right after it (a layer scale), goes into that linear's
weight and bias: ``linear(x, W, c) * s = linear(x, W * s, c * s)`` (rows of ``W`` scaled), when
the weight and bias are constants the linear alone reads.

And a number, or one number per output feature, added right after a linear (RMSNorm's ``eps``
after its mean, when a backend writes the mean as a linear) goes into that linear's
bias: ``linear(x, W, c) + s = linear(x, W, c + s)``, when the linear's weight is a constant and its
bias a constant it alone reads (or none): one op fewer per norm. Only with ``bias_shifts=true``:
the sum then starts from ``c + s`` in the GEMM instead of adding ``s`` to its rounded result,
which moves the output by about an ulp, and a pipeline that must keep a reference's numbers leaves it off
(in the flow's 8da4w program with group 128, that ulp flipped an activation's int8 rounding: the
decode step's logits moved by 0.006 from stock's, which are otherwise equal to the bit; the step
was no faster: docs/benchmarks.md).

The numbers: ``W * w`` is rounded once in fp32 (the product eager rounds per activation instead),
and ``W @ b`` is summed in fp64 and rounded once; the linear's outputs move by about an fp32 ulp
of their size (measured on the transformers zoo and the LLM flow in docs/benchmarks.md). A shift
moved into the bias is added where the GEMM starts its sums (``c + s`` rounded once in
fp32) rather than to the rounded result: again about an ulp.
"""

from __future__ import annotations

import attrs

from xir import DType, Node, TensorType, Value
from xir.ops import aten

from .rewriter import PatternRewritePass, Rewriter, rewrite_pattern


def _per_feature(value: Value, n: Value, what: str) -> str | None:
    """Why the constant ``value`` is not a per-feature scale or shift of ``n``'s last dim, or None."""
    if not value.is_constant or value.data is None:
        return f"the {what} is not a constant"
    if value.dtype is not DType.f32:
        return f"the {what} is {value.dtype}, not f32"
    shape, width = value.type.shape, n.type.shape[-1] if n.rank else None
    if value.type.numel() == 1 and len(shape) <= n.rank:
        return None
    if not shape or shape[-1] != width or any(d != 1 for d in shape[:-1]) or len(shape) > n.rank:
        return f"the {what} {value.type} is not one number per feature of the last dim ({width})"
    return None


def _constant_and_other(node: Node) -> tuple[Value | None, Value | None]:
    """A binary ``node``'s constant operand (the second when both are) and its other operand;
    (None, None) when neither is a constant."""
    a, b = node.operands[:2]
    return (b, a) if b.is_constant else (a, b) if a.is_constant else (None, None)


def _split(node: Node) -> tuple[Value, Value | None, Value | None] | str:
    """``node`` as (n, scale, shift): ``mul(n, w)``, ``add(n, b)`` or ``add(mul(n, w), b)``; or why not."""
    constant, other = _constant_and_other(node)
    if constant is None:
        return "neither operand is a constant"
    if node.op == aten.mul.Tensor:
        return other, constant, None
    if node.attributes.get("alpha", 1) != 1:
        return "an add with alpha"
    inner = other.producer
    if inner is not None and inner.op == aten.mul.Tensor and other.single_user() is node:
        split = _split(inner)
        if not isinstance(split, str):
            return split[0], split[1], constant
    return other, None, constant


@rewrite_pattern(aten.mul.Tensor, aten.add.Tensor)
def fold_scale_shift_into_linears(node: Node, rewriter: Rewriter) -> bool:
    """linear(n * w + b, W, c) => linear(n, W * w, c + W @ b), for every linear that reads it."""
    y = node.result
    if len(node.operands) != 2 or not isinstance(y.type, TensorType) or y.dtype is not DType.f32 or y.rank < 1:
        return rewriter.notify_match_failure(node, "not an fp32 tensor op of two operands")
    readers = y.users
    if y.is_graph_output():
        return rewriter.notify_match_failure(node, "the result is a graph output")
    if not readers or any(r.op != aten.linear or r.operands[0] is not y or y in r.operands[1:] for r in readers):
        other = next((r.op for r in readers if r.op != aten.linear), "a linear as its weight or bias")
        return rewriter.notify_match_failure(node, f"read by {other}, not only as the input of linears")
    split = _split(node)
    if isinstance(split, str):
        return rewriter.notify_match_failure(node, split)
    n, scale, shift = split
    if n.type.shape != y.type.shape or n.dtype is not DType.f32:
        return rewriter.notify_match_failure(node, "the constant broadcasts the input to another shape")
    for value, what in ((scale, "scale"), (shift, "shift")):
        problem = None if value is None else _per_feature(value, n, what)
        if problem:
            return rewriter.notify_match_failure(node, problem)
    reading = {id(r) for r in readers}
    for linear in readers:
        weight, bias = linear.operands[1], linear.operand("bias")
        if not weight.is_constant or weight.data is None:
            return rewriter.notify_match_failure(
                node, f"{linear.op}'s weight is computed (a dequantized weight?), not a constant"
            )
        if weight.dtype is not DType.f32 or weight.rank != 2 or weight.type.shape[1] != n.type.shape[-1]:
            return rewriter.notify_match_failure(
                node, f"{linear.op}'s weight {weight.type} is not an f32 [out, {n.type.shape[-1]}]"
            )
        if scale is not None and any(id(r) not in reading for r in weight.users):
            return rewriter.notify_match_failure(
                node, f"{linear.op}'s weight is read by another op too (a tied weight)"
            )
        if bias is not None and (not bias.is_constant or bias.data is None or bias.dtype is not DType.f32):
            return rewriter.notify_match_failure(node, f"{linear.op}'s bias is not an f32 constant")
    # matched completely: edit
    scaled: dict[int, Value] = {}  # one scaled copy per weight (read by several of the linears)
    for linear in readers:
        weight, bias = linear.operands[1], linear.operand("bias")
        if scale is not None and id(weight) not in scaled:  # (one number broadcasts; K numbers scale columns)
            scaled[id(weight)] = rewriter.add_constant(
                f"{weight.name}_scaled",
                weight.type,
                (weight.data.float() * scale.data.float().reshape(-1)).contiguous(),
            )
        operands = [n, weight if scale is None else scaled[id(weight)]]
        if shift is not None:
            w = weight.data.double()
            moved = w @ shift.data.double().reshape(-1).expand(w.shape[1])
            new_bias = (moved if bias is None else bias.data.double() + moved).float()
            operands.append(
                rewriter.add_constant(
                    f"{(bias or weight).name}_shifted", TensorType(DType.f32, (w.shape[0],)), new_bias.contiguous()
                )
            )
        elif bias is not None:
            operands.append(bias)
        if "bias" in linear.attributes:  # (IR text may spell an absent bias {bias=none})
            rewriter.remove_attribute(linear, "bias")
        rewriter.set_operands(linear, operands)
    inner = next((v.producer for v in node.operands if v is not n and not v.is_constant), None)
    rewriter.erase(node)
    if inner is not None and inner.result.is_unused():  # (the multiply of add(mul(n, w), b))
        rewriter.erase(inner)
    return True


LAYOUT_OPS = (aten.view_copy, aten.permute_copy)  # ops a product with one number commutes with


def _live_reader(value: Value) -> Node | None:
    """The one node that reads ``value`` for a result someone uses (a dead view an earlier rewrite
    left, which dead-code-elimination removes later, does not count); None when there are more,
    or the value is a graph output."""
    live = [u for u in value.users if u.is_return or any(r.uses for r in u.results)]
    return live[0] if len(live) == 1 and not live[0].is_return else None


def _producing_linear(value: Value) -> tuple[Node | None, int]:
    """The linear ``value`` is made from through views and permutes that nothing else reads, and
    how many of those lie between; (None, 0) when there is none."""
    steps = 0
    while True:
        node = value.producer
        if node is None or _live_reader(value) is None:
            return None, 0
        if node.op == aten.linear:
            return node, steps
        if node.op not in LAYOUT_OPS:
            return None, 0
        value, steps = node.operands[0], steps + 1


def _constant_weight_and_bias(linear: Node, own_weight: bool) -> str | None:
    """Why ``linear`` is not one whose output a rewrite may scale or shift through its weight and
    bias, or None: an f32 [out, in] constant weight (read by no other op, with ``own_weight``) and
    an f32 constant bias of its own, or none."""
    weight, bias = linear.operands[1], linear.operand("bias")
    if not weight.is_constant or weight.data is None or weight.dtype is not DType.f32 or weight.rank != 2:
        return "the linear's weight is not an f32 [out, in] constant (a dequantized weight?)"
    if own_weight and any(r is not linear for r in weight.users):
        return "the linear's weight is read by another op too (a tied weight)"
    if bias is not None and (
        not bias.is_constant
        or bias.data is None
        or bias.dtype is not DType.f32
        or any(r is not linear for r in bias.users)
    ):
        return "the linear's bias is not an f32 constant of its own"
    return None


@rewrite_pattern(aten.mul.Tensor)
def fold_scale_into_producing_linear(node: Node, rewriter: Rewriter) -> bool:
    """linear(x, W, c) [-> views, permutes] * s  =>  linear(x, W * s, c * s) [-> views, permutes],
    ``s`` one number (attention's scale on q and k), or one per output feature right after the
    linear (a layer scale)."""
    y = node.result
    if len(node.operands) != 2 or not isinstance(y.type, TensorType) or y.dtype is not DType.f32:
        return rewriter.notify_match_failure(node, "not an fp32 product of two operands")
    constant, v = _constant_and_other(node)
    if constant is None or v.is_constant:
        return rewriter.notify_match_failure(node, "not a product of a computed value and a constant")
    if v.type.shape != y.type.shape or v.dtype is not DType.f32:
        return rewriter.notify_match_failure(node, "the constant broadcasts the input to another shape")
    linear, steps = _producing_linear(v)
    if linear is None:
        return rewriter.notify_match_failure(
            node, "not made by a linear (through views and permutes read only on the way)"
        )
    problem = _per_feature(constant, linear.result, "scale")
    if problem:
        return rewriter.notify_match_failure(node, problem)
    if steps and constant.type.numel() != 1:
        return rewriter.notify_match_failure(node, "a scale per feature after views or permutes")
    problem = _constant_weight_and_bias(linear, own_weight=True)
    if problem:
        return rewriter.notify_match_failure(node, problem)
    weight, bias = linear.operands[1], linear.operand("bias")
    # matched completely: edit
    s = constant.data.float().reshape(-1)
    operands = [
        linear.operands[0],
        rewriter.add_constant(
            f"{weight.name}_scaled", weight.type, (weight.data.float() * s.reshape(-1, 1)).contiguous()
        ),
    ]
    if bias is not None:
        operands.append(rewriter.add_constant(f"{bias.name}_scaled", bias.type, (bias.data.float() * s).contiguous()))
    rewriter.set_operands(linear, operands)
    rewriter.replace_all_uses(y, v)
    rewriter.erase(node)
    return True


@rewrite_pattern(aten.add.Tensor)
def fold_shift_into_producing_linear(node: Node, rewriter: Rewriter) -> bool:
    """linear(x, W, c) + s  =>  linear(x, W, c + s), ``s`` one number or one per output feature
    (RMSNorm's eps after its mean written as a linear)."""
    y = node.result
    if len(node.operands) != 2 or not isinstance(y.type, TensorType) or y.dtype is not DType.f32 or y.rank < 1:
        return rewriter.notify_match_failure(node, "not an fp32 tensor sum of two operands")
    if node.attributes.get("alpha", 1) != 1:
        return rewriter.notify_match_failure(node, "an add with alpha")
    constant, v = _constant_and_other(node)
    if constant is None or v.is_constant:
        return rewriter.notify_match_failure(node, "not a sum of a computed value and a constant")
    if v.type.shape != y.type.shape or v.dtype is not DType.f32:
        return rewriter.notify_match_failure(node, "the constant broadcasts the input to another shape")
    linear = v.producer
    if linear is None or linear.op != aten.linear or _live_reader(v) is not node:
        return rewriter.notify_match_failure(node, "not made by a linear that nothing else reads (or a graph output)")
    problem = _per_feature(constant, v, "shift")
    if problem:
        return rewriter.notify_match_failure(node, problem)
    problem = _constant_weight_and_bias(linear, own_weight=False)  # (only the bias changes: a shared weight is fine)
    if problem:
        return rewriter.notify_match_failure(node, problem)
    weight, bias = linear.operands[1], linear.operand("bias")
    # matched completely: edit
    out = weight.type.shape[0]
    shift = constant.data.float().reshape(-1).expand(out)
    new_bias = (shift if bias is None else bias.data.float() + shift).contiguous()
    name = f"{bias.name}_shifted" if bias is not None else f"{weight.name}_bias"
    operands = [linear.operands[0], weight, rewriter.add_constant(name, TensorType(DType.f32, (out,)), new_bias)]
    if "bias" in linear.attributes:  # (IR text may spell an absent bias {bias=none})
        rewriter.remove_attribute(linear, "bias")
    rewriter.set_operands(linear, operands)
    rewriter.replace_all_uses(y, v)
    rewriter.erase(node)
    return True


@attrs.frozen
class FoldScaleShiftIntoLinears(PatternRewritePass):
    """Fold a per-feature scale and shift (a norm's weight and bias) read only by fp32 linears into their weights and biases, and a scale of a linear's output into its weight and bias, a shift of it into its bias.

    ``bias_shifts=true``: also the shift after a linear, into its bias."""

    name = "fold-scale-shift-into-linears"
    bias_shifts: bool = False

    def patterns(self):
        patterns = [fold_scale_shift_into_linears, fold_scale_into_producing_linear]
        return patterns + [fold_shift_into_producing_linear] if self.bias_shifts else patterns
