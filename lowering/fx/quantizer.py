"""A thin layer over ExecuTorch's XNNPACKQuantizer that leaves 3-D convolutions in float.

XNNPACK has no 3-D convolution, so a quantized Conv3d would run as dequantize -> float conv ->
quantize outside XNNPACK at best. Left in float, the conv3d is rewritten by xir into 2-D
convolutions that XNNPACK runs (pass ``xnnpack.decompose-conv3d``), with no extra Q/DQ steps and no
quantization error.
"""

from __future__ import annotations

import torch
from executorch.backends.transforms.duplicate_dynamic_quant_chain import DuplicateDynamicQuantChainPass
from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import XNNPACKQuantizer, get_symmetric_quantization_config
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

ANNOTATION_KEY = "quantization_annotation"
CONV3D_TARGETS = ("conv3d",)


def _is_conv3d(node: torch.fx.Node) -> bool:
    if node.op != "call_function":
        return False
    name = getattr(node.target, "__name__", str(node.target))
    if any(t in name for t in CONV3D_TARGETS):
        return True
    if "convolution" in name and len(node.args) > 1 and isinstance(node.args[1], torch.fx.Node):
        weight = node.args[1].meta.get("val")
        return weight is not None and weight.dim() == 5
    return False


def make_quantizer(**config_options):
    """An XNNPACKQuantizer (global symmetric config from ``config_options``, e.g.
    ``is_per_channel=True``, ``is_dynamic=False``) that leaves 3-D convolutions in float."""

    class XirXnnpackQuantizer(XNNPACKQuantizer):
        def annotate(self, model: torch.fx.GraphModule) -> torch.fx.GraphModule:
            model = super().annotate(model)
            for node in model.graph.nodes:
                if _is_conv3d(node):
                    node.meta.pop(ANNOTATION_KEY, None)
                    for user in node.users:  # a fused activation annotated as part of the conv pattern
                        annotation = user.meta.get(ANNOTATION_KEY)
                        if annotation is not None and not annotation.input_qspec_map:
                            user.meta.pop(ANNOTATION_KEY, None)
            return model

    quantizer = XirXnnpackQuantizer()
    quantizer.set_global(get_symmetric_quantization_config(**config_options))
    return quantizer


def quantize_pt2e(module: torch.nn.Module, inputs: tuple, **config_options) -> torch.fx.GraphModule:
    """Quantize ``module`` with ExecuTorch's XNNPACKQuantizer the way ExecuTorch's XNNPACK tests do
    (their Tester's Quantize stage): capture (static shapes), prepare, calibrate on ``inputs``,
    convert, and duplicate a dynamic quantization chain shared by several ops (one per op, as
    XNNPACK takes them). ``config_options`` go to ``get_symmetric_quantization_config``
    (``is_per_channel``, ``is_dynamic``, ``weight_qmin``/``weight_qmax`` for int4 weights, ...).

    The result is the eager reference of the quantized program, and exports again with dynamic
    shapes (``torch.export.export(result, inputs, dynamic_shapes=..., strict=True)``): the capture
    adds no guard on the example's sizes."""

    quantizer = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(**config_options))
    captured = torch.export.export(module, inputs, strict=True).module(check_guards=False)
    prepared = prepare_pt2e(captured, quantizer)
    prepared(*inputs)
    converted = convert_pt2e(prepared)
    DuplicateDynamicQuantChainPass()(converted)
    return converted
