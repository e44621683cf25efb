"""The HTML partition report (xir_tools/html_report.py), rendered by headless Chromium: a small CNN
with an op left outside, and the 1-layer Qwen2 decode step of test_decoder.py. The DOM Chromium
builds (the page lays the graph out itself, with the vendored dagre) is checked: one element per IR
node, the delegate colours, the rule and reason of each node left outside, module boxes, and the
search. Screenshots are kept in test-artifacts/ (or $XIR_TEST_ARTIFACTS).

Without Chromium (Debian: apt-get install chromium) these tests skip and say why; CI requires it
(XIR_REQUIRE_BROWSER=1, tests/security/browser.py)."""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path

import pytest
import torch

from tests.security.browser import Element, chromium, dump_dom, graph_nodes, run_chromium

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("XIR_TEST_ARTIFACTS", ROOT / "test-artifacts"))


def screenshot(page: Path, png: Path, fragment: str = "", size: str = "1600,1000") -> Path:
    png.parent.mkdir(parents=True, exist_ok=True)
    run_chromium(page.as_uri() + fragment, f"--window-size={size}", f"--screenshot={png}")
    assert png.exists() and png.stat().st_size > 10_000
    return png


# ------------------------------------------------------------------------------ models


class SmallCNN(torch.nn.Module):
    """conv, batch norm, relu, max pool, conv, relu, mean, linear; and a cumulative sum, which
    XNNPACK has no op for (left outside, between two delegates)."""

    def __init__(self):
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 3, padding=1),
            torch.nn.BatchNorm2d(8),
            torch.nn.ReLU(),
            torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(8, 16, 3, padding=1),
            torch.nn.ReLU(),
        )
        self.head = torch.nn.Linear(16, 10)

    def forward(self, x):
        h = self.features(x).mean(dim=(2, 3))
        return self.head(torch.cumsum(h, dim=1))


def lower_with_report(ep, html: Path, **options):
    from lowering import XnnpackPartitioner, to_edge_transform_and_lower
    from xir_tools.html_report import RecordPasses, write_partitioner_report

    partitioner = XnnpackPartitioner(instruments=[RecordPasses()], **options)
    to_edge_transform_and_lower(ep, partitioner=[partitioner])
    write_partitioner_report(partitioner, html)  # the Python API: the page written, and the text report
    text = partitioner.report()
    assert text.startswith("xir partition: ")
    return partitioner


@functools.lru_cache(maxsize=None)
def cnn_report(folder: Path):
    torch.manual_seed(0)
    ep = torch.export.export(SmallCNN().eval(), (torch.randn(1, 3, 16, 16),))
    page = folder / "cnn.html"
    return page, lower_with_report(ep, page)


@functools.lru_cache(maxsize=None)
def decoder_report(folder: Path):
    from tests.lowering.test_decoder import decoder

    ep = decoder("float32")[0]
    page = folder / "decoder.html"
    return page, lower_with_report(ep, page)


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    chromium()
    return tmp_path_factory.mktemp("html")


def check_page(dom: Element, partitioner) -> list[Element]:
    """The DOM against the plan: every IR node once, delegate colours, reasons of the nodes outside."""
    from lowering.report import is_compute
    from xir_tools.html_report import color_of

    graph, plan = partitioner.last_graph, partitioner.last_plan
    nodes = list(graph)
    elements = graph_nodes(dom)
    assert len(elements) == len(nodes)
    by_id = {e.attrs["data-id"]: e for e in elements}
    assert set(by_id) == {f"n{i}" for i in range(len(nodes))}
    fills: dict[str, set] = {}
    for i, node in enumerate(nodes):
        element = by_id[f"n{i}"]
        assert element.attrs["data-op"] == node.op
        rect = next(c for c in element.children if c.tag == "rect")
        group = plan.group_of(node)
        if group is not None:
            assert element.attrs["data-status"] == "delegated" and element.attrs["data-group"] == group.tag
            assert rect.attrs["fill"] == color_of(group.index)[0]
            fills.setdefault(group.tag, set()).add(rect.attrs["fill"])
    assert len({next(iter(f)) for f in fills.values()}) == len(plan.groups)  # a colour per delegate
    assert all(len(f) == 1 for f in fills.values())
    outside = [r for r in plan.rejected if is_compute(r.node.op)]
    for rejection in outside:
        element = by_id[f"n{nodes.index(rejection.node)}"]
        assert "outside" in element.classes
        assert element.attrs["data-rule"] == rejection.rule and element.attrs["data-reason"] == rejection.reason
        assert element.attrs.get("data-check", "") == rejection.check  # the named check, to find its test
        if rejection.check:
            assert f"check: {rejection.check}" in element.find(lambda e: e.tag == "title").text
        shown = element.find(lambda e: "reason-label" in e.classes).text
        assert shown.startswith(f"\u2717 {rejection.rule}: {rejection.reason[:20]}")
        assert rejection.reason in element.find(lambda e: e.tag == "title").text  # all of it on hover
    legend = dom.find(lambda e: e.attrs.get("id") == "legend").text
    for group in plan.groups:
        assert f"{group.tag} ({len(group.nodes)})" in legend
    return elements


def visible(element: Element) -> bool:
    return "display: none" not in element.attrs.get("style", "")


# -------------------------------------------------------------------------------- tests


def test_cnn_page(folder):
    page, partitioner = cnn_report(folder)
    plan = partitioner.last_plan
    assert len(plan.groups) == 2  # cumsum splits the network
    assert [r.node.op for r in plan.rejected if r.node.op == "aten.cumsum"] == ["aten.cumsum"]
    text = page.read_text()
    assert (
        "<script src" not in text
        and "<link" not in text
        and "http://" not in text.replace("http://www.w3.org/2000/svg", "")
    )  # self-contained: nothing to fetch
    dom = dump_dom(page)
    elements = check_page(dom, partitioner)
    assert all(visible(e) for e in elements)  # a small graph opens expanded
    assert dom.find(lambda e: e.tag == "g" and "cluster" in e.classes and e.attrs.get("data-path") == "features")
    # edges carry the value's type (shown on hover)
    edge_titles = [e.find(lambda t: t.tag == "title").text for e in dom.find_all(lambda e: "edge" in e.classes)]
    assert any(re.fullmatch(r"%\d+: f32\[1,8,16,16\]", t) for t in edge_titles), edge_titles[:5]
    # the summary and the passes that changed the graph, with their diffs
    summary = dom.find(lambda e: e.attrs.get("id") == "tab-summary").text
    assert "ops inside and outside, by op".lower() in summary.lower() and "aten.cumsum" in summary
    assert "op: XNNPACK has no rule for this op" in summary or "cumsum" in summary
    passes = dom.find(lambda e: e.attrs.get("id") == "tab-passes")
    names = [d.find(lambda e: e.tag == "b").text for d in passes.find_all(lambda e: e.tag == "details")]
    assert any("fold-batch-norm" in n for n in names), names
    assert passes.find(lambda e: e.tag == "span" and "del" in e.classes and "batch_norm" in e.text)
    screenshot(page, ARTIFACTS / "partition-report-cnn.png")


def test_cnn_search(folder):
    page, partitioner = cnn_report(folder)
    dom = dump_dom(page, "#search=cumsum")
    matched = [e for e in graph_nodes(dom) if "match" in e.classes]
    assert [e.attrs["data-op"] for e in matched] == ["aten.cumsum"]
    assert dom.find(lambda e: e.attrs.get("id") == "search-count").text == "1 match"
    results = dom.find(lambda e: e.attrs.get("id") == "search-results")
    assert results is not None and "cumsum" in results.text
    dom = dump_dom(page, "#search=delegate:tag1")
    matched = {e.attrs["data-id"] for e in graph_nodes(dom) if "match" in e.classes}
    nodes = list(partitioner.last_graph)
    assert matched == {f"n{nodes.index(n)}" for n in partitioner.last_plan.groups[1].nodes}


def test_decoder_page(folder):
    page, partitioner = decoder_report(folder)
    dom = dump_dom(page)
    elements = check_page(dom, partitioner)
    reasons = {e.attrs["data-op"]: e.attrs.get("data-reason") for e in elements if "outside" in e.classes}
    assert "aten.embedding" in reasons and reasons["aten.embedding"]
    # module boxes from nn_module_stack: the decoder layer and its attention
    paths = {e.attrs["data-path"] for e in dom.find_all(lambda e: "cluster" in e.classes or "collapsed" in e.classes)}
    assert any(p.endswith("layers.0") for p in paths), sorted(paths)
    assert any(p.endswith("layers.0.self_attn") for p in paths), sorted(paths)
    # a pass-created node is marked with its pass, and is placed in the module of what it reads
    made = [e for e in elements if "xnnpack.safe-softmax" in e.find(lambda t: t.tag == "title").text]
    assert made and all("self_attn" in e.attrs["data-module"] for e in made)
    # search: the softmax, inside its boxes
    dom = dump_dom(page, "#search=_softmax")
    matched = [e for e in graph_nodes(dom) if "match" in e.classes]
    assert [e.attrs["data-op"] for e in matched] == ["aten._softmax"] and visible(matched[0])
    # a node opened from the URL: selected, its details (IR line, reason) in the side panel
    cache = next(e.attrs["data-id"] for e in elements if e.attrs["data-op"] == "aten.index_put")
    dom = dump_dom(page, f"#zoom=0.85&node={cache}")
    assert "selected" in next(e for e in graph_nodes(dom) if e.attrs["data-id"] == cache).classes
    side = dom.find(lambda e: e.attrs.get("id") == "side").text
    assert "left outside" in side and reasons["aten.index_put"] in side and "= aten.index_put(" in side
    screenshot(page, ARTIFACTS / "partition-report-decoder.png")
    screenshot(page, ARTIFACTS / "partition-report-decoder-search.png", "#search=outside")
    # the picture in the README (docs/partition-report.png)
    screenshot(page, ARTIFACTS / "partition-report-decoder-node.png", f"#zoom=0.85&node={cache}")


def test_large_graphs_open_with_repeated_blocks_collapsed(folder):
    """A 40-block MLP (~250 nodes with its module boxes): the page opens with most blocks collapsed
    into boxes (each with its node count), one element per IR node still in the DOM; a search opens
    the box that holds the match."""

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2, self.norm = torch.nn.Linear(16, 32), torch.nn.Linear(32, 16), torch.nn.LayerNorm(16)

        def forward(self, x):
            return self.norm(x + self.fc2(torch.nn.functional.gelu(self.fc1(x))))

    class Stack(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = torch.nn.ModuleList(Block() for _ in range(40))

        def forward(self, x):
            for block in self.blocks:
                x = block(x)
            return x

    ep = torch.export.export(Stack().eval(), (torch.randn(2, 16),))
    page = folder / "stack.html"
    partitioner = lower_with_report(ep, page)
    count = len(list(partitioner.last_graph))
    assert count > 260
    dom = dump_dom(page)
    elements = graph_nodes(dom)
    assert len(elements) == count
    boxes = dom.find_all(lambda e: e.tag == "g" and "collapsed" in e.classes)
    assert len(boxes) >= 30 and all(re.search(r"\d+ nodes", b.text) for b in boxes)
    assert sum(visible(e) for e in elements) < count // 2
    dom = dump_dom(page, "#search=blocks.37")
    matched = [e for e in graph_nodes(dom) if "match" in e.classes]
    assert matched and all(visible(e) and e.attrs["data-module"].startswith("blocks.37") for e in matched)
    screenshot(page, ARTIFACTS / "partition-report-stack.png")


def test_a_2000_node_graph_stays_readable(folder):
    """120 blocks of 17 ops (IR text with module stacks, planned here: no lowering): the page opens
    with the blocks collapsed; 'expand all' opens boxes while at most 900 items show, which dagre
    lays out with the boxes drawn (no fallback, no note); a search opens the box of its matches."""
    import types

    import xir
    from lowering.capability import Options
    from lowering.partition import plan_partition
    from xir_tools.html_report import write_html

    lines = ["graph @forward {", "  param %w: f32[16,16]", "  input %x: f32[2,16]"]
    previous, index = "%x", 0
    for block in range(120):
        start = previous
        for op in range(16):
            kind = "aten.linear" if op % 2 == 0 else "aten.relu"
            operands = f"{previous}, %w" if kind == "aten.linear" else previous
            lines.append(f"  %{index}: f32[2,16] = {kind}({operands})")
            previous, index = f"%{index}", index + 1
        lines.append(f"  %{index}: f32[2,16] = aten.add.Tensor({start}, {previous})")
        previous, index = f"%{index}", index + 1
    lines += [f"  return {previous}", "}"]
    graph = xir.parse_graph("\n".join(lines) + "\n")
    plan = plan_partition(graph, Options())
    for position, node in enumerate(graph):  # the modules, as torch.export records them
        stack = {
            "L__self__": ("", "Net"),
            "L__self___blocks": ("blocks", "ModuleList"),
            f"L__self___blocks_{position // 17}": (f"blocks.{position // 17}", "model.Block"),
        }
        node.fx_node = types.SimpleNamespace(meta={"nn_module_stack": stack})
    page = write_html(folder / "big.html", graph, plan, None, passes_recorded=False)
    dom = dump_dom(page)
    elements = graph_nodes(dom)
    assert len(elements) == 2040
    boxes = dom.find_all(lambda e: e.tag == "g" and "collapsed" in e.classes)
    assert len(boxes) == 119 and sum(visible(e) for e in elements) == 17  # the first block open
    dom = dump_dom(page, "#expand=all")
    shown = sum(visible(e) for e in graph_nodes(dom))
    assert 500 < shown <= 900
    assert dom.find(lambda e: e.attrs.get("id") == "layout-note").text == ""  # dagre laid it out, boxes and all
    dom = dump_dom(page, "#search=blocks.97")
    matched = [e for e in graph_nodes(dom) if "match" in e.classes]
    assert len(matched) == 17 and all(visible(e) for e in matched)
    screenshot(page, ARTIFACTS / "partition-report-2040-nodes.png", "#search=blocks.97")
