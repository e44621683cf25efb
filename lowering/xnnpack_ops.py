"""xir's two ops for XNNPACK, and how the stock XNNPACK serializer writes them.

XNNPACK multiplies bf16 matrices only into an fp32 result, and ExecuTorch 1.5.1's edge dialect
has no op for that (its verifier rejects a bf16 x bf16 -> fp32 ``aten.bmm``), nor a conversion
the XNNPACK serializer keeps inside a delegate (its own passes drop dtype-changing copies). So
xir defines:

* ``xir::bmm_f32out(a, b)``: batched matmul of bf16 (or f32) matrices with an fp32 result,
  written as XNNPACK's batch-matrix-multiply node;
* ``xir::convert(x, dtype)``: a dtype conversion, written as XNNPACK's convert node.

Both register node visitors in ExecuTorch's XNNPACK visitor registry (no ExecuTorch code is
patched). They have no portable kernel: xir only creates them where they will be delegated.
Importing this module registers everything.
"""

from __future__ import annotations

import torch


@torch.library.custom_op("xir::bmm_f32out", mutates_args=())
def bmm_f32out(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.bmm(a.float(), b.float())


@bmm_f32out.register_fake
def _bmm_f32out_fake(a, b):
    return a.new_empty((a.shape[0], a.shape[1], b.shape[2]), dtype=torch.float32)


@torch.library.custom_op("xir::convert", mutates_args=())
def convert(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return x.to(dtype)


@convert.register_fake
def _convert_fake(x, dtype):
    return torch.empty_like(x, dtype=dtype)


def _register_visitors() -> None:
    from executorch.backends.xnnpack.operators.node_visitor import (
        NodeVisitor,
        register_node_visitor,
    )
    from executorch.backends.xnnpack.serialization.xnnpack_graph_schema import (
        XNNBatchMatrixMultiply,
        XNNConvert,
        XNode,
    )
    from executorch.backends.xnnpack.utils.utils import get_input_node

    class BmmF32OutVisitor(NodeVisitor):
        target = "xir.bmm_f32out.default"

        def define_node(self, node, xnn_graph, vals_to_ids, debug_handle):
            self.define_nodes_tensor_inputs_outputs(node, xnn_graph, vals_to_ids)
            xnn_graph.xnodes.append(XNode(
                xnode_union=XNNBatchMatrixMultiply(input1_id=vals_to_ids[get_input_node(node, 0)],
                                                   input2_id=vals_to_ids[get_input_node(node, 1)],
                                                   output_id=vals_to_ids[node], flags=0),
                debug_handle=debug_handle))

    class ConvertVisitor(NodeVisitor):
        target = "xir.convert.default"

        def define_node(self, node, xnn_graph, vals_to_ids, debug_handle):
            source = get_input_node(node, 0)
            self.define_tensor(source, xnn_graph, vals_to_ids)
            self.define_tensor(node, xnn_graph, vals_to_ids)
            xnn_graph.xnodes.append(XNode(
                xnode_union=XNNConvert(input_id=vals_to_ids[source], output_id=vals_to_ids[node], flags=0),
                debug_handle=debug_handle))

    register_node_visitor(BmmF32OutVisitor)
    register_node_visitor(ConvertVisitor)


_register_visitors()
