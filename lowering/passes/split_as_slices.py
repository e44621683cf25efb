"""``xnnpack.split-as-slices``: rewrite a split of a static dim as the slices of its used pieces.

A small split of several rows stays whole, on ExecuTorch's portable kernel: XNNPACK would run one
slice per piece, and each slice of more than one row is handed to the runtime's threads, whose
wake-up costs more than so small a copy. Measured in fresh processes on two threads
(``bench.example_zoo --fresh``, and the same timing of GPT-2): ExecuTorch's LSTM example, whose
gates split [3, 80] (240 elements) four ways at each of its 10 steps, ran 1.19x stock's latency with
its 40 slices inside its one delegate, 0.99x with the splits outside (cutting the delegate at each);
a 2-layer GPT-2 (width 32) whose QKV splits [1, 4, 96] or [1, 8, 96] (384, 768 elements) ran the
same either way (0.64x and 0.65x stock's), so those keep their slices and their one delegate. On
one thread the LSTM's two programs ran alike (1.01x and 1.02x). One row (a decode step's fused
projections) is one copy, and a symbolic tensor may be any size: both keep the slices.
"""

from __future__ import annotations

import math

import attrs

from passes import Rewriter, rewrite_pattern
from xir import Node, TensorType
from xir.ops import aten

from ..rules import MAX_RANK
from ._base import DelegatedDtypeRewrite

# a split of at most this many elements, in more than one row, stays whole (the module's docstring)
SMALL_SPLIT = 256


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
    static = all(isinstance(size, int) for size in x.shape)  # (a symbolic tensor may be any size)
    rows, elements = (math.prod(x.shape[:dim]), math.prod(x.shape)) if static else (0, 0)
    if rows > 1 and elements <= SMALL_SPLIT:
        return rewriter.notify_match_failure(
            node,
            f"a split of {elements} elements in {rows} rows: each of its slices would wake XNNPACK's "
            "threads for a smaller copy than that costs; ExecuTorch's split is one op",
        )
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
