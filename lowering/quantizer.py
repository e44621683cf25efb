"""A thin layer over ExecuTorch's XNNPACKQuantizer that leaves 3-D convolutions in float.

XNNPACK has no 3-D convolution, so a quantized Conv3d would run as dequantize -> float conv ->
quantize outside XNNPACK at best. Left in float, the conv3d is rewritten by xir into 2-D
convolutions that XNNPACK runs (pass ``decompose-conv3d``), with no extra Q/DQ steps and no
quantization error.
"""

from __future__ import annotations

import torch

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
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer,
        get_symmetric_quantization_config,
    )

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
