"""Tensors laid out as contiguous ones, declared contiguous.

ExecuTorch writes each tensor's dim order from the strides torch.export traced
(``exir.tensor.dim_order_from_stride``: the dims by stride, larger first, ties in dim order). A
channels-last tensor with one channel, ``[N, 1, H, W]`` with strides ``(HW, 1, W, 1)``, is the
same bytes as the contiguous tensor (torch's ``is_contiguous()`` is true), but its strides tie and
sort to the dim order ``(0, 2, 1, 3)``, neither contiguous nor channels-last. A program with such
a graph input fails at its first run, with stock's partitioner and with none (ExecuTorch issue
#19153): XNNPACK's delegate "Propagating input shapes failed" (``xnn_status_invalid_parameter``), a
portable kernel 0x12 (``tensors_have_same_dim_order``). The same program with the input declared
contiguous runs, whatever strides the caller's tensor has.

:class:`ContiguousDimOrders` (an ExecuTorch ExportedProgram pass, in the partitioner's
``transform_passes()`` after xir's rewrites) gives every value whose strides are not the
contiguous ones but whose layout is (``is_contiguous()``: the dims out of order all have size 1)
the contiguous strides, and a dim-order op that makes one (``_to_dim_order_copy``,
``_clone_dim_order`` to channels-last) the contiguous dim order. No byte moves: each such tensor is
laid out the same in both orders.
"""

from __future__ import annotations

import torch
from executorch.exir.pass_base import ExportedProgramPassBase, ExportedProgramPassResult

_DIM_ORDER_OPS = ("_to_dim_order_copy", "_clone_dim_order")


def _contiguous_strides(shape) -> tuple:
    strides, step = [], 1
    for size in reversed(tuple(shape)):
        strides.append(step)
        step *= max(int(size), 1)
    return tuple(reversed(strides))


def ambiguous(val) -> bool:
    """A tensor whose bytes are contiguous but whose strides are not the contiguous ones."""
    if not isinstance(val, torch.Tensor) or val.dim() < 2:
        return False
    shape, strides = tuple(val.shape), tuple(val.stride())
    if not all(type(s) is int for s in shape + strides):  # symbolic sizes: left as traced (int() would guard)
        return False
    return strides != _contiguous_strides(shape) and val.is_contiguous()


def declare_contiguous(graph_module: torch.fx.GraphModule) -> list[str]:
    """Give the ambiguous values of ``graph_module`` contiguous strides (in place); their names."""
    changed = []
    for node in graph_module.graph.nodes:
        val = node.meta.get("val")
        if not ambiguous(val):
            continue
        node.meta["val"] = val.clone(memory_format=torch.contiguous_format)
        if node.op == "call_function" and any(name in str(node.target) for name in _DIM_ORDER_OPS):
            if node.kwargs.get("dim_order") is not None:
                node.update_kwarg("dim_order", list(range(val.dim())))
        changed.append(node.name)
    return changed


class ContiguousDimOrders(ExportedProgramPassBase):
    """The ExportedProgram pass that applies :func:`declare_contiguous` to a program."""

    def call(self, ep):
        changed = declare_contiguous(ep.graph_module)
        return ExportedProgramPassResult(ep, bool(changed))


def contiguous_dim_orders_pass() -> ContiguousDimOrders:
    return ContiguousDimOrders()
