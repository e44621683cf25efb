"""The partition report as one self-contained HTML page: the IR graph drawn as a graph.

    xir explain model.pt2 --html report.html
    partitioner = XnnpackPartitioner(instruments=[RecordPasses()])   # the pass diffs (optional)
    ... lower ...
    write_partitioner_report(partitioner, "report.html")

The page has no network dependency: its data (JSON), styles, script and the graph layout engine
(dagre, MIT licence, vendored in ``xir_tools/report_assets/``) are inline. The model's text (op
names, attributes, module names, file names) is untrusted: it reaches the page escaped for where
it goes (HTML text, or JSON inert in a <script> element), and the template is filled in one pass,
so no text from the model is read as markup or script. It shows

* the IR graph laid out by dagre (a layered, Sugiyama-style layout, run in the page): every IR
  node one element, coloured by its delegate group; a node left outside is white with a red
  border and its rule and reason; the result type (dtype and shape) on each node, and on each
  edge when hovered;
* nested, collapsible boxes for the modules the nodes came from (``nn_module_stack`` in the FX
  node meta, e.g. ``model.layers.0.self_attn``); nodes a pass created inherit the module of the
  values they read. Large graphs open with the repeated blocks collapsed;
* a search box (op, value name, module, delegate, rule, reason, pass), also from the URL:
  ``report.html#search=softmax`` (``#node=n12`` opens and selects a node, ``#zoom=0.8``,
  ``#expand=all``, ``#tab=summary``, ``#pass-3`` a pass's diff). These open boxes while at most
  900 items show. Above 1,500 visible items, or when dagre fails (its layout recurses along
  paths: a chain of 1,800 nodes overflowed a browser's stack), the page lays the graph out in
  plain layers instead, without the open boxes: a graph of any size draws (20,000 nodes open in
  seconds);
* a summary (delegates, ops inside and outside by op, the passes that changed the graph and
  what they did) and, for each pass that changed the graph, its IR diff (recorded by
  :class:`RecordPasses`: with stable value names, so a diff shows what the pass changed).

Importing this module imports neither torch nor ExecuTorch; :func:`report_data` works on any IR
graph and partition plan (an IR text file's too).
"""

from __future__ import annotations

import difflib
import html
import json
import os
import re
from collections import Counter
from pathlib import Path
from typing import Any, Iterable

from lowering.report import is_compute
from passes import Instrument
from xir import Graph, InputKind, Node, Value
from xir.files import check_writable, write_atomic
from xir.printer import Namer, print_node

ASSETS = Path(__file__).with_name("report_assets")

# delegate colours (fill, stroke): distinct, light enough for black text
PALETTE = [
    ("#cfe3ff", "#3b78c4"),
    ("#d4f2d0", "#3f9a3a"),
    ("#ffe2c2", "#d07b21"),
    ("#ead7fb", "#8a52c4"),
    ("#ccf1ef", "#2b9a92"),
    ("#fbd3e4", "#c4457a"),
    ("#f3efc0", "#a39a1f"),
    ("#dcdcf7", "#5a5ab8"),
    ("#d9eed9", "#5b8c5b"),
    ("#f5dccd", "#b0663c"),
    ("#d0e9f5", "#3a86a8"),
    ("#ecd5d5", "#a05353"),
]
DISPLAYED_INPUTS = (InputKind.user, InputKind.state)  # parameters and constants: in a node's details only


def color_of(index: int) -> tuple[str, str]:
    return PALETTE[index % len(PALETTE)]


# ------------------------------------------------------------------------ pass recording


class RecordPasses(Instrument):
    """Keeps, for every pass that changed the graph, its IR diff and what it did: nodes before and
    after, ops created and removed, the rules that fired (pattern passes) or the ops folded
    (fold-constants). Values keep one name through the whole pipeline, so the diff of a pass that
    inserts a node is that node, not a renumbering."""

    def __init__(self, context: int = 2, max_diff_lines: int = 4000):
        self.context = context
        self.max_diff_lines = max_diff_lines  # a longer diff is cut (the page stays small enough to open)
        self.changes: list[dict] = []
        self.passes_run = 0
        self._namer: Namer | None = None
        self._keep: list[Value] = []  # named values stay alive: their ids are not reused
        self._text: list[str] = []
        self._ops: Counter = Counter()

    def _lines(self, graph: Graph) -> list[str]:
        namer = self._namer
        for value in graph.inputs:
            if id(value) not in namer.names:
                self._keep.append(value)
        lines = [f"graph @{graph.name} {{"]
        lines += [f"  {v.input_kind.value} {namer.ref(v)}: {v.type}" for v in graph.inputs]
        for node in graph:
            for result in node.results:
                if id(result) not in namer.names:
                    self._keep.append(result)
            lines.append("  " + print_node(node, namer, show_origin=True))
        lines.append("  return" + ("" if not graph.outputs else " " + ", ".join(namer.ref(v) for v in graph.outputs)))
        lines.append("}")
        return lines

    def before_pipeline(self, manager, graph):
        self.changes, self.passes_run = [], 0  # the last run's (the one the last partition() saw)
        self._namer = Namer()
        for value in graph.inputs:
            self._namer.names[id(value)] = value.name
            self._namer._taken.add(value.name)
        self._text = self._lines(graph)
        self._ops = Counter(n.op for n in graph)

    def after_pass(self, p, graph, changed, index):
        self.passes_run += 1
        if not changed:
            return
        text = self._lines(graph)
        ops = Counter(n.op for n in graph)
        diff = list(
            difflib.unified_diff(self._text, text, f"before {p.name}", f"after {p.name}", n=self.context, lineterm="")
        )
        if len(diff) > self.max_diff_lines:
            diff = diff[: self.max_diff_lines] + [f"... {len(diff) - self.max_diff_lines} more diff lines not shown"]
        stats = getattr(p, "last_stats", None)
        rules = dict(stats.fired) if stats is not None and getattr(stats, "fired", None) else {}
        folded = getattr(p, "folded", None)
        self.changes.append(
            {
                "index": index,
                "name": p.name,
                "pass": str(p),
                "nodes_before": sum(self._ops.values()),
                "nodes_after": sum(ops.values()),
                "created": dict(sorted((ops - self._ops).items())),
                "removed": dict(sorted((self._ops - ops).items())),
                "rules": {k: int(v) for k, v in sorted(rules.items())},
                "folded": {k: int(v) for k, v in sorted(dict(folded).items())} if folded else {},
                "diff": "\n".join(diff),
            }
        )
        self._text, self._ops = text, ops


def find_recorder(instruments: Iterable[Any]) -> RecordPasses | None:
    for instrument in instruments or ():
        if isinstance(instrument, RecordPasses):
            return instrument
    return None


# ---------------------------------------------------------------------------- modules


def _module_path(node: Node) -> str | None:
    fx = node.fx_node
    stack = fx.meta.get("nn_module_stack") if fx is not None and hasattr(fx, "meta") else None
    if not stack:
        return None  # no record (a node a pass made): module_paths() places it
    path, _ = list(stack.values())[-1]
    return str(path)  # "" for the root module's own code


def _module_types(nodes: Iterable[Node]) -> dict[str, str]:
    """Module path -> class name, from every node's stack."""
    types: dict[str, str] = {}
    for node in nodes:
        fx = node.fx_node
        stack = fx.meta.get("nn_module_stack") if fx is not None and hasattr(fx, "meta") else None
        for path, kind in (stack or {}).values():
            name = getattr(kind, "__name__", None) or str(kind)
            types.setdefault(str(path), name.rsplit(".", 1)[-1].strip("'>"))
    return types


def _common(paths: list[list[str]]) -> list[str]:
    if not paths:
        return []
    prefix = paths[0]
    for path in paths[1:]:
        n = 0
        while n < min(len(prefix), len(path)) and prefix[n] == path[n]:
            n += 1
        prefix = prefix[:n]
    return prefix


def module_paths(graph: Graph) -> dict[int, list[str]]:
    """Each node's module path as components ([] for the root module's own code). A node without
    one (a pass made it) gets the common path of the nearest nodes with one that it reads from and
    that read from it (looking through other such nodes): a rewrite stays in the module it rewrote."""
    nodes = list(graph)
    known: dict[int, list[str]] = {}
    for node in nodes:
        path = _module_path(node)
        if path is not None:
            known[id(node)] = [c for c in path.split(".") if c]
    if not known:  # IR text: no node has a module, and looking for one would visit 128 nodes per node
        return {id(node): [] for node in nodes}
    result: dict[int, list[str]] = {}
    for node in nodes:
        if id(node) in known:
            result[id(node)] = known[id(node)]
            continue
        near: list[list[str]] = []
        for step in (lambda n: [v.producer for v in n.inputs() if v.producer is not None], lambda n: n.readers):
            seen, frontier = {id(node)}, [node]
            for _ in range(64):  # through at most this many nodes without a path
                following = []
                for current in frontier:
                    for other in step(current):
                        if id(other) in seen:
                            continue
                        seen.add(id(other))
                        if id(other) in known:
                            near.append(known[id(other)])
                        else:
                            following.append(other)
                if not following:
                    break
                frontier = following
        result[id(node)] = _common(near)
    return result


def module_clusters(graph: Graph, paths: dict[int, list[str]]) -> tuple[list[dict], dict[int, str | None]]:
    """Nested clusters of module paths (a path holding every node, a path with one node, and a path
    holding exactly what its only child holds are left out) and each node's innermost cluster."""
    nodes = list(graph)
    members: dict[tuple, list[int]] = {}
    for node in nodes:
        path = tuple(paths[id(node)])
        for depth in range(1, len(path) + 1):
            members.setdefault(path[:depth], []).append(id(node))
    total = len(nodes)
    kept = [p for p, m in members.items() if 2 <= len(m) < total]
    kept_set = set(kept)
    # a path whose nodes are exactly one kept descendant's: keep the deeper one only
    by_nodes: dict[frozenset, tuple] = {}
    for path in sorted(kept, key=len, reverse=True):
        key = frozenset(members[path])
        if key in by_nodes:
            kept_set.discard(path)
        else:
            by_nodes[key] = path
    types = _module_types(nodes)
    position = {id(n): i for i, n in enumerate(nodes)}
    ordered = sorted(kept_set, key=lambda p: (len(p), min(position[m] for m in members[p])))
    ids = {path: f"c{i}" for i, path in enumerate(ordered)}
    clusters = []
    for path in ordered:
        parent = next((path[:d] for d in range(len(path) - 1, 0, -1) if path[:d] in kept_set), None)
        label = ".".join(path[len(parent) :] if parent else path)
        clusters.append(
            {
                "id": ids[path],
                "path": ".".join(path),
                "label": label,
                "type": types.get(".".join(path), ""),
                "parent": ids[parent] if parent else None,
                "size": len(members[path]),
            }
        )
    node_cluster: dict[int, str | None] = {}
    for node in nodes:
        path = tuple(paths[id(node)])
        inner = next((path[:d] for d in range(len(path), 0, -1) if path[:d] in kept_set), None)
        node_cluster[id(node)] = ids[inner] if inner else None
    return clusters, node_cluster


# ------------------------------------------------------------------------------- data


def _short_op(op: str) -> str:
    parts = op.split(".")
    if parts[0] in ("aten", "xir", "quantized_decomposed", "dim_order_ops") and len(parts) >= 2:
        return parts[1] if parts[0] == "aten" else f"{parts[0].split('_')[0]}.{parts[1]}"
    return op


def _type(value: Value) -> str:
    return str(value.type)


def report_data(
    graph: Graph,
    plan,
    changes: list[dict] | None = None,
    title: str = "xir partition",
    subtitle: str = "",
    passes_recorded: bool = True,
    pipeline: str = "",
) -> dict:
    """Everything the page shows, as JSON-able data: a record per displayed input, op and the
    output, the edges between them, the module clusters, the delegates and the summary by op."""
    namer = Namer(graph)
    records, ident, clusters = _records(graph, plan, namer)
    groups, summary = _groups_and_summary(graph, plan)
    return {
        "title": title,
        "subtitle": subtitle,
        "pipeline": pipeline,
        "nodes": records,
        "edges": _edges(graph, namer, ident),
        "clusters": clusters,
        "groups": groups,
        "summary": summary,
        "passes": changes or [],
        "passes_recorded": passes_recorded,
    }


OUTPUT_KEY = "out"  # the record of the graph's outputs


def _records(graph: Graph, plan, namer: Namer) -> tuple[list[dict], dict[int, str], list]:
    """The records (displayed inputs, ops, the output), the record id of each input and node, and
    the module clusters."""
    group_of: dict[int, Any] = {}
    implicit_of: dict[int, Any] = {}
    for group in plan.groups:
        for node in group.nodes:
            group_of[id(node)] = group
        for node in group.implicit:
            implicit_of[id(node)] = group
    rejected = {id(r.node): r for r in plan.rejected}
    paths = module_paths(graph)
    clusters, node_cluster = module_clusters(graph, paths)

    records: list[dict] = []
    ident: dict[int, str] = {}
    for value in graph.inputs:
        if value.input_kind in DISPLAYED_INPUTS:
            key = f"i{len(ident)}"
            ident[id(value)] = key
            records.append(
                {
                    "id": key,
                    "kind": "input",
                    "op": value.input_kind.value,
                    "short": value.input_kind.value,
                    "name": namer.ref(value),
                    "type": _type(value),
                    "types": [_type(value)],
                    "group": None,
                    "cluster": None,
                    "line": f"{value.input_kind.value} {namer.ref(value)}: {value.type}",
                }
            )
    for index, node in enumerate(graph):
        ident[id(node)] = f"n{index}"
        records.append(
            _op_record(
                node,
                f"n{index}",
                namer,
                group_of.get(id(node)),
                implicit_of.get(id(node)),
                rejected.get(id(node)),
                node_cluster.get(id(node)),
                ".".join(paths[id(node)]),
            )
        )
    records.append(
        {
            "id": OUTPUT_KEY,
            "kind": "output",
            "op": "return",
            "short": "output",
            "name": ", ".join(namer.ref(v) for v in graph.outputs),
            "type": ", ".join(_type(v) for v in graph.outputs),
            "types": [_type(v) for v in graph.outputs],
            "group": None,
            "cluster": None,
            "line": "return " + ", ".join(namer.ref(v) for v in graph.outputs),
        }
    )
    return records, ident, clusters


def _op_record(node, key: str, namer: Namer, group, folded_into, rejection, cluster, module: str) -> dict:
    """The record of one op: its delegate (or the one its Q/DQ folds into), or why it is outside."""
    origin = node.origin or (
        node.fx_node.meta.get("xir_origin") if node.fx_node is not None and hasattr(node.fx_node, "meta") else None
    )
    status = (
        "delegated"
        if group is not None
        else "folded"
        if folded_into is not None
        else "outside"
        if rejection is not None and is_compute(node.op)
        else "other"
    )
    record = {
        "id": key,
        "kind": "op",
        "op": node.op,
        "short": _short_op(node.op),
        "name": ", ".join(namer.ref(r) for r in node.results),
        "type": _type(node.results[0]) if node.results else "",
        "types": [_type(r) for r in node.results],
        "group": group.index if group is not None else (folded_into.index if folded_into is not None else None),
        "status": status,
        "cluster": cluster,
        "module": module,
        "origin": origin,
        "line": print_node(node, namer),
        "operands": [
            f"{namer.ref(v)}: {v.type}" + (f" ({v.input_kind.value})" if v.is_input else "") for v in node.inputs()
        ],
    }
    if rejection is not None:
        record["rule"], record["reason"] = rejection.rule, rejection.reason
        if rejection.check:
            record["check"] = rejection.check
    if folded_into is not None:
        record["reason"] = f"Q/DQ folded into delegate {folded_into.tag}"
    return record


def _edges(graph: Graph, namer: Namer, ident: dict[int, str]) -> list[dict]:
    """The edges between records: source and target are record ids; ``output`` is the result's
    index, ``input`` the reading position."""

    def edge(value, target: str, position: int) -> dict | None:
        source = ident.get(id(value.producer)) if value.producer is not None else ident.get(id(value))
        if source is None:
            return None
        return {
            "source": source,
            "target": target,
            "value": namer.ref(value),
            "type": _type(value),
            "output": value.index if value.producer is not None else 0,
            "input": position,
        }

    edges = []
    for node in graph:
        seen = set()
        for position, value in enumerate(node.inputs()):
            made = edge(value, ident[id(node)], position)
            if made is not None and (made["source"], id(value)) not in seen:
                seen.add((made["source"], id(value)))
                edges.append(made)
    for position, value in enumerate(graph.outputs):
        made = edge(value, OUTPUT_KEY, position)
        if made is not None:
            edges.append(made)
    return edges


def _groups_and_summary(graph: Graph, plan) -> tuple[list[dict], dict]:
    """The delegates (colours, sizes, ops), and the summary: counts, and every op inside and
    outside with the reasons it stayed out."""
    groups = []
    for group in plan.groups:
        fill, stroke = color_of(group.index)
        groups.append(
            {
                "index": group.index,
                "tag": group.tag,
                "fill": fill,
                "stroke": stroke,
                "nodes": len(group.nodes),
                "implicit": len(group.implicit),
                "ops": dict(Counter(n.op for n in group.nodes).most_common()),
            }
        )
    inside = Counter(n.op for g in plan.groups for n in g.nodes)
    outside_rows = [r for r in plan.rejected if is_compute(r.node.op)]
    outside = Counter(r.node.op for r in outside_rows)
    reasons: dict[str, Counter] = {}
    for r in outside_rows:
        reasons.setdefault(r.node.op, Counter())[f"{r.rule}: {r.reason}"] += 1
    by_op = [
        {
            "op": op,
            "inside": inside.get(op, 0),
            "outside": outside.get(op, 0),
            "reasons": [f"{text}" + (f" (x{n})" if n > 1 else "") for text, n in reasons.get(op, Counter()).items()],
        }
        for op in sorted(set(inside) | set(outside), key=lambda o: (-outside.get(o, 0), -inside.get(o, 0), o))
    ]
    summary = {
        "nodes": len(graph.nodes),
        "delegated": sum(inside.values()),
        "outside": len(outside_rows),
        "delegates": len(plan.groups),
        "by_op": by_op,
    }
    return groups, summary


# ------------------------------------------------------------------------------- page


def _table(header: list[str], rows: list[list[str]], cls: str = "") -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _summary_html(data: dict) -> str:
    s = data["summary"]
    parts = [
        f'<p class="lead">{s["delegated"]} of {s["nodes"]} IR nodes delegated to XNNPACK in {s["delegates"]} '
        f"delegate(s); {s['outside']} compute op(s) left outside.</p>",
        "<h2>Delegates</h2>",
    ]
    rows = []
    for g in data["groups"]:
        swatch = f'<span class="swatch" style="background:{g["fill"]};border-color:{g["stroke"]}"></span>'
        ops = ", ".join(f"{html.escape(op)}" + (f" x{n}" if n > 1 else "") for op, n in g["ops"].items())
        folded = f" ({g['implicit']} Q/DQ folded)" if g["implicit"] else ""
        rows.append(
            [
                f'{swatch}<a href="#search=delegate:{g["tag"]}" class="tag-link">{g["tag"]}</a>',
                f"{g['nodes']}{folded}",
                ops,
            ]
        )
    parts.append(_table(["delegate", "nodes", "ops"], rows) if rows else "<p>No delegate.</p>")
    parts.append("<h2>Ops inside and outside, by op</h2>")
    rows = [
        [
            html.escape(r["op"]),
            str(r["inside"] or ""),
            str(r["outside"] or ""),
            "<br>".join(html.escape(t) for t in r["reasons"]),
        ]
        for r in s["by_op"]
    ]
    parts.append(_table(["op", "inside", "outside", "rule: reason (left outside)"], rows, "by-op"))
    parts.append("<h2>Passes that changed the graph</h2>")
    if data["pipeline"]:
        parts.append(f'<p class="pipeline">pipeline: <code>{html.escape(data["pipeline"])}</code></p>')
    if not data["passes_recorded"]:
        parts.append(
            "<p>Not recorded: lower with <code>XnnpackPartitioner(instruments=[xir_tools.html_report."
            "RecordPasses()])</code> (<code>xir explain --html</code> does) to see them.</p>"
        )
    elif not data["passes"]:
        parts.append("<p>No pass changed the graph.</p>")
    else:
        rows = []
        for c in data["passes"]:
            did = ", ".join(f"{html.escape(k)} x{v}" for k, v in (c["rules"] or c["folded"]).items())
            created = ", ".join(f"{html.escape(k)} x{v}" for k, v in c["created"].items())
            removed = ", ".join(f"{html.escape(k)} x{v}" for k, v in c["removed"].items())
            rows.append(
                [
                    f'<a href="#pass-{c["index"]}">{c["index"]:02d} {html.escape(c["name"])}</a>',
                    f"{c['nodes_before']} &rarr; {c['nodes_after']}",
                    did,
                    created,
                    removed,
                ]
            )
        parts.append(_table(["pass", "nodes", "rules fired / folded", "ops created", "ops removed"], rows, "passes"))
    return "\n".join(parts)


def _diff_html(diff: str) -> str:
    out = []
    for line in diff.splitlines():
        cls = (
            "add"
            if line.startswith("+") and not line.startswith("+++")
            else "del"
            if line.startswith("-") and not line.startswith("---")
            else "hunk"
            if line.startswith("@@")
            else ""
        )
        out.append(f'<span class="{cls}">{html.escape(line)}</span>')
    return "".join(out)  # each line a block


def _passes_html(data: dict) -> str:
    if not data["passes"]:
        return (
            "<p>No IR diff: "
            + (
                "no pass changed the graph."
                if data["passes_recorded"]
                else "the passes were not recorded (see the summary)."
            )
            + "</p>"
        )
    parts = []
    for c in data["passes"]:
        parts.append(
            f'<details class="pass" id="pass-{c["index"]}"><summary><b>{c["index"]:02d} '
            f"{html.escape(c['pass'])}</b> &mdash; nodes {c['nodes_before']} &rarr; {c['nodes_after']}"
            f'</summary><pre class="diff">{_diff_html(c["diff"])}</pre></details>'
        )
    return "\n".join(parts)


def _asset(name: str) -> str:
    return (ASSETS / name).read_text(encoding="utf-8")


def _script_safe(text: str) -> str:
    """xir's own script (report.js, dagre) inline in a <script> element: no ``</`` ends it early."""
    return text.replace("</", "<\\/")


# every character that can end or change the meaning of a <script> element's text, as a JSON escape
_JSON_IN_SCRIPT = str.maketrans(
    {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
)


def script_json(data: Any) -> str:
    """``data`` as JSON that is inert inside a <script> element: model text (op names, attributes,
    module names) can hold ``</script>``, ``<!--`` or ``<script``, which would end the element,
    or keep it open to the end of the page; escaped, they are the same JSON strings."""
    return json.dumps(data, separators=(",", ":")).translate(_JSON_IN_SCRIPT)


_PLACEHOLDER = re.compile(r"/\*\{\{[A-Z_]+\}\}\*/|\{\{[A-Z_]+\}\}")  # the template's markers


def render_html(data: dict) -> str:
    """The page: the template with its placeholders filled in one pass, so that text from the model
    that looks like a placeholder stays text (filled one after another, a later placeholder's
    marker in the summary would get the data JSON inserted into the page's HTML)."""
    replacements = {
        "{{TITLE}}": html.escape(data["title"]),
        "{{SUBTITLE}}": html.escape(data["subtitle"]),
        "{{SUMMARY}}": _summary_html(data),
        "{{PASSES}}": _passes_html(data),
        "{{PASS_COUNT}}": str(len(data["passes"])),
        "/*{{STYLE}}*/": _asset("report.css"),
        "/*{{DAGRE}}*/": _script_safe(_asset("dagre.min.js")),
        "/*{{SCRIPT}}*/": _script_safe(_asset("report.js")),
        "/*{{DATA}}*/": script_json(data),
    }
    return _PLACEHOLDER.sub(lambda m: replacements[m.group(0)], _asset("report.html"))


def write_html(
    path: str | os.PathLike,
    graph: Graph,
    plan,
    changes: list[dict] | None = None,
    passes_recorded: bool = True,
    title: str = "xir partition",
    subtitle: str = "",
    pipeline: str = "",
) -> Path:
    """Write the page to ``path`` through a temporary file and a rename (a failed write leaves what
    was there); ``path`` is checked before the page is made."""
    path = check_writable(path)
    data = report_data(
        graph, plan, changes, title=title, subtitle=subtitle, passes_recorded=passes_recorded, pipeline=pipeline
    )
    return write_atomic(path, render_html(data))


def write_partitioner_report(partitioner, path: str | os.PathLike, title: str | None = None) -> Path:
    """The last partition() of an ``XnnpackPartitioner`` as a page, with the pass diffs
    when the partitioner's instruments include a :class:`RecordPasses`."""
    if partitioner.last_plan is None or partitioner.last_graph is None:
        raise RuntimeError("partition() has not run yet: lower with this partitioner first")
    recorder = find_recorder(getattr(partitioner, "instruments", ()))
    options = partitioner.options
    subtitle = ", ".join(
        x for x in ("bf16" if options.enable_bf16 else "no bf16", "per op" if options.per_op_mode else "") if x
    )
    return write_html(
        path,
        partitioner.last_graph,
        partitioner.last_plan,
        recorder.changes if recorder is not None else None,
        passes_recorded=recorder is not None,
        title=title or "xir partition",
        subtitle=subtitle,
        pipeline=getattr(partitioner, "pipeline_text", ""),
    )


def write_ir_report(path: str | os.PathLike, graph: Graph, options=None, title: str = "xir partition") -> Path:
    """The page for an IR graph (an IR text file's): plans the partition here, as partition() would."""
    from lowering.capability import Options
    from lowering.partition import plan_partition

    plan = plan_partition(graph, options or Options())
    return write_html(path, graph, plan, None, passes_recorded=False, title=title)


__all__ = ["RecordPasses", "render_html", "report_data", "write_html", "write_ir_report", "write_partitioner_report"]
