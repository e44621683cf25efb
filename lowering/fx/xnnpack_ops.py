"""xir's own ops for XNNPACK, and how the stock XNNPACK serializer writes them.

XNNPACK multiplies bf16 matrices only into an fp32 result, and ExecuTorch 1.5.1's edge dialect
has no op for that (its verifier rejects a bf16 x bf16 -> fp32 ``aten.bmm``), nor a conversion
the XNNPACK serializer keeps inside a delegate (its own passes drop dtype-changing copies). So
xir defines:

* ``xir::bmm_f32out(a, b)``: batched matmul of bf16 (or f32) matrices with an fp32 result,
  written as XNNPACK's batch-matrix-multiply node;
* ``xir::convert(x, dtype)``: a dtype conversion, written as XNNPACK's convert node;
* ``xir::linear_f16w(x, w, b)``: a linear of an fp32 input on an fp16 constant weight (fp32 bias),
  written as XNNPACK's fully connected node, which takes fp16 static weights with fp32 activations
  (an edge ``aten.linear`` with mixed dtypes fails ExecuTorch's verifier);
* ``xir::slice(x, dim, start, end)``: ``x[start:end]`` along ``dim`` (a static dim) of a tensor
  whose other dims may be symbolic, written as XNNPACK's static slice with size 0 for every dim
  but ``dim``: XNNPACK takes the whole of a size-0 dim that starts at 0, at the size it has at run
  time. Stock's slice visitor writes the upper bound of a symbolic dim as its size, which fails
  at any other size (``lowering/passes/slices_as_xir_slices.py`` makes these).

They register node visitors in ExecuTorch's XNNPACK visitor registry (no ExecuTorch code is
patched). They have no portable kernel: xir only creates them where they will be delegated.
Importing this module registers everything.
"""

from __future__ import annotations

import torch
from executorch.backends.xnnpack.operators.node_visitor import NodeVisitor, register_node_visitor
from executorch.backends.xnnpack.serialization.xnnpack_graph_schema import (
    XNNBatchMatrixMultiply,
    XNNConvert,
    XNNFullyConnected,
    XNNStaticSlice,
    XNode,
)
from executorch.backends.xnnpack.utils.utils import PERM_NCHW_TO_NHWC, get_input_node
from executorch.backends.xnnpack.utils.xnnpack_constants import XNN_INVALID_VALUE_ID


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


@torch.library.custom_op("xir::linear_f16w", mutates_args=())
def linear_f16w(input: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:  # noqa: A002
    return torch.nn.functional.linear(input, weight.to(input.dtype), bias)


@linear_f16w.register_fake
def _linear_f16w_fake(input, weight, bias=None):  # noqa: A002
    return input.new_empty((*input.shape[:-1], weight.shape[0]))


@torch.library.custom_op("xir::slice", mutates_args=())
def slice_(input: torch.Tensor, dim: int, start: int, end: int) -> torch.Tensor:  # noqa: A002
    return input.narrow(dim, start, end - start).clone()


@slice_.register_fake
def _slice_fake(input, dim, start, end):  # noqa: A002
    shape = list(input.shape)
    shape[dim] = end - start
    return input.new_empty(shape)


def static_slice_sizes(shape, dim: int, start: int, end: int) -> tuple[list[int], list[int]]:
    """XNNPACK's offsets and sizes for ``xir::slice``: 0 (the whole dim, at run time, which XNNPACK
    infers for an offset of 0) for every dim but ``dim``."""
    offsets, sizes = [0] * len(shape), [0] * len(shape)
    offsets[dim], sizes[dim] = start, end - start
    return offsets, sizes


class BmmF32OutVisitor(NodeVisitor):
    target = "xir.bmm_f32out.default"

    def define_node(self, node, xnn_graph, vals_to_ids, debug_handle):
        self.define_nodes_tensor_inputs_outputs(node, xnn_graph, vals_to_ids)
        xnn_graph.xnodes.append(
            XNode(
                xnode_union=XNNBatchMatrixMultiply(
                    input1_id=vals_to_ids[get_input_node(node, 0)],
                    input2_id=vals_to_ids[get_input_node(node, 1)],
                    output_id=vals_to_ids[node],
                    flags=0,
                ),
                debug_handle=debug_handle,
            )
        )


class LinearF16wVisitor(NodeVisitor):
    target = "xir.linear_f16w.default"

    def define_node(self, node, xnn_graph, vals_to_ids, debug_handle):
        # (input, weight, bias as the stock linear's; the weight an fp16 static tensor)
        self.define_nodes_tensor_inputs_outputs(node, xnn_graph, vals_to_ids)
        bias = get_input_node(node, 2) if len(node.args) > 2 and node.args[2] is not None else None
        xnn_graph.xnodes.append(
            XNode(
                xnode_union=XNNFullyConnected(
                    input1_id=vals_to_ids[get_input_node(node, 0)],
                    filter_id=vals_to_ids[get_input_node(node, 1)],
                    bias_id=vals_to_ids[bias] if bias is not None else XNN_INVALID_VALUE_ID,
                    output_id=vals_to_ids[node],
                    flags=0,
                ),
                debug_handle=debug_handle,
            )
        )


class ConvertVisitor(NodeVisitor):
    target = "xir.convert.default"

    def define_node(self, node, xnn_graph, vals_to_ids, debug_handle):
        source = get_input_node(node, 0)
        self.define_tensor(source, xnn_graph, vals_to_ids)
        self.define_tensor(node, xnn_graph, vals_to_ids)
        xnn_graph.xnodes.append(
            XNode(
                xnode_union=XNNConvert(input_id=vals_to_ids[source], output_id=vals_to_ids[node], flags=0),
                debug_handle=debug_handle,
            )
        )


class SliceVisitor(NodeVisitor):
    target = "xir.slice.default"

    def define_node(self, node, xnn_graph, vals_to_ids, debug_handle):
        self.define_nodes_tensor_inputs_outputs(node, xnn_graph, vals_to_ids)
        source = get_input_node(node, 0)
        dim, start, end = node.args[1:4]
        offsets, sizes = static_slice_sizes(source.meta["val"].shape, dim, start, end)
        if "XNN_NHWC_NODE" in node.meta:  # (the tensors are defined channels-last)
            offsets, sizes = [offsets[i] for i in PERM_NCHW_TO_NHWC], [sizes[i] for i in PERM_NCHW_TO_NHWC]
        xnn_graph.xnodes.append(
            XNode(
                xnode_union=XNNStaticSlice(
                    num_dims=len(sizes),
                    offsets=offsets,
                    sizes=sizes,
                    input_id=vals_to_ids[source],
                    output_id=vals_to_ids[node],
                    flags=0,
                ),
                debug_handle=debug_handle,
            )
        )


for _visitor in (BmmF32OutVisitor, LinearF16wVisitor, ConvertVisitor, SliceVisitor):
    register_node_visitor(_visitor)
