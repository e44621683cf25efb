"""``xnnpack.index-select-as-slices``: rewrite ``index_select`` by a constant index made of a few
runs of consecutive positions as slices of those runs and a concatenation. XNNPACK has slices and
concatenation, and no gather in ExecuTorch's XNNPACK backend.

``torch.roll`` exports as ``index_select(x, d, fmod(arange(n) + n - k, n))``: once fold-constants
has folded the index, it is two runs (``x[n-k:]`` then ``x[:n-k]``), as in Swin's shifted
windows. An index of more than :data:`MAX_RUNS` runs stays a gather (outside XNNPACK): the slices
would cost more than they save."""

from __future__ import annotations

import attrs

from passes import Rewriter, rewrite_pattern
from xir import Node, TensorType
from xir.ops import aten

from ..rules import MAX_RANK
from ._base import FLOATS, DelegatedDtypeRewrite
from .slices_as_xir_slices import slice_op

MAX_RUNS = 4


def index_runs(positions: list[int]) -> list[tuple[int, int]]:
    """``positions`` as maximal runs of consecutive positions, each ``(start, end)``."""
    runs: list[tuple[int, int]] = []
    for position in positions:
        if runs and runs[-1][1] == position:
            runs[-1] = (runs[-1][0], position + 1)
        else:
            runs.append((position, position + 1))
    return runs


@rewrite_pattern(aten.index_select)
def index_select_as_slices(node: Node, rewriter: Rewriter) -> bool:
    """index_select(x, index) {dim}, index a constant of runs r1..rk => cat(slice(x, r1), ..., slice(x, rk)) {dim}
    (a single run: the slice alone)."""

    x, index, result = node.input.type, node.operand("index"), node.result.type
    if not isinstance(x, TensorType) or not isinstance(result, TensorType) or x.dtype not in FLOATS:
        return rewriter.notify_match_failure(node, "not a float tensor (XNNPACK would not take it)")
    if not 1 <= x.rank <= MAX_RANK:
        return rewriter.notify_match_failure(node, f"{x.rank}-D: the slices would stay outside XNNPACK")
    if not index.is_constant or index.data is None or index.rank > 1 or index.data.is_floating_point():
        return rewriter.notify_match_failure(node, "its index is not a constant integer vector (computed at run time)")
    dim = node.attribute("dim") % x.rank
    size = x.shape[dim]
    if not isinstance(size, int):
        return rewriter.notify_match_failure(node, "it gathers along a symbolic dim")
    positions = [int(i) for i in index.data.reshape(-1).tolist()]
    if not positions or any(not 0 <= i < size for i in positions):
        return rewriter.notify_match_failure(node, f"an empty index, or one out of range of the dim's {size}")
    runs = index_runs(positions)
    if len(runs) > MAX_RUNS:
        return rewriter.notify_match_failure(node, f"{len(runs)} runs of consecutive positions, more than {MAX_RUNS}")
    pieces = []
    for start, end in runs:
        op, attributes = slice_op(x, dim, start, end)
        pieces.append(rewriter.op_before(node, op, [node.input], **attributes))
    if len(pieces) == 1:
        rewriter.replace_node(node, pieces)
    else:
        rewriter.replace_node(node, [rewriter.op_before(node, aten.cat, pieces, dim=dim)])
    return True


@attrs.frozen
class IndexSelectAsSlices(DelegatedDtypeRewrite):
    """Rewrite index_select by a constant index of a few runs (torch.roll's) as slices and a cat."""

    name = "xnnpack.index-select-as-slices"
    # the index is a constant (torch.roll's arange arithmetic) once fold-constants has folded it
    runs_after = ("fold-constants",)

    rules = (index_select_as_slices,)
