"""xir's own ops that no delegate took, written back as the ATen edge ops they stand for.

xir's transform passes make ``xir.slice``, ``xir.convert``, ``xir.bmm_f32out`` and
``xir.linear_f16w`` (``lowering/fx/xnnpack_ops.py``) for the ops an xir partitioner plans to delegate.
They have no ExecuTorch kernel: outside a delegate, ``to_executorch`` could not lower them. In a
list of partitioners the plan is not the final partitioning: a partitioner before xir's takes
what it takes first (the LLM flow's dynamically quantized stage, stock's XNNPACK partitioner),
and a DQ-only xir stage leaves the float ops, xir's among them, to the next one. What is still
outside after the last partitioner is rewritten here, in place, as what it computes:

* ``xir.slice(x, dim, start, end)``: ``aten.slice_copy.Tensor(x, dim, start, end, 1)``;
* ``xir.convert(x, dtype)``: the edge program's cast (``dim_order_ops._to_dim_order_copy`` in
  ExecuTorch's default dim-order mode, ``aten._to_copy`` with ``_skip_dim_order``);
* ``xir.bmm_f32out(a, b)``: ``aten.bmm`` of ``a`` and ``b`` cast to fp32;
* ``xir.linear_f16w(x, w, b)``: ``aten.linear`` of ``x`` and ``w`` cast to ``x``'s dtype.

Each result keeps the value (``meta["val"]``: shape, symbolic sizes and dtype) of the xir op it
replaces, so the program computes the same, at every size. Where it runs:

* in ExecuTorch's ``to_edge_transform_and_lower``: after the last ``to_backend``, ExecuTorch asks
  every partitioner ``ops_to_not_decompose`` about the final program (the object that
  ``to_executorch`` lowers); xir's partitioner rewrites it then (:func:`rewrite_program`);
* after ``to_backend`` calls of one's own: ``ExecutorchBackendConfig(passes=[XirOpsAsAten()])``
  for ``to_executorch``, or :func:`rewrite_edge_manager` on the edge program manager.
"""

from __future__ import annotations

import logging
from typing import Any

import torch
from executorch.exir.dialects._ops import ops as exir_ops
from torch.fx.passes.infra.pass_base import PassResult

logger = logging.getLogger("xir")

XIR_OPS = ("slice", "convert", "bmm_f32out", "linear_f16w")


class XirOpLeftOutside(RuntimeError):
    """An xir op outside every delegate that cannot be written as ATen ops (named, with why)."""


def xir_op_name(node: torch.fx.Node) -> str | None:
    """``slice`` for a call of the edge op ``xir.slice``, else None."""
    if node.op != "call_function":
        return None
    target = node.target
    # (edge ops only: xir's write-back makes those; a torch op of xir in an ATen program is the user's)
    if type(target).__name__ != "EdgeOpOverload" or getattr(target, "namespace", None) != "xir":
        return None
    name = target.name() if callable(getattr(target, "name", None)) else str(target)
    return name.split("::", 1)[-1].split(".", 1)[0]


def undelegated_xir_nodes(graph_module: torch.fx.GraphModule) -> list[torch.fx.Node]:
    """The calls of xir's ops in ``graph_module``'s own graph (a delegate's ops are in its lowered
    module, not here)."""
    return [n for n in graph_module.graph.nodes if xir_op_name(n) is not None]


def uses_dim_order(graph_module: torch.fx.GraphModule, default: bool = True) -> bool:
    """Whether the edge program casts with ``dim_order_ops`` (ExecuTorch's default) or with
    ``aten._to_copy`` (``_skip_dim_order=True``), as its graph shows; ``default`` when it has
    neither."""
    for node in graph_module.graph.nodes:
        if node.op != "call_function":
            continue
        name = node.target.name() if callable(getattr(node.target, "name", None)) else ""
        if name.startswith("dim_order_ops::"):
            return True
        if name == "aten::_to_copy":
            return False
    return default


def program_uses_dim_order(ep: Any) -> bool:
    """The dim-order mode the edge program was made in (its verifier's), else as its graph shows."""
    for verifier in getattr(ep, "verifiers", None) or ():
        try:
            return bool(verifier().use_dim_order)
        except Exception:  # (a verifier of another kind)
            continue
    return uses_dim_order(ep.graph_module)


def _edge(namespace: str, op: str, overload: str = "default"):

    return getattr(getattr(getattr(exir_ops.edge, namespace), op), overload)


class _Rewriter:
    """Retargets an xir node in place (its name, and so the program's output names, stay), with
    the casts it needs inserted before it."""

    def __init__(self, graph: torch.fx.Graph, use_dim_order: bool):
        self.graph = graph
        self.use_dim_order = use_dim_order

    def cast_call(self, x: torch.fx.Node, dtype: torch.dtype) -> tuple:
        """(target, args, kwargs) of the edge program's cast of ``x`` to ``dtype``."""
        if self.use_dim_order:
            return (
                _edge("dim_order_ops", "_to_dim_order_copy"),
                (x,),
                {"dtype": dtype, "dim_order": list(range(x.meta["val"].dim()))},
            )
        return _edge("aten", "_to_copy"), (x,), {"dtype": dtype}

    def cast(self, x: torch.fx.Node, dtype: torch.dtype, like: torch.fx.Node) -> torch.fx.Node:
        """A new node casting ``x`` to ``dtype`` (``x`` when it has that dtype), before ``like``."""
        source = x.meta["val"]
        if source.dtype == dtype:
            return x
        target, args, kwargs = self.cast_call(x, dtype)
        with self.graph.inserting_before(like):
            node = self.graph.call_function(target, args, kwargs)
        for key in ("nn_module_stack", "stack_trace", "source_fn_stack", "from_node", "xir_origin"):
            if key in like.meta:
                node.meta[key] = like.meta[key]
        node.meta["val"] = source.to(dtype=dtype, memory_format=torch.contiguous_format)
        return node

    @staticmethod
    def check(node: torch.fx.Node) -> None:
        name = xir_op_name(node)
        if name not in XIR_OPS:
            raise XirOpLeftOutside(
                f"{node.name} ({node.target}) is outside every delegate, and xir knows no ATen "
                f"ops for it (it writes back {', '.join('xir.' + op for op in XIR_OPS)})"
            )
        if not isinstance(node.meta.get("val"), torch.Tensor):
            raise XirOpLeftOutside(
                f"{node.name} ({node.target}) is outside every delegate and has no tensor value "
                "(meta['val']) to write it back as ATen ops with"
            )

    def rewrite(self, node: torch.fx.Node) -> None:
        self.check(node)
        name = xir_op_name(node)
        args, kw = list(node.args), dict(node.kwargs)

        def arg(i: int, key: str, default=None):
            return args[i] if len(args) > i else kw.get(key, default)

        if name == "slice":
            x, dim, start, end = arg(0, "input"), arg(1, "dim"), arg(2, "start"), arg(3, "end")
            target, new_args, new_kwargs = _edge("aten", "slice_copy", "Tensor"), (x, dim, start, end, 1), {}
        elif name == "convert":
            target, new_args, new_kwargs = self.cast_call(arg(0, "x"), arg(1, "dtype"))
        elif name == "bmm_f32out":
            a, b = (self.cast(arg(i, key), torch.float32, node) for i, key in ((0, "a"), (1, "b")))
            target, new_args, new_kwargs = _edge("aten", "bmm"), (a, b), {}
        else:  # linear_f16w
            x, w, bias = arg(0, "input"), arg(1, "weight"), arg(2, "bias")
            w = self.cast(w, x.meta["val"].dtype, node)
            target, new_args, new_kwargs = _edge("aten", "linear"), ((x, w) if bias is None else (x, w, bias)), {}
        node.target, node.args, node.kwargs = target, tuple(new_args), new_kwargs
        node.meta["xir_written_back_from"] = f"xir.{name}"


def rewrite_graph_module(graph_module: torch.fx.GraphModule, use_dim_order: bool | None = None) -> list[str]:
    """Rewrite, in place, every call of an xir op in ``graph_module``'s graph as the ATen edge ops
    it stands for: the node keeps its name and value, its target becomes the ATen op, with the
    casts it needs before it. Returns the names of the nodes rewritten (empty when there was none).
    Checks every node before changing anything: on :class:`XirOpLeftOutside` the graph is as it was."""
    nodes = undelegated_xir_nodes(graph_module)
    if not nodes:
        return []
    for node in nodes:  # (all checked before the first change)
        _Rewriter.check(node)
    if use_dim_order is None:
        use_dim_order = uses_dim_order(graph_module)
    rewriter = _Rewriter(graph_module.graph, use_dim_order)
    for node in nodes:
        rewriter.rewrite(node)
    graph_module.graph.lint()
    graph_module.recompile()
    return [n.name for n in nodes]


def rewrite_program(ep: Any) -> list[str]:
    """Rewrite, in place, the xir ops outside the delegates of the edge program ``ep`` as ATen edge
    ops (its graph module's graph; names and signature stay). Returns the names of the nodes
    rewritten."""
    rewritten = rewrite_graph_module(ep.graph_module, program_uses_dim_order(ep))
    if rewritten:
        logger.info(
            "xir: %d xir op(s) outside every delegate written back as ATen ops: %s",
            len(rewritten),
            ", ".join(rewritten),
        )
    return rewritten


def rewrite_edge_manager(edge_manager: Any) -> list[str]:
    """:func:`rewrite_program` on every method of an EdgeProgramManager (after one's own
    ``to_backend`` calls, before ``to_executorch``). Returns the names of the nodes rewritten."""
    done: list[str] = []
    for name in edge_manager.methods:
        done += rewrite_program(edge_manager.exported_program(name))
    return done


class XirOpsAsAten:
    """A pass for ``to_executorch(ExecutorchBackendConfig(passes=[XirOpsAsAten()]))``: the xir ops
    outside every delegate as ATen edge ops (``use_dim_order``: the edge program's mode; None: as
    its graph shows)."""

    def __init__(self, use_dim_order: bool | None = None):
        self.use_dim_order = use_dim_order

    def __call__(self, graph_module: torch.fx.GraphModule):

        renamed = rewrite_graph_module(graph_module, self.use_dim_order)
        return PassResult(graph_module, bool(renamed))


__all__ = [
    "XirOpLeftOutside",
    "XirOpsAsAten",
    "rewrite_edge_manager",
    "rewrite_graph_module",
    "rewrite_program",
    "undelegated_xir_nodes",
]
