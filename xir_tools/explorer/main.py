"""The Model Explorer adapter (``model-explorer model.pt2 --extensions=xir_tools.explorer`` imports
this module: Model Explorer loads an extension package's ``main``). xir's IR in Google's Model Explorer (``pip install 'xir[explorer]'``):

    model-explorer model.pt2 --extensions=xir_tools.explorer

An adapter extension (Model Explorer's ``Adapter`` API) for ``.pt2`` files (lowered with xir's
partitioner here, as ``xir explain`` does) and ``.xir`` IR text (planned as it is). The graph is
xir's IR after the rewrite pipeline, with the partition's overlays:

* every node coloured by its XNNPACK delegate (``style``), the nodes left outside white with a
  red border; the node's attributes: ``delegate``, ``rule`` and ``reason`` (left outside), the
  ``created by`` pass (``node.origin``), the module, the IR line;
* ``tensor_shape`` (dtype and shape) of every output, which Model Explorer shows on the edges;
* namespaces from the modules the nodes came from (``nn_module_stack``: ``model/layers.0/self_attn``),
  so repeated blocks are layers that collapse;
* graph attributes: the delegates, the ops left outside, the passes that changed the graph.

:func:`node_data` gives the same colours as Model Explorer node data (a JSON file for
``--node_data_paths``): ``xir explain MODEL --explorer`` writes it and prints the command.
"""

from __future__ import annotations

from pathlib import Path

try:
    from model_explorer import Adapter, AdapterMetadata, ModelExplorerGraphs, graph_builder
except ImportError:  # the adapter needs Model Explorer; graph_json() and node_data() do not
    Adapter = object  # type: ignore[assignment,misc]
    AdapterMetadata = None  # type: ignore[assignment]
    ModelExplorerGraphs = dict  # type: ignore[assignment,misc]
    graph_builder = None

from .data import graph_id, graph_json, namespace, node_data, write_node_data  # noqa: F401,E402


def _report_data(model_path: str, trust_pickle: bool = False) -> tuple[dict, str]:
    """Lower a .pt2 with xir (or plan IR text) and return the report's data and the graph id. The
    .pt2 is checked before torch reads it (:mod:`xir_tools.pt2`: no code from the file runs unless
    ``trust_pickle``)."""
    from ..html_report import RecordPasses, report_data

    path = Path(model_path)
    if path.suffix == ".xir":
        import xir
        from lowering.capability import Options
        from lowering.partition import plan_partition

        graph = xir.parse_graph(path.read_text(encoding="utf-8"))
        xir.verify(graph)
        bf16 = any(isinstance(v.type, xir.TensorType) and v.type.dtype is xir.DType.bf16 for v in graph.inputs)
        plan = plan_partition(graph, Options(enable_bf16=bf16))
        data = report_data(graph, plan, None, title=path.name, passes_recorded=False)
        return data, graph_id(graph, text=True)
    import torch

    from lowering import XnnpackPartitioner, to_edge_transform_and_lower

    from ..pt2 import load_exported_program

    ep = load_exported_program(path, trust_pickle=trust_pickle)
    bf16 = any(
        n.op == "placeholder" and getattr(n.meta.get("val"), "dtype", None) == torch.bfloat16 for n in ep.graph.nodes
    )
    recorder = RecordPasses()
    partitioner = XnnpackPartitioner(enable_bf16=bf16, instruments=[recorder])
    to_edge_transform_and_lower(ep, partitioner=[partitioner])
    graph = partitioner.last_graph
    data = report_data(
        graph, partitioner.last_plan, recorder.changes, title=path.name, pipeline=partitioner.pipeline_text
    )
    return data, graph_id(graph)


def convert_model(model_path: str, trust_pickle: bool = False) -> dict:
    """``{"graphs": [graph JSON]}`` for a .pt2 or .xir file (``trust_pickle``: see :mod:`xir_tools.pt2`)."""
    data, graph_id = _report_data(model_path, trust_pickle)
    return {"graphs": [graph_json(data, graph_id)]}


def _to_dataclasses(graph: dict):
    """The graph JSON as graph_builder's dataclasses (what an adapter returns)."""
    gb = graph_builder
    nodes = []
    for n in graph["nodes"]:
        nodes.append(
            gb.GraphNode(
                id=n["id"],
                label=n["label"],
                namespace=n["namespace"],
                subgraphIds=[],
                attrs=[gb.KeyValue(key=a["key"], value=a["value"]) for a in n["attrs"]],
                incomingEdges=[gb.IncomingEdge(**e) for e in n["incomingEdges"]],
                outputsMetadata=[
                    gb.MetadataItem(id=m["id"], attrs=[gb.KeyValue(**a) for a in m["attrs"]])
                    for m in n["outputsMetadata"]
                ],
                style=gb.GraphNodeStyle(**n["style"]) if n["style"] else None,
            )
        )
    return gb.Graph(id=graph["id"], nodes=nodes, groupNodeAttributes=graph["groupNodeAttributes"])


class XirAdapter(Adapter):
    """Model Explorer adapter: xir's IR with its XNNPACK partition."""

    if AdapterMetadata is not None:
        metadata = AdapterMetadata(
            id="xir_xnnpack_partition",
            name="xir: XNNPACK partition",
            description=(
                "Lowers a torch.export program (.pt2) with xir's XNNPACK partitioner (or reads xir IR "
                "text, .xir) and shows xir's IR coloured by delegate, with the rule and reason of every "
                "node left outside, dtypes and shapes, module namespaces and the passes that made nodes."
            ),
            source_repo="",
            fileExts=["pt2", "xir"],
        )

    def __init__(self):
        super().__init__()

    def convert(self, model_path: str, settings: dict) -> "ModelExplorerGraphs":
        (graph,) = convert_model(model_path)["graphs"]
        return {"graphs": [_to_dataclasses(graph)]}


__all__ = ["XirAdapter", "convert_model", "graph_json", "namespace", "node_data", "write_node_data"]
