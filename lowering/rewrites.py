"""XNNPACK-specific rewrites (named ``xnnpack.*``). Two create xir's own ops
(:mod:`lowering.xnnpack_ops`), which have no portable kernel, so they apply only where the
partitioner delegates the result; their ``enable_bf16`` option mirrors the partitioner's, which
sets it from its own settings. Each is a pattern set on the rewriter: it matches completely
before its first edit and says why it declined a node.
"""

from __future__ import annotations

import math

import attrs

from passes import PatternRewritePass, Rewriter, rewrite_pattern
from passes.pass_base import RENAMED_PASSES
from xir import DType, Node, TensorType

from . import xnnpack_ops  # noqa: F401  (registers the ops and their XNNPACK visitors)


@rewrite_pattern("aten.bmm")
def bf16_bmm_f32_output(node: Node, rewriter: Rewriter) -> bool:
    """bf16 bmm => xir.bmm_f32out (bf16 x bf16 -> fp32) then xir.convert to bf16."""
    a, b = node.operands
    if node.result.dtype is not DType.bf16 or a.dtype is not DType.bf16 or b.dtype is not DType.bf16:
        return rewriter.notify_match_failure(node, "not a bf16 x bf16 -> bf16 bmm")
    wide = rewriter.insert_before(node, rewriter.create("xir.bmm_f32out", [a, b]))
    narrow = rewriter.insert_before(node, rewriter.create("xir.convert", [wide.result], attributes={"dtype": DType.bf16}))
    rewriter.replace_node(node, [narrow.result])
    return True


@attrs.frozen
class Bf16BmmF32Output(PatternRewritePass):
    """Rewrite bf16 bmm as XNNPACK computes it: bf16 x bf16 -> fp32, then a convert to bf16."""

    name = "xnnpack.bf16-bmm-f32-output"
    enable_bf16: bool = False

    def patterns(self):
        # without enable_bf16, bf16 stays outside XNNPACK: xir's ops would have no kernel there
        return [bf16_bmm_f32_output] if self.enable_bf16 else []


# ops XNNPACK defines in fp32 but not in bf16
FP32_ONLY_OPS = ("aten.convolution", "aten.avg_pool2d", "aten.max_pool2d", "aten.max_pool2d_with_indices",
                 "aten.mean.dim", "aten._softmax", "aten.upsample_bilinear2d.vec")


@rewrite_pattern(*FP32_ONLY_OPS)
def bf16_in_fp32(node: Node, rewriter: Rewriter) -> bool:
    """bf16 op XNNPACK defines only in fp32 => xir.convert in, the op in fp32, xir.convert out."""
    from .capability import Options, float_verdict

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
            operands.append(rewriter.add_constant(f"{value.name}_f32", value.type.with_dtype(DType.f32),
                                                  value.data.float().contiguous(), value.input_kind))
        else:
            convert = rewriter.create("xir.convert", [value], attributes={"dtype": DType.f32})
            operands.append(rewriter.insert_before(node, convert).result)
    result_types = [r.type.with_dtype(DType.f32) if isinstance(r.type, TensorType) and r.dtype is DType.bf16 else r.type
                    for r in node.results]
    wide = rewriter.insert_before(node, rewriter.create(node.op, operands, result_types, dict(node.attributes)))
    narrow = rewriter.insert_before(node, rewriter.create("xir.convert", [wide.results[0]], attributes={"dtype": DType.bf16}))
    rewriter.replace_node(node, [narrow.result] + [None] * (len(node.results) - 1))
    return True


@attrs.frozen
class Bf16InFp32(PatternRewritePass):
    """Run bf16 ops XNNPACK cannot define in bf16 (conv, pooling, mean, softmax, bilinear upsampling)
    in fp32 inside XNNPACK: convert in, compute in fp32 (constant weights converted once), convert out."""

    name = "xnnpack.bf16-in-fp32"
    enable_bf16: bool = False

    def patterns(self):
        return [bf16_in_fp32] if self.enable_bf16 else []


@rewrite_pattern("aten.gelu")
def decompose_gelu_tanh(node: Node, rewriter: Rewriter) -> bool:
    """fp32 gelu(approximate='tanh') => 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))."""
    import torch

    x = node.input
    if node.attribute("approximate") != "tanh":
        return rewriter.notify_match_failure(node, "exact GELU (XNNPACK runs it as it is)")
    if not isinstance(x.type, TensorType) or x.dtype is not DType.f32:
        return rewriter.notify_match_failure(node, "not f32: bf16 eager computes it in fp32 and rounds once")

    def constant(label, number):
        return rewriter.add_constant(f"gelu_{label}", TensorType(DType.f32, ()), torch.tensor(number, dtype=torch.float32))

    def op(name, *operands):
        return rewriter.insert_before(node, rewriter.create(name, list(operands))).result

    cube = op("aten.mul.Tensor", op("aten.mul.Tensor", x, x), x)
    inner = op("aten.mul.Tensor", op("aten.add.Tensor", x, op("aten.mul.Tensor", cube, constant("k1", 0.044715))),
               constant("k0", math.sqrt(2 / math.pi)))
    tanh = op("aten.tanh", inner)
    result = op("aten.mul.Tensor", op("aten.mul.Tensor", x, op("aten.add.Tensor", tanh, constant("one", 1.0))),
                constant("half", 0.5))
    rewriter.replace_node(node, [result])
    return True


@attrs.frozen
class DecomposeGeluTanh(PatternRewritePass):
    """fp32 GELU with approximate='tanh' as the multiplies, adds and tanh XNNPACK runs (XNNPACK's own
    GELU is the exact one)."""

    name = "xnnpack.decompose-gelu-tanh"

    def patterns(self):
        return [decompose_gelu_tanh]


PARTITIONER_OPTION_PASSES = (Bf16BmmF32Output, Bf16InFp32)
for _cls in (Bf16BmmF32Output, Bf16InFp32, DecomposeGeluTanh):
    RENAMED_PASSES[_cls.name.removeprefix("xnnpack.")] = _cls.name
