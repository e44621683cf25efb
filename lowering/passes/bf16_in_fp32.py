"""``xnnpack.bf16-in-fp32``: run bf16 ops XNNPACK cannot define in bf16 (conv, pooling, mean, softmax, bilinear upsampling)"""

from __future__ import annotations

import attrs

from passes import Rewriter, rewrite_pattern
from xir import DType, Node, TensorType
from xir.ops import aten

from ..capability import Options, float_verdict
from ..ops import xir_ops
from ._base import Bf16Rewrite

# ops XNNPACK defines in fp32 but not in bf16
FP32_ONLY_OPS = (
    aten.convolution,
    aten.avg_pool2d,
    aten.max_pool2d,
    aten.max_pool2d_with_indices,
    aten.mean.dim,
    aten._softmax,
    aten.upsample_bilinear2d.vec,
)


@rewrite_pattern(*FP32_ONLY_OPS)
def bf16_in_fp32(node: Node, rewriter: Rewriter) -> bool:
    """bf16 op XNNPACK defines only in fp32 => xir.convert in, the op in fp32, xir.convert out."""
    return compute_in_fp32(node, rewriter)


def compute_in_fp32(node: Node, rewriter: Rewriter) -> bool:
    """The bf16 op ``node`` as XNNPACK runs it in fp32: its bf16 operands converted to fp32 (a bf16
    constant becomes an fp32 constant equal to it), the op in fp32, its first result converted back
    to bf16 (the rounding eager bf16 makes). Declined when the op has a second result that is used,
    or when XNNPACK would not take the op in fp32 either."""

    if node.results[0].dtype is not DType.bf16:
        return rewriter.notify_match_failure(node, "not bf16")
    if not all(r.is_unused() for r in node.results[1:]):
        return rewriter.notify_match_failure(node, "a second result (e.g. max pooling's indices) is used")
    verdict = float_verdict(node, Options(enable_bf16=True), as_fp32=True)
    if not verdict.supported:
        return rewriter.notify_match_failure(node, f"XNNPACK would not take it in fp32 either: {verdict.reason}")
    operands = []
    for value in node.operands:
        if not isinstance(value.type, TensorType) or value.dtype is not DType.bf16:
            operands.append(value)
        elif value.is_constant and value.data is not None:
            operands.append(
                rewriter.add_constant(
                    f"{value.name}_f32",
                    value.type.with_dtype(DType.f32),
                    value.data.float().contiguous(),
                    value.input_kind,
                )
            )
        else:
            convert = rewriter.create(xir_ops.convert, [value], attributes={"dtype": DType.f32})
            operands.append(rewriter.insert_before(node, convert).result)
    result_types = [
        r.type.with_dtype(DType.f32) if isinstance(r.type, TensorType) and r.dtype is DType.bf16 else r.type
        for r in node.results
    ]
    wide = rewriter.insert_before(node, rewriter.create(node.op, operands, result_types, dict(node.attributes)))
    narrow = rewriter.insert_before(
        node, rewriter.create(xir_ops.convert, [wide.results[0]], attributes={"dtype": DType.bf16})
    )
    rewriter.replace_node(node, [narrow.result] + [None] * (len(node.results) - 1))
    return True


@attrs.frozen
class Bf16InFp32(Bf16Rewrite):
    """Run bf16 ops XNNPACK cannot define in bf16 (conv, pooling, mean, softmax, bilinear upsampling)
    in fp32 inside XNNPACK: convert in, compute in fp32 (constant weights converted once), convert out."""

    name = "xnnpack.bf16-in-fp32"
    rules = (bf16_in_fp32,)
