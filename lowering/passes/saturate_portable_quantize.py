"""xnnpack.saturate-portable-quantize: a quantize that can only run on ExecuTorch's kernel reads its
input clamped to the range it quantizes to.

ExecuTorch 1.5.1's ``quantized_decomposed::quantize_per_tensor.out`` (``kernels/quantized``)
converts ``x / scale`` to a 64-bit integer before it clamps to ``[quant_min, quant_max]``. For
``+inf``, and for any ``|x / scale|`` past 2**63, that conversion overflows (x86 gives the most
negative integer), so the value saturates to ``quant_min`` where eager PyTorch gives
``quant_max``. ``rsqrt`` of a mean that quantized to 0, ``1 / x``, ``exp`` can all make such a value:
an RMSNorm whose eps quantizes to 0 returned 0 where eager returned the largest value (fuzz static
seed 43039, error 1.42 of 1.42).

A ``hardtanh`` to ``[(quant_min - zero_point) * scale, (quant_max - zero_point) * scale]`` in
front of the quantize changes no finite value's quantized result (a value past a bound rounds to
that bound's integer either way) and gives infinities the integer eager gives. NaN stays NaN:
its integer is not defined by eager either (an x86 conversion artifact).

The rule applies only where the quantize cannot be delegated whatever the partition (its tensors
are past XNNPACK's rank limit): then the hardtanh runs outside too, and no delegate changes.
XNNPACK's own quantize saturates correctly. A quantize left outside for reasons of its
neighbours (its producer outside) is not guarded: the pass runs before the partition.
"""

from __future__ import annotations

import math

import attrs

from passes import PatternRewritePass, Rewriter, rewrite_pattern
from xir import DType, Node, TensorType
from xir.ops import aten, quantized_decomposed

from ..rules import DEQUANTIZE_OPS, MAX_RANK

_BOUNDED = (aten.sigmoid, aten.tanh)
_CLAMP_BOUNDS = {aten.hardtanh: ("min_val", "max_val"), aten.clamp: ("min", "max")}


def _bounded(node: Node | None) -> bool:
    """Whether ``node``'s result is finite-bounded whatever its input: a dequantize, sigmoid, tanh,
    or a clamp with two finite bounds (``clamp(x, min=0)`` is not)."""
    if node is None:
        return False
    if node.op in DEQUANTIZE_OPS or node.op in _BOUNDED:
        return True
    names = _CLAMP_BOUNDS.get(node.op)
    if names is None:
        return False
    bounds = [node.attributes.get(name) for name in names]
    return all(isinstance(b, (int, float)) and math.isfinite(b) for b in bounds)


@rewrite_pattern(quantized_decomposed.quantize_per_tensor)
def saturate_portable_quantize(node: Node, rewriter: Rewriter) -> bool:
    x = node.input
    if not (isinstance(x.type, TensorType) and x.type.dtype is DType.f32):
        return rewriter.notify_match_failure(node, "not a quantize of an f32 tensor")
    if x.rank <= MAX_RANK:
        return rewriter.notify_match_failure(node, f"{x.rank}-D: XNNPACK may run it, and saturates right")
    if _bounded(x.producer):
        return rewriter.notify_match_failure(node, f"its input is bounded ({x.producer.op})")
    scale = float(node.attribute("scale"))
    zero_point, qmin, qmax = (int(node.attribute(a)) for a in ("zero_point", "quant_min", "quant_max"))
    lo, hi = (qmin - zero_point) * scale, (qmax - zero_point) * scale
    bounded = rewriter.op_before(node, aten.hardtanh, [x], min_val=lo, max_val=hi)
    rewriter.set_operand(node, 0, bounded)
    return True


@attrs.frozen
class SaturatePortableQuantize(PatternRewritePass):
    """Clamp the input of a quantize that only ExecuTorch's kernel can run (see the module)."""

    name = "xnnpack.saturate-portable-quantize"

    rules = (saturate_portable_quantize,)
