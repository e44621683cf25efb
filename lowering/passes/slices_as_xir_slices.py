"""``xnnpack.slices-as-xir-slices``: rewrite a ``slice_copy`` of a tensor with a symbolic dim as
``xir.slice``, whose XNNPACK slice takes the symbolic dims whole at the size they have at run time.

ExecuTorch's XNNPACK serializer writes a slice's sizes from the output shape, the upper bound of a
symbolic dim, so stock's slice fails at any other size and both partitioners leave it outside.
ExecuTorch's LLM flow exports with a symbolic sequence length: the rotary embedding's halves and
the fused projections' pieces are such slices. ``xir.slice`` is written as XNNPACK's static slice
with size 0 ("the whole dim", which XNNPACK infers at run time from an offset of 0) for every dim
but the sliced one (``lowering/fx/xnnpack_ops.py``). The sliced dim's offset and size must be known:
a static dim, or a static length from a non-negative start (the first token). xir.slice has no
kernel outside XNNPACK: it is made only where XNNPACK takes it."""

from __future__ import annotations

import attrs

from passes import Rewriter, rewrite_pattern
from xir import DType, Node, TensorType
from xir.ops import aten

from ..ops import xir_ops
from ..rules import MAX_RANK, slice_bounds
from ._base import DelegatedDtypeRewrite

FLOATS = (DType.f32, DType.bf16)


@rewrite_pattern(aten.slice_copy.Tensor)
def slice_as_xir_slice(node: Node, rewriter: Rewriter) -> bool:
    """slice_copy(x) {dim, start, end, step=1} of a symbolic x => xir.slice(x) {dim, start, end} in range."""

    x, result = node.input.type, node.result.type
    if not isinstance(x, TensorType) or not isinstance(result, TensorType) or x.is_static:
        return rewriter.notify_match_failure(
            node, "not a tensor with a symbolic dim (stock's slice takes static shapes)"
        )
    if x.dtype not in FLOATS or not 1 <= x.rank <= MAX_RANK:
        return rewriter.notify_match_failure(node, f"{x.dtype} {x.rank}-D: XNNPACK would not take it")
    if node.attributes.get("step", 1) != 1:
        return rewriter.notify_match_failure(node, "a step other than 1")
    bounds = slice_bounds(node)
    if bounds is None:
        return rewriter.notify_match_failure(node, "its offset or length along the sliced dim is computed at run time")
    if any(d == 0 for d in result.shape):
        return rewriter.notify_match_failure(node, "empty")
    dim, start, end = bounds
    rewriter.replace_node(node, [rewriter.op_before(node, xir_ops.slice, [node.input], dim=dim, start=start, end=end)])
    return True


def slice_op(x: TensorType, dim: int, start: int, end: int, *, enable_bf16: bool = True) -> tuple:
    """The op and attributes of ``x[start:end]`` along ``dim`` that a pass makes (in range, step 1):
    ``xir.slice`` where this pass would make one (``x`` has a symbolic dim, and XNNPACK takes its
    dtype, f32 or bf16 with ``enable_bf16``, and rank; stock's serializer writes a slice_copy's symbolic
    dims at their upper bound), else ``slice_copy``. Both are written back at a symbolic size (the
    write-back computes a slice_copy's shape from the view it copies); xir.slice has no kernel outside
    XNNPACK, which is why a bf16 slice without ``enable_bf16`` stays a slice_copy, and why a pass that
    calls this is among the partitioner's ``XNNPACK_FLOAT_OP_PASSES`` (left out of its pipeline when
    fp32 is not among its precisions, where the float ops stay outside)."""

    delegated = (x.dtype is DType.f32 or (x.dtype is DType.bf16 and enable_bf16)) and 1 <= x.rank <= MAX_RANK
    if not x.is_static and delegated:
        return xir_ops.slice, {"dim": dim, "start": start, "end": end}
    return aten.slice_copy.Tensor, {"dim": dim, "start": start, "end": end, "step": 1}


@attrs.frozen
class SlicesAsXirSlices(DelegatedDtypeRewrite):
    """Rewrite a slice of a tensor with a symbolic dim as xir.slice, which XNNPACK runs at every size."""

    name = "xnnpack.slices-as-xir-slices"

    rules = (slice_as_xir_slice,)
