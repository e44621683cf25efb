"""The Model Explorer adapter (xir_tools/explorer.py): ``model-explorer model.pt2
--extensions=xir_tools.explorer``. Its ``convert`` on a saved program, and Model Explorer's own
extension manager loading the module and running the command its server runs; the graph JSON is
checked: nodes, edges, module namespaces, and the overlays (delegate colours, rule and reason of
the nodes left outside, dtype and shape of the outputs, the pass that made a node)."""

from __future__ import annotations

import json

import pytest
import torch

model_explorer = pytest.importorskip(
    "model_explorer", reason="Model Explorer is not installed (pip install 'xir[explorer]')"
)


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.norm = torch.nn.Linear(16, 16), torch.nn.LayerNorm(16)

    def forward(self, x):
        return self.norm(x + torch.relu(self.fc(x)))


class Net(torch.nn.Module):
    """Two blocks (linear, relu, residual, layer norm: xnnpack.decompose-layer-norm rewrites it),
    a cumulative sum (no XNNPACK op: left outside, between two delegates), a head."""

    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList(Block() for _ in range(2))
        self.head = torch.nn.Linear(16, 4)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(torch.cumsum(x, dim=1))


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    path = tmp_path_factory.mktemp("explorer") / "net.pt2"
    torch.manual_seed(0)
    torch.export.save(torch.export.export(Net().eval(), (torch.randn(2, 16),)), path)
    return path


@pytest.fixture(scope="module")
def converted(model):
    """What Model Explorer's server does with the command for our adapter, as JSON."""
    from model_explorer.extension_manager import ExtensionManager

    manager = ExtensionManager(["xir_tools.explorer"])
    manager.load_extensions()
    ours = [e for e in manager.extensions if e.metadata.id == "xir_xnnpack_partition"]
    assert len(ours) == 1 and ours[0].type == "adapter" and "pt2" in ours[0].metadata.fileExts
    response = manager.run_cmd(
        {
            "extensionId": "xir_xnnpack_partition",
            "cmdId": "convert",
            "modelPath": str(model),
            "settings": {},
            "deleteAfterConversion": False,
        }
    )
    return json.loads(json.dumps(response))  # JSON, as the server sends it


def test_convert_returns_graph_dataclasses(model):
    from model_explorer import graph_builder

    from xir_tools.explorer.main import XirAdapter

    result = XirAdapter().convert(str(model), {})
    (graph,) = result["graphs"]
    assert isinstance(graph, graph_builder.Graph) and graph.id == "forward (xir)"
    assert all(isinstance(n, graph_builder.GraphNode) for n in graph.nodes)


def test_nodes_and_edges(converted):
    (graph,) = converted["graphs"]
    nodes = {n["id"]: n for n in graph["nodes"]}
    assert len(nodes) == len(graph["nodes"])
    ops = [n for n in graph["nodes"] if n["id"].startswith("n")]
    assert {n["label"] for n in ops} >= {"linear", "relu", "add", "cumsum"}
    assert [n["label"] for n in graph["nodes"] if n["id"] == "i0"] == ["input"]
    assert nodes["out"]["label"] == "output"
    for node in graph["nodes"]:
        for edge in node["incomingEdges"]:
            assert edge["sourceNodeId"] in nodes
            source = nodes[edge["sourceNodeId"]]
            assert int(edge["sourceNodeOutputId"]) < max(1, len(source["outputsMetadata"]))
    (cumsum,) = [n for n in ops if n["label"] == "cumsum"]
    (edge,) = cumsum["incomingEdges"]
    assert nodes[edge["sourceNodeId"]]["namespace"] == "blocks.1/norm"  # the last layer norm's last op
    assert [e["sourceNodeId"] for e in nodes["out"]["incomingEdges"]] == [
        n["id"] for n in ops if n["label"] == "linear" and n["namespace"] == ""
    ]  # the head


def test_namespaces_are_the_modules(converted):
    (graph,) = converted["graphs"]
    namespaces = {n["namespace"] for n in graph["nodes"]}
    assert {"blocks.0", "blocks.1", "blocks.0/norm", "blocks.1/norm"} <= namespaces
    # the nodes xnnpack.decompose-layer-norm made sit in the norm they replaced
    made = [n for n in graph["nodes"] if any(a["key"] == "created by" for a in n["attrs"])]
    assert made
    assert {dict((a["key"], a["value"]) for a in n["attrs"])["created by"] for n in made} >= {
        "pass xnnpack.decompose-layer-norm"
    }
    assert all(
        n["namespace"].endswith("/norm")
        for n in made
        if dict((a["key"], a["value"]) for a in n["attrs"])["created by"] == "pass xnnpack.decompose-layer-norm"
    )
    attributes = graph["groupNodeAttributes"]
    assert attributes[""]["delegates"] == "2" and "cumsum" in attributes[""]["outside, by op"]
    assert attributes["blocks.1"]["ops outside"] == "0"


def test_overlays(converted):
    from xir_tools.html_report import color_of

    (graph,) = converted["graphs"]
    ops = [n for n in graph["nodes"] if n["id"].startswith("n")]
    attrs = {n["id"]: {a["key"]: a["value"] for a in n["attrs"]} for n in ops}
    delegates = {a["delegate"] for a in attrs.values()}
    assert {"tag0", "tag1", "none (outside XNNPACK)"} <= delegates
    for node in ops:
        a = attrs[node["id"]]
        if a["delegate"].startswith("tag"):
            assert node["style"]["backgroundColor"] == color_of(int(a["delegate"][3:]))[0]
        # dtype and shape of every output, shown on the edges
        shapes = [m["attrs"][0] for m in node["outputsMetadata"]]
        assert shapes and all(s["key"] == "tensor_shape" and s["value"].startswith("f32[") for s in shapes)
        assert a["ir"].startswith("%")
    (cumsum,) = [n for n in ops if n["label"] == "cumsum"]
    a = attrs[cumsum["id"]]
    assert a["rule"] == "op" and a["reason"] and cumsum["style"]["borderColor"] == "#d0342c"
    assert cumsum["outputsMetadata"][0]["attrs"][0]["value"] == "f32[2,16]"


def test_node_data_colours_the_same_nodes(converted, model, tmp_path):
    from xir_tools.explorer.main import _report_data, node_data

    data, graph_id = _report_data(str(model))
    colours = node_data(data, graph_id)
    (graph,) = converted["graphs"]
    assert list(colours) == [graph["id"]]
    results = colours[graph["id"]]["results"]
    ids = {n["id"] for n in graph["nodes"]}
    assert set(results) <= ids and len(results) >= 10
    outside = [k for k, v in results.items() if v["value"] == -1]
    assert [n["label"] for n in graph["nodes"] if n["id"] in outside] == ["cumsum"]


def test_ir_text_files_too(tmp_path):
    from xir_tools.explorer.main import XirAdapter

    path = tmp_path / "m.xir"
    path.write_text(
        "graph @forward {\n  param %w: f32[4,8]\n  input %x: f32[2,8]\n"
        "  %0: f32[2,4] = aten.linear(%x, %w)\n  %1: f32[2,4] = aten.cumsum(%0) {dim=1}\n"
        "  %2: f32[2,4] = aten.relu(%1)\n  return %2\n}\n"
    )
    (graph,) = XirAdapter().convert(str(path), {})["graphs"]
    assert graph.id == "forward (xir, as written)"
    labels = {n.label: n for n in graph.nodes}
    assert {"linear", "cumsum", "relu", "input", "output"} <= set(labels)
    assert {a.key: a.value for a in labels["cumsum"].attrs}["reason"]
