"""``xnnpack.eager-scalar-promotion``: give a 0-D bf16 or fp16 tensor combined with a Python number
the dtype eager PyTorch gives it, which ExecuTorch 1.5.1's ``to_edge`` makes fp32.

In eager PyTorch ``t / 2.0``, ``t`` a 0-D bf16 tensor, is bf16: a Python number takes no part in
type promotion; the op computes in fp32 and rounds. ExecuTorch's ``ScalarToTensorPass`` first makes
the number a 0-D fp32 tensor (a constant named ``_lifted_tensor_constant<N>``), then its
``RemoveMixedTypeOperators`` promotes two 0-D tensors, bf16 and fp32, to fp32: it casts ``t`` to
fp32, and the op's result is fp32. A graph output then comes out fp32 where eager returns bf16, and
an op reading the result reads a value eager would have rounded. Stock's programs are the same;
``xir fuzz`` found it (bf16 seeds 9212 and 7000).

    c = _to_dim_order_copy(t, f32)        t: bf16[] or f16[]; c made for this op by the promotion
    r = op(c, k)                          k: ExecuTorch's scalar constant, f32[]; op add, sub, mul, div
 => r = op(c, k)
    t2 = _to_dim_order_copy(r, bf16)      eager's result: fp32 arithmetic rounded to t's dtype
    r2 = _to_dim_order_copy(t2, f32)
    a graph output of r is t2; the other readers of r read r2

so a graph output has eager's dtype and value, and a reader the promotion built for fp32 reads
eager's rounded value in fp32 (``t / 2.0 / 3.0`` is rewritten op by op: the second op reads ``r2``).
The same when both operands are such values of one dtype, the promotion's casts or results this
pass rounded: ``t + 0.25 * t`` and ``t * 0.5 + t * 0.25`` are bf16 in eager, computed in fp32 and
rounded once, where to_edge leaves their sum fp32 (fuzz bf16 97001). A 0-D bf16 tensor with a 0-D
fp16 or fp32 one is fp32 in eager too, and left alone. And an elementwise op of one such rounded
value (``exp(t + 0.25 * t)``, ``relu(t * 3.0)``): its result is rounded too.

Recognized by provenance, not by shape alone: the cast must be the one ExecuTorch made for this op
(it gives the cast the op's ``from_node`` metadata), and the constant one ExecuTorch made from a
number (a ``_lifted_tensor_constant``). Left alone, as eager computes them in fp32 too: a user's own
cast (``t.float() + 2.0``: the cast's metadata is the ``float`` call's), a 0-D fp32 tensor the user
wrote (``t * torch.tensor(2.0)``, which torch.export lifts as ``c_lifted_tensor_<N>``). A node the IR
did not import from a program (no FX node to ask) is declined. Runs first in the default pipeline,
before any pass rewrites the casts.

A second rule, for a bf16 tensor ``x`` of rank 1 or more: ``x * 1.7`` and ``x / 3.3`` are computed
by eager's CPU kernels in fp32 with the number itself, rounded once, where ExecuTorch's promotion
casts the number to bf16 first (``x * 1.703125``: a third of the products differ, in stock's
programs too). ``x + 0.1`` and ``x - 0.1`` eager computes with the number rounded to bf16, as the
cast does (measured on 4096 values each), so they are left alone:

    k2 = _to_dim_order_copy(k, bf16)      k: ExecuTorch's number constant, f32[]; the cast its promotion's
    r = op(x, k2)                         op mul (either side) or div (k2 the divisor); x, r bf16
 => r = _to_dim_order_copy(op(_to_dim_order_copy(x, f32), k), bf16)

Declined when the number is a bf16 number (the cast rounded nothing: ``x * 0.5``). Inside XNNPACK
``xnnpack.casts-as-converts`` makes the casts converts.
"""

from __future__ import annotations

import attrs

from passes import PatternRewritePass, Rewriter, rewrite_pattern
from xir import DType, Node, TensorType, Value
from xir.ops import aten, dim_order_ops, family, has_trait

from ._base import RunStateRule

CASTS = family("cast")
CAST = dim_order_ops._to_dim_order_copy  # (the cast this pass makes)
# the ops ExecuTorch's RemoveMixedTypeOperators promotes that take a number (not aten.minimum; and
# not div.Tensor_mode, a division with a rounding mode, which xir.ops does not define)
PROMOTED_OPS = (aten.add.Tensor, aten.sub.Tensor, aten.mul.Tensor, aten.div.Tensor)
# the ops whose Python number eager keeps in fp32 with a bf16 tensor (ATen's CPU kernels read the
# number's own value, not its bf16 rounding, for a product and a quotient by it; for a sum and a
# difference they read the rounding, as ExecuTorch's cast does: measured, 4096 values each)
OPMATH_NUMBER_OPS = (aten.mul.Tensor, aten.div.Tensor)
SCALAR_CONSTANT = "_lifted_tensor_constant"  # ExecuTorch's name for a number made a tensor
LOW_PRECISION = (DType.bf16, DType.f16)


def _scalar(value: Value) -> bool:
    return isinstance(value.type, TensorType) and value.type.rank == 0


def _provenance(node: Node):
    """The first ``from_node`` entry of ``node``'s FX node (name, target), or None."""
    fx = getattr(node, "fx_node", None)
    sources = fx.meta.get("from_node") if fx is not None else None
    if not sources:
        return None
    return getattr(sources[0], "name", None), str(getattr(sources[0], "target", None))


def _number_constant(value: Value) -> bool:
    """``value`` is a 0-D fp32 constant ExecuTorch made from a Python number."""
    return (
        value.is_constant
        and _scalar(value)
        and value.type.dtype is DType.f32
        and (value.name or "").startswith(SCALAR_CONSTANT)
    )


def _eager_dtype(value: Value, reader: Node, made: dict) -> DType | None:
    """The dtype eager PyTorch gives ``value`` where ``reader`` reads it, when that is a low
    precision the promotion lost: a cast ExecuTorch made for ``reader`` from a 0-D bf16/fp16 tensor,
    or a value this pass rounded (``made``); None otherwise."""
    if value in made:
        return made[value]
    cast = value.producer
    if cast is None or cast.op not in CASTS or not _scalar(value) or value.type.dtype is not DType.f32:
        return None
    source = cast.operands[0]
    if not _scalar(source) or source.type.dtype not in LOW_PRECISION:
        return None
    mine = _provenance(cast)
    if mine is None or mine != _provenance(reader):
        return None  # (a cast the user wrote, or one we cannot place)
    return source.type.dtype


def _one_operand_low(node: Node, made: dict) -> DType | None:
    """The eager dtype of ``node``'s result when it is an elementwise op of one tensor operand, a
    value this pass rounded (``exp(t * 0.5)``: bf16 in eager, computed in fp32 and rounded once)."""
    tensors = [v for v in node.operands if isinstance(v.type, TensorType)]
    if len(tensors) != 1 or tensors[0] not in made or len(node.results) != 1:
        return None
    if node.op in CASTS or not (has_trait(node.op, "elementwise") and has_trait(node.op, "pure")):
        return None  # (a cast the user wrote, ``(t * 0.5).float()``, is fp32 in eager too)
    return made[tensors[0]]


def eager_scalar_promotion(node: Node, rewriter: Rewriter, made: dict) -> bool:
    """op(cast(t, f32), number) with t a 0-D bf16/fp16 tensor, the cast ExecuTorch's promotion (or
    op(a, b), each such a cast or a value rounded here, of one dtype) =>
    the op, then its result rounded to t's dtype for the graph outputs and back to fp32 for the
    other readers (``made``: the rounded fp32 values of this run, by value, with their eager dtype)."""
    result = node.results[0] if node.results else None
    if result is None or not _scalar(result) or result.type.dtype is not DType.f32:
        return rewriter.notify_match_failure(node, "not a 0-D fp32 result")
    low = _one_operand_low(node, made)
    if low is None:
        if node.op not in PROMOTED_OPS:
            return rewriter.notify_match_failure(
                node, "not an op ExecuTorch promotes, nor an elementwise op of a value rounded here"
            )
        operands = [v for v in node.operands if isinstance(v.type, TensorType)]
        if len(operands) != 2:
            return rewriter.notify_match_failure(node, "not two tensor operands")
        dtypes = [_eager_dtype(v, node, made) for v in operands]
        numbers = [_number_constant(v) for v in operands]
        if not ((dtypes[0] and numbers[1]) or (dtypes[1] and numbers[0]) or (dtypes[0] and dtypes[0] == dtypes[1])):
            return rewriter.notify_match_failure(
                node, "not a low-precision 0-D tensor promoted by ExecuTorch with a number or with another of its dtype"
            )
        low = dtypes[0] or dtypes[1]
    readers = [user for user in result.users if not user.is_return]
    outputs = [i for i, value in enumerate(rewriter.graph.outputs) if value is result]
    rounded = rewriter.insert_after(node, rewriter.create(CAST, [result], attributes={"dtype": low, "dim_order": []}))
    wide = rewriter.insert_after(
        rounded, rewriter.create(CAST, [rounded.result], attributes={"dtype": DType.f32, "dim_order": []})
    )
    made[wide.result] = low
    for reader in readers:
        for index, operand in enumerate(reader.operands):
            if operand is result:
                rewriter.set_operand(reader, index, wide.result)
    for index in outputs:
        rewriter.graph.set_output(index, rounded.result)
    return True


@rewrite_pattern(*PROMOTED_OPS)
def number_in_fp32(node: Node, rewriter: Rewriter) -> bool:
    """op(x, cast(number, bf16)) with x a bf16 tensor of rank >= 1, the cast ExecuTorch's
    promotion made for this op => the op in fp32 on the number itself, rounded once to bf16."""
    result = node.results[0]
    if not isinstance(result.type, TensorType) or result.type.dtype is not DType.bf16 or result.type.rank == 0:
        return rewriter.notify_match_failure(node, "not a bf16 result of rank 1 or more")
    operands = list(node.operands)
    if len(operands) != 2 or not all(isinstance(v.type, TensorType) for v in operands):
        return rewriter.notify_match_failure(node, "not two tensor operands")
    numbers = [(i, n) for i, n in enumerate(_rounded_number(v, node) for v in operands) if n is not None]
    if len(numbers) != 1 or operands[1 - numbers[0][0]].type.dtype is not DType.bf16:
        return rewriter.notify_match_failure(node, "no Python number ExecuTorch rounded to bf16 for this op")
    at, number = numbers[0]
    if node.op not in OPMATH_NUMBER_OPS or (node.op == aten.div.Tensor and at != 1):
        return rewriter.notify_match_failure(
            node, "eager rounds this op's number to bf16 too (add, sub; a number divided)"
        )
    if number.data is None:
        return rewriter.notify_match_failure(node, "the number's value is not known")
    import torch  # (here: listing the passes must not import torch)

    if number.data.to(torch.bfloat16).float().equal(number.data.float()):
        return rewriter.notify_match_failure(node, "the number is a bf16 number: the cast rounded nothing")
    x = operands[1 - at]
    order = {"dim_order": list(range(x.type.rank))}
    wide_x = rewriter.insert_before(node, rewriter.create(CAST, [x], attributes={"dtype": DType.f32, **order})).result
    wide_operands = [number if i == at else wide_x for i in range(2)]
    wide = rewriter.insert_before(
        node, rewriter.create(node.op, wide_operands, [result.type.with_dtype(DType.f32)], dict(node.attributes))
    )
    narrow = rewriter.insert_before(
        node, rewriter.create(CAST, [wide.result], attributes={"dtype": DType.bf16, **order})
    )
    rewriter.replace_node(node, [narrow.result])
    return True


def _rounded_number(value: Value, reader: Node) -> Value | None:
    """The fp32 number constant ``value`` is the bf16 cast of, when ExecuTorch's promotion made the
    cast for ``reader`` (a Python number in a bf16 op); None otherwise."""
    cast = value.producer
    if cast is None or cast.op not in CASTS or not _scalar(value) or value.type.dtype is not DType.bf16:
        return None
    source = cast.operands[0]
    if not _number_constant(source):
        return None
    mine = _provenance(cast)
    if mine is None or mine != _provenance(reader):
        return None  # (a cast the user wrote, or one we cannot place)
    return source


@attrs.frozen
class EagerScalarPromotion(PatternRewritePass):
    """Give a 0-D bf16/fp16 tensor combined with a Python number eager's dtype (ExecuTorch's to_edge
    makes it fp32), rounding the op's result as eager does."""

    name = "xnnpack.eager-scalar-promotion"
    # it recognizes the casts ExecuTorch's promotion made, by their provenance: before any pass rewrites casts
    runs_before = ("fold-constants", "xnnpack.casts-as-converts")

    def patterns(self):
        return (RunStateRule(eager_scalar_promotion), number_in_fp32)  # (the first: on every op, see _one_operand_low)
