"""``xnnpack.as-strided-as-view``: rewrite an ``as_strided_copy`` that reads its (contiguous) input
in order as a ``view_copy``. XNNPACK has no strided view; this one is only a reshape: the strides
of its dims larger than 1 are the contiguous strides of its size, it starts at offset 0, and it
reads every element of its input. Swin's pooled features reach its classifier through one
(``AdaptiveAvgPool1d`` exports as a mean and an ``as_strided`` of the same shape).

The input must be contiguous in the program (the FX metadata the importer linked): an
``as_strided`` of a channels-last tensor reads its memory in another order than a view does."""

from __future__ import annotations

import math

import attrs

from passes import Rewriter, rewrite_pattern
from xir import Node, TensorType
from xir.ops import aten

from ._base import DelegatedDtypeRewrite
from .fold_constants import _contiguous_in_program


def contiguous_strides(size: list[int]) -> list[int]:
    strides, step = [], 1
    for d in reversed(size):
        strides.append(step)
        step *= max(d, 1)
    return strides[::-1]


@rewrite_pattern(aten.as_strided_copy)
def as_strided_as_view(node: Node, rewriter: Rewriter) -> bool:
    """as_strided_copy(x) {size, stride, storage_offset=0}, in x's order and all of it => view_copy(x) {size}."""
    x, result = node.input.type, node.result.type
    if not isinstance(x, TensorType) or not isinstance(result, TensorType) or not x.is_static:
        return rewriter.notify_match_failure(node, "not a tensor of static shape")
    size, stride = list(node.attribute("size")), list(node.attribute("stride"))
    if node.attributes.get("storage_offset") not in (None, 0):
        return rewriter.notify_match_failure(node, "it starts at an offset")
    if math.prod(size) != x.numel():
        return rewriter.notify_match_failure(node, f"it reads {math.prod(size)} of its input's {x.numel()} elements")
    if any(d != 1 and s != c for d, s, c in zip(size, stride, contiguous_strides(size))):
        return rewriter.notify_match_failure(node, f"strides {stride} are not the contiguous ones of {size}")
    if not _contiguous_in_program(node.input):
        return rewriter.notify_match_failure(node, "its input is not known to be contiguous (it may be channels-last)")
    rewriter.replace_node(node, [rewriter.op_before(node, aten.view_copy, [node.input], size=size)])
    return True


@attrs.frozen
class AsStridedAsView(DelegatedDtypeRewrite):
    """Rewrite an as_strided_copy that only reshapes its contiguous input as a view_copy."""

    name = "xnnpack.as-strided-as-view"

    rules = (as_strided_as_view,)
