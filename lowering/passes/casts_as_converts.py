"""``xnnpack.casts-as-converts``: rewrite bf16 <-> f32 casts (rank 1-6, same layout) as xir.convert, which XNNPACK runs (with enable_bf16)."""

from __future__ import annotations

import attrs

from passes import Rewriter, rewrite_pattern
from passes.remove_no_ops import layout_change
from xir import DType, Node, TensorType
from xir.ops import family

from ..capability import Options, float_verdict
from ..ops import xir_ops
from ..rules import MAX_RANK
from ._base import Bf16Rewrite

CASTS = family("cast")


@rewrite_pattern(*CASTS)
def cast_as_convert(node: Node, rewriter: Rewriter) -> bool:
    """A bf16 <-> f32 cast that keeps the layout => xir.convert, which XNNPACK runs. Only where it
    will be delegated (rank 1 to 6, not empty): xir.convert has no portable kernel. A dynamic
    shape is fine: XNNPACK converts elementwise, at the size the tensor has at run time."""

    x, result = node.input.type, node.result.type
    if (
        not isinstance(x, TensorType)
        or not isinstance(result, TensorType)
        or {x.dtype, result.dtype} != {DType.f32, DType.bf16}
    ):
        return rewriter.notify_match_failure(node, "not a cast between f32 and bf16")
    if not 1 <= x.rank <= MAX_RANK or 0 in x.shape:
        return rewriter.notify_match_failure(node, f"{x.rank}-D or empty: it would stay outside XNNPACK")
    change = layout_change(node)
    if change:
        return rewriter.notify_match_failure(node, change)
    if result.dtype is DType.f32:
        # measured: an f32 result of a bf16 -> f32 convert that leaves the delegate (returned, or read
        # by an op left outside) corrupts another output of the delegate. Convert only what XNNPACK
        # reads on: every reader is an op it takes.
        options = Options(enable_bf16=True)
        readers = node.result.users
        if any(user.is_return or not float_verdict(user, options).supported for user in readers):
            return rewriter.notify_match_failure(
                node, "an upcast whose result is returned or read by an op XNNPACK does not take"
            )
    rewriter.replace_node(node, [rewriter.op_before(node, xir_ops.convert, [node.input], dtype=result.dtype)])
    return True


@attrs.frozen
class CastsAsConverts(Bf16Rewrite):
    """Rewrite bf16 <-> f32 casts (rank 1-6, same layout) as xir.convert, which XNNPACK runs (with enable_bf16)."""

    name = "xnnpack.casts-as-converts"
    rules = (cast_as_convert,)
