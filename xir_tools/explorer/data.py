"""Model Explorer's JSON for xir's IR and partition (graphs and node data), without Model Explorer
or torch: :mod:`xir_tools.explorer.main` (the adapter) and ``xir explain --explorer`` use it."""

from __future__ import annotations

import json
import os
from pathlib import Path

from xir.files import write_atomic

OUTSIDE_STYLE = {"backgroundColor": "#ffffff", "borderColor": "#d0342c", "hoveredBorderColor": "#8f1d17"}
IO_STYLE = {"backgroundColor": "#fff7d6", "borderColor": "#b79217", "hoveredBorderColor": "#7a610f"}


def namespace(module: str) -> str:
    """``model.layers.0.self_attn`` -> ``model/layers.0/self_attn`` (an index stays with its list)."""
    parts: list[str] = []
    for component in (c for c in module.split(".") if c):
        if component.isdigit() and parts:
            parts[-1] += "." + component
        else:
            parts.append(component)
    return "/".join(parts)


def graph_json(data: dict, graph_id: str) -> dict:
    """A Model Explorer graph (its JSON form) from :func:`xir_tools.html_report.report_data`."""
    groups = {g["index"]: g for g in data["groups"]}
    paths = {c["id"]: c["path"] for c in data["clusters"]}  # the module boxes of the HTML page: one node is no box
    incoming: dict[str, list[dict]] = {}
    for edge in data["edges"]:
        incoming.setdefault(edge["target"], []).append(
            {
                "sourceNodeId": edge["source"],
                "sourceNodeOutputId": str(edge["output"]),
                "targetNodeInputId": str(edge["input"]),
            }
        )
    nodes = [_node_json(record, groups, paths, incoming) for record in data["nodes"]]
    group_attributes = {"": _graph_attributes(data), **_namespace_counts(nodes, data["nodes"])}
    return {
        "id": graph_id,
        "nodes": nodes,
        "groupNodeAttributes": group_attributes,
        "groupNodeConfigs": None,
        "nodeLabelsToHide": None,
        "tasksData": None,
        "layoutConfigs": None,
    }


def _node_json(record: dict, groups: dict, paths: dict, incoming: dict) -> dict:
    group = groups.get(record["group"]) if record["group"] is not None else None
    attrs = [("op", record["op"])]
    status = record.get("status")
    if record["kind"] != "op":
        style = IO_STYLE
        attrs.append(("kind", record["kind"]))
    elif status == "delegated":
        style = {"backgroundColor": group["fill"], "borderColor": group["stroke"], "hoveredBorderColor": "#111111"}
        attrs.append(("delegate", group["tag"]))
    elif status == "folded":
        style = {"backgroundColor": group["fill"], "borderColor": group["stroke"], "hoveredBorderColor": "#111111"}
        attrs.append(("delegate", f"Q/DQ folded into {group['tag']}"))
    elif status == "outside":
        style = OUTSIDE_STYLE
        attrs += [
            ("delegate", "none (outside XNNPACK)"),
            ("rule", record.get("rule", "")),
            ("reason", record.get("reason", "")),
        ]
    else:
        style = None
        attrs.append(("delegate", "none"))
    if record.get("origin"):
        attrs.append(("created by", f"pass {record['origin']}"))
    if record.get("module"):
        attrs.append(("module", record["module"]))
    attrs.append(("ir", record["line"]))
    outputs = [
        {"id": str(i), "attrs": [{"key": "tensor_shape", "value": t}, {"key": "__tensor_tag", "value": name.strip()}]}
        for i, (t, name) in enumerate(zip(record["types"], record["name"].split(",")))
    ]
    return {
        "id": record["id"],
        "label": record["short"],
        "namespace": namespace(paths.get(record.get("cluster"), "")),
        "subgraphIds": [],
        "attrs": [{"key": k, "value": str(v)} for k, v in attrs],
        "incomingEdges": incoming.get(record["id"], []),
        "outputsMetadata": outputs,
        "inputsMetadata": [],
        "style": dict(style) if style else None,
        "config": None,
    }


def _graph_attributes(data: dict) -> dict[str, str]:
    """The whole graph's figures: delegates, what each holds, what is outside and why, the passes."""
    summary = data["summary"]
    attributes = {
        "delegates": str(summary["delegates"]),
        "nodes delegated": f"{summary['delegated']} of {summary['nodes']}",
        "compute ops outside": str(summary["outside"]),
    }
    for g in data["groups"]:
        attributes[g["tag"]] = ", ".join(f"{op} x{n}" if n > 1 else op for op, n in g["ops"].items())
    outside = [r for r in summary["by_op"] if r["outside"]]
    if outside:
        attributes["outside, by op"] = "; ".join(
            f"{r['op']} x{r['outside']}: {' / '.join(r['reasons'])}" for r in outside
        )
    if data["pipeline"]:
        attributes["pipeline"] = data["pipeline"]
    if data["passes"]:
        attributes["passes that changed the graph"] = "; ".join(
            f"{c['name']} ({c['nodes_before']} -> {c['nodes_after']} nodes)" for c in data["passes"]
        )
    return attributes


def _namespace_counts(nodes: list[dict], records: list[dict]) -> dict[str, dict[str, str]]:
    """Each module box's count of ops delegated and left outside (its nested boxes included)."""
    counts: dict[str, dict[str, int]] = {}
    for node, record in zip(nodes, records):
        parts = node["namespace"].split("/") if node["namespace"] else []
        for depth in range(1, len(parts) + 1):
            entry = counts.setdefault("/".join(parts[:depth]), {"delegated": 0, "outside": 0})
            if record.get("status") in ("delegated", "outside"):
                entry[record["status"]] += 1
    return {
        key: {"ops delegated": str(entry["delegated"]), "ops outside": str(entry["outside"])}
        for key, entry in counts.items()
    }


def node_data(data: dict, graph_id: str) -> dict:
    """Model Explorer node data (the JSON of ``model_explorer.node_data_builder.ModelNodeData``):
    each node's value is its delegate's index (-1: left outside), coloured as on the graph."""
    results = {}
    groups = {g["index"]: g for g in data["groups"]}
    for record in data["nodes"]:
        if record["kind"] != "op" or record.get("status") not in ("delegated", "outside", "folded"):
            continue
        if record["status"] == "outside":
            results[record["id"]] = {"value": -1, "bgColor": "#f4b4ae"}
        else:
            results[record["id"]] = {"value": record["group"], "bgColor": groups[record["group"]]["stroke"]}
    return {graph_id: {"name": "xir delegate", "results": results, "thresholds": [], "gradient": []}}


def graph_id(graph, text: bool = False) -> str:
    """The adapter's graph id (node data files name the graph they colour)."""
    return f"{graph.name} (xir, as written)" if text else f"{graph.name} (xir)"


def write_node_data(path: str | os.PathLike, data: dict, graph_id: str) -> Path:
    """Write the node data to ``path`` through a temporary file and a rename: a failed write leaves
    the file that was there."""
    return write_atomic(path, json.dumps(node_data(data, graph_id), indent=1))
