"""``xnnpack.mean-over-last-dims``: rewrite a mean over a tensor's trailing dims as ops XNNPACK runs: an fp32 mean as a matrix product with a constant ``1/cols`` column, others as a 4-D spatial mean between two views."""

from __future__ import annotations

import attrs

from passes import Rewriter
from passes.shape_ops_as_views import symbolic_product, view_size
from xir import DType, Node, TensorType
from xir.ops import aten, family

from ..rules import MAX_RANK, QUANTIZE_OPS, dequantized_source
from ._base import DelegatedDtypeRewrite, RunStateRule, _float_constant

RESHAPES = family("reshape")
MAX_MATMUL_COLS = 16384  # (XNNPACK packs a [cols, 1] weight into a full column tile: 16 x cols floats)


def mean_over_last_dims(
    node: Node, rewriter: Rewriter, made: dict | None = None, matmul: bool = True, linear: bool = True
) -> bool:
    """A mean over the trailing dims of x (RMSNorm's and a decomposed layer norm's ``mean(-1,
    keepdim=True)``), as XNNPACK can run it:

    - fp32 (at most ``MAX_MATMUL_COLS`` reduced elements): view (rows, cols), ``mm`` with ``w``, a
      ``[cols, 1]`` constant of ``1/cols`` (one per width and run), view back. XNNPACK defines a
      mean only as a spatial mean of a channels-last 4-D tensor, so the form below costs a
      transpose of the whole input each way (seven ops, against three). Where the program already
      keeps ``aten.linear`` (ExecuTorch then verifies a linear outside a delegate too) and one
      trailing dim is reduced, it is ``linear(x, w.T)`` instead, which XNNPACK's fully connected
      takes at any rank: one op, no views (with ``keepdim``). Otherwise an ``mm``: a linear left
      outside a delegate of a program without linears is not an edge op ExecuTorch verifies. Not
      for a mean between a dequantize and a quantize (the quantized mean XNNPACK folds them into).
    - otherwise: view (1, rows, 1, cols), mean over (2, 3) keepdim, view back.

    With a dynamic shape the reduced dims must be static; a symbolic dim among the others makes
    ``rows`` symbolic, written -1 in the views (a result with two declines: a view infers one)."""
    x = node.input
    if not isinstance(x.type, TensorType) or x.rank < 1:
        return rewriter.notify_match_failure(node, "not a tensor")
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
            if not isinstance(d, int) or not isinstance(cols, int):
                return rewriter.notify_match_failure(node, "a reduced dim is symbolic")
            cols *= d
        else:
            rows = rows * d if isinstance(d, int) and isinstance(rows, int) else None  # (None: symbolic)
    result = node.result.type
    back = view_size(result.shape)
    if back is None:
        return rewriter.notify_match_failure(node, "two or more symbolic dims in the result (a view infers one)")
    if rows is None and cols == 0:
        return rewriter.notify_match_failure(node, "symbolic rows of an empty reduction (-1 would be ambiguous)")
    rows_dim = rows if rows is not None else symbolic_product(x.shape[: x.rank - len(dims)])
    if matmul and x.dtype is DType.f32 and 0 < cols <= MAX_MATMUL_COLS and not _quantized(node):
        return _as_matmul(node, rewriter, {} if made is None else made, rows_dim, cols, back, linear)
    square_type = TensorType(x.dtype, (1, rows_dim, 1, cols))
    square = rewriter.insert_before(
        node,
        rewriter.create(
            aten.view_copy, [_before_views(x)], [square_type], {"size": [1, -1 if rows is None else rows, 1, cols]}
        ),
    ).result
    mean_type = TensorType(x.dtype, (1, square_type.shape[1], 1, 1))
    mean = rewriter.insert_before(
        node, rewriter.create(aten.mean.dim, [square], [mean_type], {"dim": [2, 3], "keepdim": True})
    ).result
    view = rewriter.create(aten.view_copy, [mean], [result], {"size": back})
    rewriter.replace_node(node, [rewriter.insert_before(node, view).result])
    return True


def spatial_mean_over_last_dims(node: Node, rewriter: Rewriter, made: dict | None = None) -> bool:
    """A mean over the trailing dims as a 4-D spatial mean between two views, in fp32 too (the
    pass with ``matmul=false``)."""
    return mean_over_last_dims(node, rewriter, made, matmul=False)


def mm_mean_over_last_dims(node: Node, rewriter: Rewriter, made: dict | None = None) -> bool:
    """An fp32 mean over the trailing dims as view, ``mm``, view, also where a ``linear`` would
    do (the pass with ``linear=false``)."""
    return mean_over_last_dims(node, rewriter, made, linear=False)


def _before_views(x):
    """What the view made of ``x`` reads: ``x``, or the operand of the chain of views that made
    ``x`` (a view needs only the elements in order). The intermediate views may be past XNNPACK's
    rank (a 7-D view of a pooling's result, fuzz static 2922), and are left to other readers or
    dead-code elimination."""
    while x.producer is not None and x.producer.op in RESHAPES:
        x = x.producer.input
    return x


def _quantized(node: Node) -> bool:
    """A mean of a dequantized tensor, or one a quantize reads (a quantized mean)."""
    return dequantized_source(node.input) is not None or any(use.op in QUANTIZE_OPS for use in node.result.users)


def _keeps_linear(rewriter: Rewriter, made: dict) -> bool:
    """Whether the program has an ``aten.linear`` (looked up once per run)."""
    if "keeps linear" not in made:
        made["keeps linear"] = any(node.op == aten.linear for node in rewriter.graph)
    return made["keeps linear"]


def _as_matmul(
    node: Node, rewriter: Rewriter, made: dict, rows, cols: int, back: list[int], linear: bool = True
) -> bool:
    """view (rows, cols) -> mm with the (cols, 1) column of 1/cols -> view to the result (``rows``
    an int, or a symbol written -1; ``back``: the result's view size); or, over one trailing dim
    of a program that keeps linears (and ``linear``), ``linear`` with the (1, cols) row of 1/cols
    and a view only without keepdim."""
    x, result = node.input, node.result.type
    if linear and 2 <= x.rank <= MAX_RANK and x.type.shape[-1] == cols and _keeps_linear(rewriter, made):
        key = ("row", cols)
        if key not in made:
            made[key] = _float_constant(
                rewriter, f"mean_row_{cols}", TensorType(DType.f32, (1, cols)), 1.0 / cols, (1, cols)
            )
        mean = rewriter.op_before(node, aten.linear, [x, made[key]])
        if mean.type.shape != result.shape:
            mean = rewriter.insert_before(
                node, rewriter.create(aten.view_copy, [mean], [result], {"size": back})
            ).result
        rewriter.replace_node(node, [mean])
        return True
    if x.type.shape != (rows, cols):
        x = rewriter.insert_before(
            node,
            rewriter.create(
                aten.view_copy,
                [_before_views(x)],
                [TensorType(DType.f32, (rows, cols))],
                {"size": [rows if isinstance(rows, int) else -1, cols]},
            ),
        ).result
    if cols not in made:
        made[cols] = _float_constant(
            rewriter, f"mean_weight_{cols}", TensorType(DType.f32, (cols, 1)), 1.0 / cols, (cols, 1)
        )
    mean = rewriter.op_before(node, aten.mm, [x, made[cols]])
    if mean.type.shape != result.shape:
        mean = rewriter.insert_before(node, rewriter.create(aten.view_copy, [mean], [result], {"size": back})).result
    rewriter.replace_node(node, [mean])
    return True


@attrs.frozen
class MeanOverLastDims(DelegatedDtypeRewrite):
    """Rewrite a mean over a tensor's trailing dims as ops XNNPACK runs (fp32: a matrix product with a constant 1/cols column, a linear where the program keeps linears; else a 4-D spatial mean between two views).

    ``matmul=false``: every mean as the spatial mean (the form before the matrix product, to
    compare: ``scripts/mean_as_matmul.py``). ``linear=false``: the matrix product always as view,
    ``mm``, view (the form before the linear)."""

    name = "xnnpack.mean-over-last-dims"
    # the linear it makes of RMSNorm's mean takes the eps after it into its bias
    runs_before = ("fold-scale-shift-into-linears",)
    matmul: bool = True
    linear: bool = True

    rules = (RunStateRule(mean_over_last_dims, aten.mean.dim),)

    def patterns(self):
        if not self.matmul:
            rule = spatial_mean_over_last_dims
        else:
            rule = mean_over_last_dims if self.linear else mm_mean_over_last_dims
        return self.gated((RunStateRule(rule, aten.mean.dim),))
