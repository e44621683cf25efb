"""Which of ExecuTorch's XNNPACK preprocessing passes a delegate needs.

Before it serializes a delegate, ExecuTorch 1.5.1's XNNPACK backend (``xnnpack_preprocess.py``)
runs 17 passes over the delegate's graph: clone removal, dim-order reverts, upsample and SDPA
pattern rewrites, constant propagation, batch-norm fusion, activation fusion, concatenation
splitting, getitem removal, pad Q/DQ insertion, conv1d unsqueezing, PReLU reshapes, the
channels-last layout pass, redundant-copy removal, and the linear rebuild. Each re-traces the whole
graph with fake tensors, so on the one large delegate xir makes of a decoder or an encoder they are
a large part of the lowering's time (``python -m bench``'s lowering table).

The same function runs only the linear rebuild (``ConvertToLinearPass``) when the delegate's
compile specs carry the key ``dqlinear_partitioner`` (the runtime does not read compile specs).
xir gives a delegate that key only when every op in it is one the other sixteen passes leave as it
is, so the serialized delegate is the same, byte for byte, as with all of them
(``tests/lowering/test_backend_passes.py`` compares the two on decoders, encoders, quantized and
bf16 programs). A delegate is "light" when:

* every op in it is in :data:`LIGHT_OPS`: elementwise math, linears and matrix products, views,
  permutes, slices, concatenations of at most five tensors (XNNPACK's largest concatenation;
  ``DecomposeConcatenate`` splits longer ones), softmax, xir's own ops, and the quantize,
  dequantize and choose-qparams ops of dynamically quantized linears. Not in it, because a pass
  rewrites them: convolutions, pooling, ``mean.dim`` (global pooling, channels-last), upsampling
  and padding (the layout pass and Q/DQ insertion), ``relu`` and ``hardtanh`` (fused into the op
  before), batch norm, PReLU, clones and ``_to_copy`` (removed or merged), ``max_pool`` getitems;
* no node in it has ``meta["custom"]`` (external constant data: ``PropagateCustomMetaPass`` copies
  that tag onto Q/DQ nodes);
* every tensor it reads from outside (and every constant it owns) is in contiguous dim order. A
  delegate input in another dim order (``x.to(memory_format=torch.channels_last)`` left outside)
  is what the channels-last layout pass converts at the delegate's entry; without it XNNPACK reads
  the NHWC bytes as NCHW (ExecuTorch's ``test_to_copy``: a linear after an int16 -> fp32
  channels-last copy gave wrong numbers with the light path).

``XnnpackPartitioner(all_backend_passes=True)`` gives every delegate all the passes.
"""

from __future__ import annotations

from typing import Any, Iterable

from executorch.exir.backend.compile_spec_schema import CompileSpec
from executorch.exir.backend.partitioner import DelegationSpec

KEY = "dqlinear_partitioner"  # (ExecuTorch 1.5.1: preprocess then runs only ConvertToLinearPass)
MAX_CAT_INPUTS = 5

LIGHT_OPS = frozenset(
    """
    aten.abs.default aten.add.Tensor aten.sub.Tensor aten.mul.Tensor aten.div.Tensor aten.neg.default
    aten.rsqrt.default aten.sqrt.default aten.exp.default aten.log.default aten.sin.default aten.cos.default
    aten.tanh.default aten.sigmoid.default aten.gelu.default aten.ceil.default aten.floor.default
    aten.maximum.default aten.minimum.default aten.clamp.default aten.pow.Tensor_Scalar
    aten.hardswish.default aten.leaky_relu.default
    aten.linear.default aten.mm.default aten.bmm.default aten.addmm.default
    aten.view_copy.default aten.permute_copy.default aten.slice_copy.Tensor aten.cat.default
    aten.unsqueeze_copy.default aten.squeeze_copy.dims aten.squeeze_copy.dim aten._softmax.default
    xir.convert.default xir.slice.default xir.bmm_f32out.default xir.linear_f16w.default
    torchao.choose_qparams_affine.default torchao.quantize_affine.default torchao.dequantize_affine.default
    quantized_decomposed.choose_qparams_per_token_asymmetric.default
    quantized_decomposed.quantize_per_token.default quantized_decomposed.dequantize_per_token.default
    getitem
""".split()
)


def op_name(fx_node: Any) -> str:
    return getattr(fx_node.target, "__name__", str(fx_node.target))


def _not_contiguous(fx_node: Any) -> bool:
    """The tensor ``fx_node`` makes is laid out in a dim order other than the contiguous one."""
    val = fx_node.meta.get("val")
    dim_order = getattr(val, "dim_order", None)
    if dim_order is None or not callable(dim_order):
        return False
    try:
        return tuple(dim_order()) != tuple(range(val.dim()))
    except (RuntimeError, ValueError):  # (an ambiguous layout: the passes decide)
        return True


def why_all_passes(fx_nodes: Iterable[Any]) -> str | None:
    """Why a delegate of these FX nodes (its ops and the constants it owns) needs all of XNNPACK's
    preprocessing passes, or None when the linear rebuild is the only one that can change it."""
    fx_nodes = list(fx_nodes)
    members = set(fx_nodes)
    for fx_node in fx_nodes:
        if "custom" in fx_node.meta:
            return f"{fx_node.name} has meta['custom'] (external constant data)"
        if fx_node.op != "call_function":
            if _not_contiguous(fx_node):
                return f"{fx_node.name} is not in contiguous dim order"
            continue
        for arg in fx_node.all_input_nodes:
            if arg not in members and _not_contiguous(arg):
                return f"{fx_node.name} reads {arg.name}, which is not in contiguous dim order"
        name = op_name(fx_node)
        if name not in LIGHT_OPS:
            return f"{fx_node.name}: {name}"
        if name == "aten.cat.default" and len(fx_node.args[0]) > MAX_CAT_INPUTS:
            return f"{fx_node.name}: a concatenation of {len(fx_node.args[0])} tensors"
    return None


def delegation_specs(ep: Any, tags: Iterable[str], spec: Any, all_passes: bool = False) -> tuple[dict, dict]:
    """Each tag's DelegationSpec: ``spec``, or ``spec`` with the ``dqlinear_partitioner`` key where
    the delegate needs only the linear rebuild. Also returns why the others need all passes."""

    tags = list(tags)
    specs = {tag: spec for tag in tags}
    if all_passes:
        return specs, {tag: "all_backend_passes=True" for tag in tags}
    members: dict[str, list] = {tag: [] for tag in tags}
    for fx_node in ep.graph_module.graph.nodes:
        tag = fx_node.meta.get("delegation_tag")
        if tag in members:
            members[tag].append(fx_node)
    light = DelegationSpec(spec.backend_id, [*spec.compile_specs, CompileSpec(KEY, b"")])
    reasons = {}
    for tag in tags:
        reason = why_all_passes(members[tag])
        if reason is None:
            specs[tag] = light
        else:
            reasons[tag] = reason
    return specs, reasons
