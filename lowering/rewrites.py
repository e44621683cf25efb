"""Rewrites that only make sense for nodes XNNPACK will run: they create xir's own ops
(:mod:`lowering.xnnpack_ops`), which have no portable kernel, so they apply only where the
partitioner delegates the result. Their options mirror the partitioner's; the partitioner
sets them from its own settings."""

from __future__ import annotations

import attrs

from passes import Pass
from xir import DType, Graph, InputKind, TensorType

from . import xnnpack_ops  # noqa: F401  (registers the ops and their XNNPACK visitors)


@attrs.frozen
class Bf16BmmF32Output(Pass):
    """Rewrite bf16 bmm as XNNPACK computes it: bf16 x bf16 -> fp32, then a convert to bf16."""

    name = "bf16-bmm-f32-output"
    enable_bf16: bool = False

    def run(self, graph: Graph) -> bool:
        if not self.enable_bf16:
            return False  # bf16 stays outside XNNPACK: xir's ops would have no kernel there
        changed = False
        for node in graph:
            if node.op != "aten.bmm" or node.results[0].dtype is not DType.bf16:
                continue
            a, b = node.operands
            if a.dtype is not DType.bf16 or b.dtype is not DType.bf16:
                continue
            result = node.results[0]
            wide = graph.create_node("xir.bmm_f32out", [a, b], [TensorType(DType.f32, result.shape)])
            graph.insert_before(node, wide)
            narrow = graph.create_node("xir.convert", [wide.result], [result.type], {"dtype": DType.bf16})
            graph.insert_before(node, narrow)
            graph.replace_node(node, [narrow.result])
            changed = True
        return changed


# ops XNNPACK defines in fp32 but not in bf16
FP32_ONLY_OPS = ("aten.convolution", "aten.avg_pool2d", "aten.max_pool2d", "aten.max_pool2d_with_indices",
                 "aten.mean.dim", "aten._softmax", "aten.upsample_bilinear2d.vec")
_CONSTANT_CASTS = {DType.f32: "float"}


@attrs.frozen
class Bf16InFp32(Pass):
    """Run bf16 ops XNNPACK cannot define in bf16 (conv, pooling, mean, softmax, bilinear upsampling)
    in fp32 inside XNNPACK: convert in, compute in fp32 (constant weights converted once), convert out."""

    name = "bf16-in-fp32"
    enable_bf16: bool = False

    def run(self, graph: Graph) -> bool:
        if not self.enable_bf16:
            return False
        from .capability import Options, float_verdict

        options = Options(enable_bf16=True)
        changed = False
        for node in graph:
            if node.op not in FP32_ONLY_OPS or node.results[0].dtype is not DType.bf16:
                continue
            if any(r.uses for r in node.results[1:]):
                continue  # e.g. max pooling whose indices are used
            changed |= self._rewrite(graph, node, options, float_verdict)
        return changed

    def _rewrite(self, graph: Graph, node, options, float_verdict) -> bool:
        created, operands = [], []
        for value in node.operands:
            if not isinstance(value.type, TensorType) or value.dtype is not DType.bf16:
                operands.append(value)
            elif value.is_constant and value.data is not None:
                wide = graph.add_input(graph.unique_input_name(f"{value.name}_f32"), value.type.with_dtype(DType.f32),
                                       value.input_kind, value.data.float().contiguous())
                created.append(wide)
                operands.append(wide)
            else:
                convert = graph.create_node("xir.convert", [value], [value.type.with_dtype(DType.f32)], {"dtype": DType.f32})
                graph.insert_before(node, convert)
                created.append(convert)
                operands.append(convert.result)
        result_types = [r.type.with_dtype(DType.f32) if isinstance(r.type, TensorType) and r.dtype is DType.bf16 else r.type
                        for r in node.results]
        wide_node = graph.create_node(node.op, operands, result_types, dict(node.attributes))
        graph.insert_before(node, wide_node)
        created.append(wide_node)
        verdict = float_verdict(wide_node, options)
        if not verdict.supported:  # XNNPACK would not take the fp32 op either: undo
            for item in reversed(created):
                if hasattr(item, "op"):
                    graph.erase(item)
                else:
                    graph.remove_input(item)
            return False
        narrow = graph.create_node("xir.convert", [wide_node.results[0]], [node.results[0].type], {"dtype": DType.bf16})
        graph.insert_before(node, narrow)
        graph.replace_all_uses(node.results[0], narrow.result)
        graph.erase(node)
        return True


@attrs.frozen
class DecomposeGeluTanh(Pass):
    """fp32 GELU with approximate='tanh' as the multiplies, adds and tanh XNNPACK runs (XNNPACK's own
    GELU is the exact one): 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))."""

    name = "decompose-gelu-tanh"

    def run(self, graph: Graph) -> bool:
        import math

        import torch

        changed = False
        for node in graph:
            if node.op != "aten.gelu" or node.attributes.get("approximate") != "tanh":
                continue
            x = node.operands[0]
            if not isinstance(x.type, TensorType) or x.dtype is not DType.f32:
                continue  # bf16 eager computes it in fp32 and rounds once: keep it whole

            def constant(label, number):
                return graph.add_input(graph.unique_input_name(f"gelu_{label}"), TensorType(DType.f32, ()),
                                       InputKind.parameter, torch.tensor(number, dtype=torch.float32))

            def op(name, a, b):
                new = graph.create_node(name, [a, b], [x.type])
                graph.insert_before(node, new)
                return new.result

            cube = op("aten.mul.Tensor", op("aten.mul.Tensor", x, x), x)
            inner = op("aten.mul.Tensor", op("aten.add.Tensor", x, op("aten.mul.Tensor", cube, constant("k1", 0.044715))),
                       constant("k0", math.sqrt(2 / math.pi)))
            tanh = graph.create_node("aten.tanh", [inner], [x.type])
            graph.insert_before(node, tanh)
            result = op("aten.mul.Tensor", op("aten.mul.Tensor", x, op("aten.add.Tensor", tanh.result, constant("one", 1.0))),
                        constant("half", 0.5))
            graph.replace_node(node, [result])
            changed = True
        return changed


PARTITIONER_OPTION_PASSES = (Bf16BmmF32Output, Bf16InFp32)
