"""``xnnpack.step-slice-as-view``: rewrite a slice with a step (``x[:, 1::2]``) as a view that
splits the sliced dim into (length, step), a slice of one position of the step dim, and a view
back. XNNPACK's slice has no stride, so both partitioners leave a stepped slice outside; Swin's
patch merging takes its four quarters this way, Cohere's rotary embedding its even and odd halves.

Taken when the (static) dim splits into whole blocks of ``step`` positions (then the slice picks
blocks and one position in each), or when ``length * step`` positions from ``start`` fit the dim
(then they are sliced first); otherwise the slice stays as it is."""

from __future__ import annotations

import attrs

from passes import Rewriter, rewrite_pattern
from passes.shape_ops_as_views import view_size, view_to
from xir import Node, TensorType
from xir.ops import aten

from ..rules import MAX_RANK
from ._base import FLOATS, DelegatedDtypeRewrite
from .slices_as_xir_slices import slice_op


@rewrite_pattern(aten.slice_copy.Tensor)
def step_slice_as_view(node: Node, rewriter: Rewriter) -> bool:
    """slice_copy(x) {dim, start, end, step>1} => view(slice(slice(view(x) to [.., size/step, step, ..])
    {dim, blocks}) {dim+1, start % step, +1}) to the result shape (or the positions sliced first)."""

    x, result = node.input.type, node.result.type
    step = node.attributes.get("step", 1)
    if not isinstance(step, int) or step <= 1:
        return rewriter.notify_match_failure(node, "no step")
    if not isinstance(x, TensorType) or not isinstance(result, TensorType) or x.dtype not in FLOATS:
        return rewriter.notify_match_failure(node, "not a float tensor (XNNPACK would not take it)")
    if not 1 <= x.rank < MAX_RANK:
        return rewriter.notify_match_failure(node, f"{x.rank}-D: split, the dim would make it {x.rank + 1}-D")
    dim = node.attribute("dim") % x.rank
    size, length = x.shape[dim], result.shape[dim]
    start = node.attributes.get("start")
    start = 0 if start is None else start
    if not isinstance(size, int) or not isinstance(length, int) or not isinstance(start, int):
        return rewriter.notify_match_failure(node, "a symbolic sliced dim or bound")
    start = min(max(start + size if start < 0 else start, 0), size)
    if length == 0 or (start + length * step > size and (size % step or start // step + length > size // step)):
        return rewriter.notify_match_failure(
            node, f"{length} positions of step {step} from {start} do not fit a whole block of the dim's {size}"
        )
    if view_size(x.shape) is None:
        return rewriter.notify_match_failure(node, "two or more symbolic dims (a view infers one)")
    blocks, offset = divmod(start, step)
    if size % step == 0 and blocks + length <= size // step:
        # the whole dim split into blocks of ``step``: blocks [blocks, blocks + length), position ``offset`` of each
        block, block_range = node.input, (blocks, blocks + length, size // step)
    else:
        # the positions from ``start`` on, a whole number of blocks: position 0 of each
        op, attributes = slice_op(x, dim, start, start + length * step)
        block, block_range, offset = rewriter.op_before(node, op, [node.input], **attributes), (0, length, length), 0
    split_shape = (*x.shape[:dim], block_range[2], step, *x.shape[dim + 1 :])
    split = view_to(rewriter, node, block, TensorType(x.dtype, split_shape))
    if block_range[:2] != (0, block_range[2]):
        op, attributes = slice_op(split.type, dim, *block_range[:2])
        split = rewriter.op_before(node, op, [split], **attributes)
    op, attributes = slice_op(split.type, dim + 1, offset, offset + 1)
    first = rewriter.op_before(node, op, [split], **attributes)
    rewriter.replace_node(node, [view_to(rewriter, node, first, result)])
    return True


@attrs.frozen
class StepSliceAsView(DelegatedDtypeRewrite):
    """Rewrite a stepped slice as a view that splits the dim, a slice of one position, and a view."""

    name = "xnnpack.step-slice-as-view"

    rules = (step_slice_as_view,)
