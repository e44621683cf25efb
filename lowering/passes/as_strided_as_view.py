"""``xnnpack.as-strided-as-view``: rewrite an ``as_strided_copy`` that reads its (contiguous) input
in order as a ``view_copy``. XNNPACK has no strided view; this one is only a reshape: the strides
of its dims larger than 1 are the contiguous strides of its size, it starts at offset 0, and it
reads every element of its input. Swin's pooled features reach its classifier through one
(``AdaptiveAvgPool1d`` exports as a mean and an ``as_strided`` of the same shape).

The input must be contiguous in the program (the FX metadata the importer linked): an
``as_strided`` of a channels-last tensor reads its memory in another order than a view does."""

from __future__ import annotations

import attrs

from passes import Rewriter, rewrite_pattern
from passes.shape_ops_as_views import view_size, view_to
from xir import Node, TensorType
from xir.ops import aten

from ._base import DelegatedDtypeRewrite
from .fold_constants import _contiguous_in_program


def reads_in_order(shape: tuple, stride: list) -> bool:
    """Whether ``stride`` is the contiguous layout of ``shape`` on every dim larger than 1 (the
    stride of a dim of size 1 is never used). A stride that would depend on a symbolic dim after
    it is not known: False."""
    step = 1
    for d, s in zip(reversed(shape), reversed(stride)):
        if d != 1 and s != step:
            return False
        if not isinstance(d, int):
            step = None  # (a later dim's contiguous stride is symbolic: only size-1 dims may follow)
            continue
        step = None if step is None else step * d
    return True


@rewrite_pattern(aten.as_strided_copy)
def as_strided_as_view(node: Node, rewriter: Rewriter) -> bool:
    """as_strided_copy(x) {size, stride, storage_offset=0}, in x's order and all of it => view_copy(x) to its shape."""
    x, result = node.input.type, node.result.type
    if not isinstance(x, TensorType) or not isinstance(result, TensorType):
        return rewriter.notify_match_failure(node, "not a tensor")
    stride = node.attribute("stride")
    if node.attributes.get("storage_offset") not in (None, 0):
        return rewriter.notify_match_failure(node, "it starts at an offset")
    if not all(isinstance(s, int) for s in stride):
        return rewriter.notify_match_failure(node, "a stride computed at run time")
    if tuple(result.shape) != tuple(x.shape) and not (x.is_static and result.is_static and result.numel() == x.numel()):
        return rewriter.notify_match_failure(node, f"it does not read every element of its input ({x} as {result})")
    if not reads_in_order(result.shape, stride):
        return rewriter.notify_match_failure(
            node, f"strides {stride} are not the contiguous ones of {list(result.shape)}"
        )
    if not _contiguous_in_program(node.input):
        return rewriter.notify_match_failure(node, "its input is not known to be contiguous (it may be channels-last)")
    if view_size(result.shape) is None:
        return rewriter.notify_match_failure(node, "two or more symbolic dims (a view infers one)")
    rewriter.replace_node(node, [view_to(rewriter, node, node.input, result)])
    return True


@attrs.frozen
class AsStridedAsView(DelegatedDtypeRewrite):
    """Rewrite an as_strided_copy that only reshapes its contiguous input as a view_copy."""

    name = "xnnpack.as-strided-as-view"

    rules = (as_strided_as_view,)
