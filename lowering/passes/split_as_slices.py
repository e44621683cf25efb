"""``xnnpack.split-as-slices``: rewrite a split of a static dim as the slices of its used pieces."""

from __future__ import annotations

import attrs

from passes import Rewriter, rewrite_pattern
from xir import Node, TensorType
from xir.ops import aten

from ..rules import MAX_RANK
from ._base import DelegatedDtypeRewrite


@rewrite_pattern(aten.split_with_sizes_copy, aten.split_copy.Tensor)
def split_as_slices(node: Node, rewriter: Rewriter) -> bool:
    """split(x, sizes, dim) => one slice_copy per used piece (XNNPACK slices; it has no split in
    ExecuTorch's XNNPACK backend). Fused projections split this way: Phi-3's QKV and gate/up."""
    x = node.input  # (None when the node has no operand)
    if x is None or not isinstance(x.type, TensorType):
        return rewriter.notify_match_failure(node, "not a tensor")

    if x.rank > MAX_RANK:  # (decomposed, it would only be more ops outside)
        return rewriter.notify_match_failure(node, f"{x.rank}-D: it stays outside XNNPACK, whole")
    dim = node.attributes.get("dim", 0) % x.rank
    if not isinstance(x.shape[dim], int):  # (another dim may be: XNNPACK slices it whole at run time)
        return rewriter.notify_match_failure(node, "splits a symbolic dim")
    if node.op == aten.split_with_sizes_copy:
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
            piece = rewriter.create(
                aten.slice_copy.Tensor,
                [x],
                [result.type],
                attributes={"dim": dim, "start": start, "end": start + size, "step": 1},
            )
            pieces.append(rewriter.insert_before(node, piece).result)
        start += size
    rewriter.replace_node(node, pieces)
    return True


@attrs.frozen
class SplitAsSlices(DelegatedDtypeRewrite):
    """Rewrite a split of a static dim as the slices of its used pieces."""

    name = "xnnpack.split-as-slices"

    rules = (split_as_slices,)
