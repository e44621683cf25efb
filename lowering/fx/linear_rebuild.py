"""Matrix multiplies that XNNPACK's preprocessing would rebuild into a wrong linear.

ExecuTorch's XNNPACK preprocessing (``ConvertToLinearPass``) takes every ``mm``, ``addmm`` and
``bmm`` inside a delegate whose ``source_fn_stack`` says it came from a ``torch.nn.Linear`` or
``F.linear``, and replaces the whole source partition by one ``linear``: its input is found by
walking the matmul's first operand back to the partition's edge, its weight by walking the second,
and the linear takes the place of the partition's output. That is exact when the delegate holds the
whole decomposition ``to_edge`` made (views, expand, the weight's transpose, the matmul). It is
wrong when part of it is outside the delegate (the walk stops early, at a 3-D view of a 4-D input,
and the rebuilt linear has the wrong shape: XNNPACK's output then does not fit the program's
tensor), or when a rewrite changed the chain.

:func:`keep_inexact_matmuls` finds, after tagging, the delegated matmuls whose rebuild would not
be exact and takes the linear's source off them, so that XNNPACK runs them as the matmuls they are.
"""

from __future__ import annotations

import torch
from torch.fx.passes.utils.source_matcher_utils import get_source_partitions

from xir.fx_import import op_name
from xir.ops import aten

from ..capability import MATMUL_OPS, TRANSPOSE_OPS, same_dim

# what the walk may pass through and still be the decomposition of one linear
_VIEWS = (aten.view_copy, aten.expand_copy, aten.clone, aten._unsafe_view, aten.squeeze_copy.dims, aten.unsqueeze_copy)


_MATMUL_SOURCES = {aten.mm: torch.mm, aten.addmm: torch.addmm, aten.bmm: torch.bmm}


def _name(node) -> str:
    return op_name(node.target) if node.op == "call_function" else node.op


def _shape(node):
    val = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    return tuple(val.shape) if isinstance(val, torch.Tensor) else None


def _is_ones(node) -> bool:
    """A constant of ones (xir's broadcast of an expand writes ``mul(x, ones)``)."""
    return isinstance(node, torch.fx.Node) and node.op == "placeholder" and node.name.startswith("expand_ones")


def _walk(node, members, allowed, on_transpose=None):
    """Follow first operands (as ConvertToLinearPass does) from ``node`` to the first value from
    outside ``members``; None when a node on the way is not in ``allowed``."""
    while isinstance(node, torch.fx.Node) and node in members:
        name = _name(node)
        if name in TRANSPOSE_OPS and on_transpose is not None:
            if not on_transpose(node):
                return None
        elif name == aten.mul.Tensor and on_transpose is not None and _is_ones(node.args[1]):
            pass  # a broadcast by ones: the same values
        elif name not in allowed:
            return None
        node = node.args[0]
    return node


def rebuild_is_exact(matmul: torch.fx.Node, partition_nodes: list, tag: str) -> bool:
    """Whether ConvertToLinearPass, run on the delegate tagged ``tag``, rebuilds from ``matmul``
    exactly the linear the program computes. It sees only the partition's nodes inside that
    delegate: the walks stop where the delegate's inputs are."""
    members = {
        n
        for n in partition_nodes
        if n.op == "call_function" and n.meta.get("delegation_tag") == tag and _shape(n) is not None
    }
    if sum(1 for n in members if _name(n) in MATMUL_OPS) != 1:
        return False
    nodes = list(members)
    outputs = [n for n in nodes if any(u not in members and "sym_size" not in str(u.target) for u in n.users)]
    if len(outputs) != 1:
        return False
    output = outputs[0]
    name = _name(matmul)
    bias = None
    if name == aten.addmm:
        x_arg, w_arg, bias = matmul.args[1], matmul.args[2], matmul.args[0]
    else:
        x_arg, w_arg = matmul.args[0], matmul.args[1]
    extra = [n for n in nodes if n is not matmul and _name(n) not in _VIEWS + TRANSPOSE_OPS + (aten.mul.Tensor,)]
    if name == aten.mm and len(matmul.users) == 1:
        add = next(iter(matmul.users))
        if add in members and _name(add) == aten.add.Tensor and add is output:
            extra = [n for n in extra if n is not add]
            bias = next((a for a in add.args if a is not matmul), None)
    if extra:
        return False  # an op the rebuild would drop
    x = _walk(x_arg, members, _VIEWS)
    transposes = []

    def transpose_ok(node):
        dims = node.args[1] if _name(node) == aten.permute_copy else [1, 0]
        transposes.append(node)
        return len(_shape(node) or ()) == 2 and [d % 2 for d in dims] == [1, 0]

    w = _walk(w_arg, members, _VIEWS, transpose_ok)
    if x is None or w is None or len(transposes) != 1:
        return False
    xs, ws, os_ = _shape(x), _shape(w), _shape(output)
    if xs is None or ws is None or os_ is None or len(ws) != 2 or len(xs) < 2:
        return False
    if len(xs) != len(os_) or not all(same_dim(a, b) for a, b in zip(xs[:-1] + ws, os_[:-1] + (os_[-1], xs[-1]))):
        return False
    if bias is not None and isinstance(bias, torch.fx.Node) and _shape(bias) not in ((os_[-1],), None):
        return False
    return True


def linear_source_partitions(fx_graph: torch.fx.Graph) -> dict:
    """FX node -> the source partition (``torch.nn.Linear`` / ``F.linear``) it belongs to, found
    exactly as XNNPACK's ``ConvertToLinearPass`` finds them."""
    result = {}
    for partitions in get_source_partitions(fx_graph, [torch.nn.Linear, torch.nn.functional.linear]).values():
        for partition in partitions:
            for fx_node in partition.nodes:
                result[fx_node] = partition
    return result


def keep_inexact_matmuls(graph_module: torch.fx.GraphModule, exact=()) -> list[torch.fx.Node]:
    """Take the linear's source off every delegated matmul whose rebuild would not be exact;
    returns those matmuls. ``exact``: matmuls known to be rebuilt exactly (of the decomposed linears
    the partition plan delegated whole, :attr:`lowering.partition.PartitionPlan.whole_linears`)."""

    tagged = [
        n
        for n in graph_module.graph.nodes
        if n.op == "call_function" and _name(n) in MATMUL_OPS and n.meta.get("delegation_tag")
    ]
    if not tagged:
        return []
    partition_of = linear_source_partitions(graph_module.graph)
    changed = []
    for matmul in tagged:
        partition = partition_of.get(matmul)
        if (
            partition is None
            or matmul in exact
            or rebuild_is_exact(matmul, partition.nodes, matmul.meta["delegation_tag"])
        ):
            continue
        # torch's source matcher reads source_fn_stack first, and only without it the module stack:
        # a source other than a linear keeps this matmul out of every linear's partition
        matmul.meta["source_fn_stack"] = [(matmul.name, _MATMUL_SOURCES[_name(matmul)])]
        changed.append(matmul)
    return changed
