"""``xnnpack.avg-pool-padding-as-pad``: rewrite an average pool that counts its zero padding
(PyTorch's default ``count_include_pad=True``) as a zero pad and an unpadded pool. XNNPACK's
average pooling leaves padding out of the count, so both partitioners keep such a pool outside:
InceptionV3's pool branches (``avg_pool2d(x, 3, 1, 1)``), in float and statically quantized (the
pool of a quantized model reads a dequantize: its pad is followed by a quantize and a dequantize
with the same parameters, exact since the pad's zeros are the zero point and every other value is
already on that grid, so XNNPACK takes it as a quantized pad).

Every window of the padded input lies inside it (no ``ceil_mode``), so each output divides the
same sum by the same ``kernel`` area as PyTorch does."""

from __future__ import annotations

import attrs

from passes import Rewriter, rewrite_pattern
from xir import Node, TensorType
from xir.ops import aten, quantized_decomposed

from ._base import FLOATS, DelegatedDtypeRewrite


def _pair(value) -> list[int] | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return [value, value]
    if isinstance(value, (list, tuple)) and len(value) in (1, 2) and all(isinstance(v, int) for v in value):
        return list(value) * (2 // len(value))
    return None


@rewrite_pattern(aten.avg_pool2d)
def avg_pool_padding_as_pad(node: Node, rewriter: Rewriter) -> bool:
    """avg_pool2d(x) {kernel, stride, padding=[ph, pw], count_include_pad=True} =>
    avg_pool2d(constant_pad_nd(x) {pad=[pw, pw, ph, ph], value=0}) {kernel, stride, padding=[0, 0]}."""
    x = node.input.type
    if not isinstance(x, TensorType) or x.dtype not in FLOATS or x.rank != 4:
        return rewriter.notify_match_failure(node, "not a 4-D float tensor")
    padding = _pair(node.attributes.get("padding") or 0)
    if padding is None or padding == [0, 0]:
        return rewriter.notify_match_failure(node, "no padding")
    if not node.attributes.get("count_include_pad", True):
        return rewriter.notify_match_failure(node, "count_include_pad=False: XNNPACK's own padding")
    if node.attributes.get("ceil_mode", False):
        return rewriter.notify_match_failure(node, "ceil_mode=True (a window past the padding)")
    if node.attributes.get("divisor_override") is not None:
        return rewriter.notify_match_failure(node, "divisor_override")
    (ph, pw) = padding
    padded = rewriter.op_before(node, aten.constant_pad_nd, [node.input], pad=[pw, pw, ph, ph], value=0.0)
    dequantize = node.input.producer
    if dequantize is not None and dequantize.op == quantized_decomposed.dequantize_per_tensor:
        # the pad on the quantized grid (its zeros are the zero point), so that XNNPACK takes it as a
        # quantized pad: quantizing with the dequantize's own parameters gives back its integers
        qparams = {k: v for k, v in dequantize.attributes.items() if k != "out_dtype"}
        requantized = rewriter.op_before(node, quantized_decomposed.quantize_per_tensor, [padded], **qparams)
        padded = rewriter.op_before(
            node, quantized_decomposed.dequantize_per_tensor, [requantized], **dequantize.attributes
        )
    attributes = {**node.attributes, "padding": [0, 0]}
    pool = rewriter.create(aten.avg_pool2d, [padded], attributes=attributes, result_types=[node.result.type])
    rewriter.replace_node(node, [rewriter.insert_before(node, pool).result])
    return True


@attrs.frozen
class AvgPoolPaddingAsPad(DelegatedDtypeRewrite):
    """Rewrite an average pool that counts its zero padding as a zero pad and an unpadded pool.
    Without ``enable_bf16`` a bf16 pool stays outside XNNPACK, and rewritten it would be two
    portable ops for one (fuzz fp32 10666)."""

    name = "xnnpack.avg-pool-padding-as-pad"

    rules = (avg_pool_padding_as_pad,)
