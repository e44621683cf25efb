"""``xnnpack.fuse-sibling-linears``: linears that read the same activation (a decoder layer's q, k
and v projections) become one linear on their weights stacked, each result a slice of its output.

Inside an XNNPACK delegate every op costs setup on every call whatever its size (the delegate
reshapes and sets up each op per call; at one token a fully connected op is about half a
microsecond, ``scripts/delegate_op_cost.py``), and in a dynamically quantized program (8da4w,
8da8w) each linear also converts its activation to int8 per token. For q, k and v::

    q = linear(x, Wq)   k = linear(x, Wk)   v = linear(x, Wv)          (3 linears, 3 conversions)
    qkv = linear(x, [Wq; Wk; Wv]);  q, k, v = slices of qkv          (1 linear, 1 conversion)

Every element is the same number: an output column of a linear depends only on its own weight row
(and bias), and the rows are stacked unchanged (fp32, bf16 or f16 weights; torchao's int weights
with their per-group scales and zero points, and the activation's per-token quantization is the
one each member computed). When every reader of a result splits its last dim into heads of one size
(``view(q, [.., 8, 64])``), the pieces are slices along the heads of one view of the stacked output,
so that ``xnnpack.merge-head-chains`` finds q's and k's heads adjacent and needs no concatenation.

Only such groups are fused by default. With ``split_last_dim=true`` a group read otherwise (a gate
and an up projection) is fused too, its pieces slices of the stacked output's last dim: a linear
and a conversion fewer, two slices more, copies whose cost grows with the tokens. Measured on the
flow's programs (docs/benchmarks.md, "q, k and v as one linear"): a decode step gained a little
more, a prefill of 64 tokens lost 1-3%; so it is off.

Matched on two or more linears with one input (or torchao's per-token quantization of one value,
with the same attributes), constant 2-D weights of one kind (dtype; torchao's block size, range and
dtypes) and the same input width, biases all present (constants) or all absent, and results of one
type but the last dim.
"""

from __future__ import annotations

import itertools
from typing import Any

import attrs

from passes.common_subexpressions import _key
from passes.pass_base import Pass
from passes.rewriter import KeepsStats, Rewriter, RewriteStats
from xir import DType, Graph, Node, TensorType, Value
from xir.ops import aten, torchao

from ..ops import xir_ops
from ..rules import AFFINE_CHOOSE_QPARAMS, AFFINE_QUANTIZE
from .slices_as_xir_slices import slice_op

RULE = "fuse_sibling_linears"
_FLOATS = (DType.f32, DType.bf16, DType.f16)
# the linears it stacks: ATen's, and xir's fp32 linear on an f16 weight (the bf16 options'
# xnnpack.bf16-linear-as-f16 and xnnpack.bf16-activations-in-fp32 run before it)
_LINEARS = (str(aten.linear), str(xir_ops.linear_f16w))


@attrs.frozen
class FuseSiblingLinears(KeepsStats, Pass):
    """Run linears that read one activation as one linear on their stacked weights."""

    name = "xnnpack.fuse-sibling-linears"
    # a scale on q or k alone folds into that projection before they are stacked; the rotary rewrites
    # leave dead views of q
    runs_after = ("fold-scale-shift-into-linears", "dead-code-elimination")
    split_last_dim: bool = False
    enable_bf16: bool = True  # (set from the partitioner's: bf16 linears stay outside without it)

    def run(self, graph: Graph) -> bool:
        rewriter = Rewriter(graph)
        stats = RewriteStats()
        groups: dict[Any, list[Node]] = {}
        for node in graph:
            if node.op not in _LINEARS:
                continue
            key = self._key(node)
            if isinstance(key, str):
                if key:
                    stats.declined.setdefault(RULE, []).append(f"{node.result.describe()}: {key}")
                continue
            groups.setdefault(key, []).append(node)
        for members in groups.values():
            if len(members) < 2:
                continue
            why = _fuse(rewriter, members, self.split_last_dim)
            if why:
                stats.declined.setdefault(RULE, []).append(f"{', '.join(m.result.describe() for m in members)}: {why}")
            else:
                stats.fired[RULE] += 1
        self.keep_stats(stats)
        return stats.changed or rewriter.changed

    def _key(self, node: Node) -> Any:
        """What a sibling of ``node`` must share with it, or why it has none ("" when not worth saying)."""
        operands = list(node.operands)
        if len(operands) not in (2, 3) or len(node.results) != 1:
            return ""
        x, weight, bias = operands[0], operands[1], operands[2] if len(operands) == 3 else None
        out = node.result.type
        if not isinstance(out, TensorType) or not isinstance(x.type, TensorType) or out.rank < 2:
            return ""
        if out.dtype is DType.bf16 and not self.enable_bf16:
            return "bf16, and bf16 is not enabled: it stays outside XNNPACK"
        kind = _weight_kind(weight)
        if kind is None:
            return ""
        if bias is not None and not (bias.is_constant and bias.data is not None and bias.rank == 1):
            return "its bias is not a constant"
        return (
            str(node.op),
            _activation(x),
            kind,
            bias is not None and bias.dtype,
            out.dtype,
            out.rank,
            tuple(str(d) for d in out.shape[:-1]),
        )


def _weight_kind(weight: Value) -> Any:
    """A key for weights that stack (dtype and width; torchao's quantization attributes), or None."""
    if weight.is_constant:
        if weight.data is None or weight.rank != 2 or not weight.type.is_static or weight.dtype not in _FLOATS:
            return None
        return ("constant", weight.dtype, weight.type.shape[1])
    node = weight.producer
    if node is None or node.op != torchao.dequantize_affine or len(node.operands) != 3:
        return None
    data, scale, zero_point = node.operands
    if not all(
        v.is_constant and v.data is not None and v.rank == 2 and v.type.is_static for v in (data, scale, zero_point)
    ):
        return None
    if len(weight.users) != 1:
        return None  # (read by more than this linear: it stays as it is)
    return (
        "affine",
        _key(dict(node.attributes)),
        data.dtype,
        data.type.shape[1],
        scale.dtype,
        scale.type.shape[1],
        zero_point.dtype,
        zero_point.type.shape[1],
        weight.dtype,
    )


def _activation(x: Value) -> Any:
    """``x``, or for torchao's per-token quantization of a value (choose_qparams_affine ->
    quantize_affine -> dequantize_affine) what it quantizes and how: two such chains of one value
    with the same attributes compute the same numbers (a chain read by more than its linear is
    left in place when the linear goes)."""
    dq = x.producer
    if dq is None or dq.op != torchao.dequantize_affine or len(dq.operands) != 3:
        return ("value", id(x))
    q, scale, zero_point = dq.operands
    qnode, qparams = q.producer, scale.producer
    if (
        qnode is None
        or qparams is None
        or qnode.op != AFFINE_QUANTIZE
        or qparams.op != AFFINE_CHOOSE_QPARAMS
        or zero_point.producer is not qparams
        or len(qnode.operands) != 3
        or qnode.operands[1] is not scale
        or qnode.operands[2] is not zero_point
        or len(qparams.operands) != 1
        or qnode.operands[0] is not qparams.operands[0]
    ):
        return ("value", id(x))
    return (
        "per-token",
        id(qparams.operands[0]),
        _key(dict(qparams.attributes)),
        _key(dict(qnode.attributes)),
        _key(dict(dq.attributes)),
    )


def _heads(node: Node) -> tuple[int, ...] | None:
    """The dims every reader of ``node``'s result views its last dim as, heads first (``(8, 64)``,
    Llama's pairs ``(8, 32, 2)``), when every reader is such a view keeping the leading dims; else None."""
    result, inner = node.result, None
    if not result.users or any(u.is_return for u in result.users):
        return None
    lead = result.type.shape[:-1]
    for user in result.users:
        if user.op == aten.view_copy and user.result.is_unused():
            continue  # (dead: erased with the member)
        out = user.results[0].type if user.results else None
        if user.op != aten.view_copy or not isinstance(out, TensorType) or out.rank < result.rank + 1:
            return None
        if any(str(a) != str(b) for a, b in zip(out.shape[: len(lead)], lead)):
            return None
        dims = tuple(out.shape[len(lead) :])
        if not all(isinstance(d, int) for d in dims) or inner not in (None, dims):
            return None
        inner = dims
    return inner


def _common_layout(inners: list) -> tuple[int, ...] | None:
    """The per-head dims one view of the stacked output gives every member: each member's own, or
    the flat head (``(64,)``) of a member whose readers then view its slice as they viewed it."""
    if any(inner is None for inner in inners):
        return None
    rests = [inner[1:] for inner in inners]
    widths = {TensorType(DType.f32, rest).numel() for rest in rests}
    if len(widths) != 1:
        return None
    common = max(rests, key=len)
    flat = (widths.pop(),)
    return common if all(rest in (common, flat) for rest in rests) else None


def _fuse(rewriter: Rewriter, members: list[Node], split_last_dim: bool) -> str | None:
    """Replace ``members`` (in program order) by one linear and slices; or why not."""
    import torch

    widths = [m.result.type.shape[-1] for m in members]
    if not all(isinstance(w, int) for w in widths):
        return "a symbolic output width"
    first = members[0]
    x, weight = first.operands[0], first.operands[1]
    out = first.result.type
    symbolic = not out.is_static
    if symbolic and out.dtype not in (DType.f32, DType.bf16):
        return f"{out.dtype} with a symbolic dim: no slice of it runs at every size (xir.slice is f32 or bf16)"
    inners = [_heads(m) for m in members]
    rest = _common_layout(inners)
    if rest is None and not split_last_dim:
        return "their results are not all read as heads of one size (and split_last_dim is false)"
    if weight.is_constant:
        stacked = rewriter.add_constant(
            f"{weight.name or 'weight'}_stacked",
            TensorType(weight.dtype, (sum(widths), weight.type.shape[1])),
            torch.cat([m.operands[1].data for m in members]).contiguous(),
        )
    else:
        parts = [m.operands[1].producer.operands for m in members]
        constants = []
        for i, label in enumerate(("data", "scale", "zero_point")):
            values = [p[i] for p in parts]
            data = torch.cat([v.data for v in values]).contiguous()
            constants.append(
                rewriter.add_constant(
                    f"{values[0].name or label}_stacked", TensorType(values[0].dtype, tuple(data.shape)), data
                )
            )
        dq = rewriter.create(torchao.dequantize_affine, constants, attributes=dict(weight.producer.attributes))
        stacked = rewriter.insert_before(first, dq).result
    operands = [x, stacked]
    if len(first.operands) == 3:
        bias = first.operands[2]
        data = torch.cat([m.operands[2].data for m in members]).contiguous()
        operands.append(
            rewriter.add_constant(f"{bias.name or 'bias'}_stacked", TensorType(bias.dtype, tuple(data.shape)), data)
        )
    fused = rewriter.insert_before(
        first, rewriter.create(first.op, operands, [TensorType(out.dtype, (*out.shape[:-1], sum(widths)))])
    ).result
    if rest is not None:
        lead = len(out.shape) - 1  # (the heads' dim in the views)
        counts = [inner[0] for inner in inners]
        model = next(
            v
            for m, inner in zip(members, inners)
            if inner[1:] == rest
            for v in m.result.users
            if not v.result.is_unused()
        )
        size = list(model.attributes["size"])
        size[lead] = sum(counts)
        by_heads = rewriter.insert_before(
            first,
            rewriter.create(
                aten.view_copy,
                [fused],
                [TensorType(out.dtype, (*out.shape[:-1], sum(counts), *rest))],
                attributes={"size": size},
            ),
        ).result
        for member, count, start, inner in zip(members, counts, _starts(counts), inners):
            piece = _slice(rewriter, first, by_heads, lead, start, start + count)
            for view in list(member.result.users):
                if view.result.is_unused():
                    rewriter.erase(view)
                elif inner[1:] == rest:  # (the slice is the view)
                    rewriter.replace_all_uses(view.result, piece)
                    rewriter.erase(view)
                else:  # (the view reads the slice: the head flattened back)
                    rewriter.set_operand(view, 0, piece)
    else:
        for member, width, start in zip(members, widths, _starts(widths)):
            piece = _slice(rewriter, first, fused, out.rank - 1, start, start + width)
            rewriter.replace_all_uses(member.result, piece)
    for member in members:
        _erase_unused(rewriter, member)
    return None


def _slice(rewriter: Rewriter, anchor: Node, x: Value, dim: int, start: int, end: int) -> Value:
    # (bf16 reaches here only with enable_bf16: _key declines it without)
    op, attributes = slice_op(x.type, dim, start, end)
    return rewriter.op_before(anchor, op, [x], **attributes)


def _starts(widths: list[int]) -> list[int]:
    return [0, *itertools.accumulate(widths[:-1])]


_ERASABLE = frozenset({*_LINEARS, str(torchao.dequantize_affine), AFFINE_QUANTIZE, AFFINE_CHOOSE_QPARAMS})


def _erase_unused(rewriter: Rewriter, node: Node) -> None:
    """Erase ``node`` if nothing reads it, then the producers only it read: its weight's
    dequantization and its activation's quantization chain (torchao's quantize ops are opaque to
    xir: dead-code elimination would leave them)."""
    pending, erased = [node], set()
    while pending:
        current = pending.pop()
        if id(current) in erased or str(current.op) not in _ERASABLE or any(not r.is_unused() for r in current.results):
            continue
        producers = [v.producer for v in current.operands if v.producer is not None]
        rewriter.erase(current)
        erased.add(id(current))
        pending.extend(producers)
