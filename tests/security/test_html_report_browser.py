"""Issue 28, item 3: the HTML report (xir_tools/html_report.py) runs no script from the model, and
draws graphs of any size; and the report and the Model Explorer node data are written through a
temporary file, so a failed write loses nothing.

The pages are opened in headless Chromium (tests/security/browser.py): a payload's ``onerror``
would set ``data-pwned`` on the page's <html> element, which the DOM Chromium dumps would show."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
import time
import types
from pathlib import Path

import xir
from lowering.capability import Options
from lowering.partition import plan_partition
from tests.security.browser import chromium, dom_text, drawn, dump_dom, graph_nodes
from xir_tools.html_report import render_html, report_data, write_html

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = "<img src=x onerror=document.documentElement.dataset.pwned=1>"


def plan(graph):
    return plan_partition(graph, Options())


def not_pwned(dom) -> None:
    html = dom.find(lambda e: e.tag == "html")
    assert "data-pwned" not in html.attrs, "the model's text ran as script in the page"


def all_drawn(dom, graph) -> list:
    """Every IR node has its element, placed by the layout and shown."""
    elements = graph_nodes(dom)
    assert len(elements) == len(list(graph)) and all(drawn(e) for e in elements)
    return elements


# ---------------------------------------------------------------------------- payloads


def test_an_attribute_holding_a_placeholder_and_markup_runs_no_script(tmp_path):
    """The issue's 5-line .xir: a gelu whose ``approximate`` holds the data placeholder's marker and
    an <img onerror>. Left outside (the reason quotes the attribute), it reaches the summary;
    filled one placeholder after another, the page put the data JSON (raw ``<img ...>``) there."""
    payload = "/*{{DATA}}*/" + SCRIPT
    source = tmp_path / "model.xir"
    source.write_text(
        textwrap.dedent(f"""\
        graph @forward {{
          input %x: f32[2,16]
          %0: f32[2,16] = aten.gelu(%x) {{approximate={json.dumps(payload)}}}
          return %0
        }}
        """)
    )
    graph = xir.parse_graph(source.read_text())
    page = write_html(
        tmp_path / "report.html",
        graph,
        plan(graph),
        None,
        passes_recorded=False,
        title=f"xir partition: {source.name}",
        subtitle="IR text, planned as it is",
    )
    dom = dump_dom(page)
    not_pwned(dom)
    [element] = all_drawn(dom, graph)
    assert payload in element.attrs["data-reason"]  # the text, shown as text
    assert payload in dom.find(lambda e: e.attrs.get("id") == "tab-summary").text


def test_a_submodule_named_like_a_comment_does_not_blank_the_page(tmp_path):
    """A submodule named ``<!--<script>`` (``add_module`` takes the name; torch.export records it in
    ``nn_module_stack`` as below): in the data's <script> element it opened a comment and a script,
    so the element ran to the end of the page, and the page's own script never ran."""
    lines = ["graph @forward {", "  input %x: f32[2,16]"]
    lines += [f"  %{i}: f32[2,16] = aten.relu({'%x' if i == 0 else f'%{i - 1}'})" for i in range(3)]
    lines += ["  return %2", "}"]
    graph = xir.parse_graph("\n".join(lines) + "\n")
    planned = plan(graph)
    name = "<!--<script>"
    root = {"L__self__": ("", "__main__.Net")}
    inner = {**root, f"L__self__{name}": (name, "torch.nn.modules.container.Sequential")}
    for node, stack in zip(graph, (inner, inner, root)):  # two nodes in the submodule: a module box
        node.fx_node = types.SimpleNamespace(meta={"nn_module_stack": stack})
    page = write_html(tmp_path / "report.html", graph, planned, None, passes_recorded=False)
    dom = dump_dom(page)
    all_drawn(dom, graph)
    box = dom.find(lambda e: "cluster" in e.classes and e.attrs.get("data-path") == name)
    assert box is not None  # the module's box, its name as text


def test_the_data_is_inert_in_its_script_element():
    """The data JSON in the page has none of ``<``, ``>`` (``</script>`` ends its element, and
    ``<!--<script>`` keeps it open past its end tag), ``&`` (read as markup by an XHTML parser),
    U+2028, U+2029 (they end a JavaScript string in older engines), and reads back as the data."""
    text = "</script><!--<script>&amp;" + SCRIPT + "\u2028\u2029"
    graph = xir.parse_graph(
        textwrap.dedent(f"""\
        graph @forward {{
          input %x: f32[2,16]
          %0: f32[2,16] = aten.gelu(%x) {{approximate={json.dumps(text)}}}
          return %0
        }}
        """)
    )
    data = report_data(graph, plan(graph), None, passes_recorded=False)
    page = render_html(data)
    embedded = re.search(r'<script id="xir-data" type="application/json">(.*?)</script>', page, re.S).group(1)
    assert not set(embedded) & {"<", ">", "&", "\u2028", "\u2029"}
    assert json.loads(embedded) == json.loads(json.dumps(data))


# ------------------------------------------------------------------------- large graphs


def chain(length: int, block: int = 0) -> str:
    """IR text: a chain of relus; with ``block``, a residual add closing every ``block`` ops and
    a cumulative sum (no XNNPACK op: left outside) opening every tenth block."""
    lines = ["graph @forward {", "  input %x: f32[2,16]"]
    previous, start = "%x", "%x"
    for i in range(length):
        if block and i % block == block - 1:
            lines.append(f"  %{i}: f32[2,16] = aten.add.Tensor({start}, {previous})")
            start = f"%{i}"
        elif block and i % (10 * block) == 0:
            lines.append(f"  %{i}: f32[2,16] = aten.cumsum({previous}) {{dim=1}}")
        else:
            lines.append(f"  %{i}: f32[2,16] = aten.relu({previous})")
        previous = f"%{i}"
    return "\n".join(lines + [f"  return {previous}", "}"]) + "\n"


def test_a_chain_of_3000_nodes_draws(tmp_path):
    """dagre's layout recursed along the chain and overflowed the browser's stack: nothing drawn.
    Past what dagre takes, the page lays the graph out in plain layers, and says so."""
    graph = xir.parse_graph(chain(3000))
    page = write_html(tmp_path / "chain.html", graph, plan(graph), None, passes_recorded=False)
    dom = dump_dom(page)
    elements = all_drawn(dom, graph)
    y = [float(re.search(r"translate\(([-\d.e]+),([-\d.e]+)\)", e.attrs["transform"]).group(2)) for e in elements]
    assert y == sorted(y) and len(set(y)) == len(y)  # one below the other, in program order
    assert "plain layered layout" in dom.find(lambda e: e.attrs.get("id") == "layout-note").text


def test_a_20000_node_graph_opens_and_draws(tmp_path):
    """20,000 nodes (residual blocks, some ops left outside) open in seconds: every node drawn, and
    a node named in the URL selected with its details, as on a small graph."""
    graph = xir.parse_graph(chain(20000, block=20))
    page = write_html(tmp_path / "big.html", graph, plan(graph), None, passes_recorded=False)
    chromium()
    started = time.monotonic()
    text = dom_text(page, "#node=n19800", budget_ms=30000)
    assert time.monotonic() - started < 30
    assert 'data-rendered="true"' in text, "the page's script did not finish"
    tags = re.findall(r'<g class="node op[^"]*"[^>]*>', text)
    assert len(tags) == 20000
    assert sum('transform="translate(' in t and "display: none" not in t for t in tags) == 20000
    selected = [t for t in tags if 'data-id="n19800"' in t]
    assert len(selected) == 1 and "selected" in selected[0] and 'data-op="aten.cumsum"' in selected[0]
    assert "%19800: f32[2,16] = aten.cumsum(%19799) {dim=1}" in text  # its IR line, in the side panel


# ----------------------------------------------------------------------- atomic writes


def write_with_a_size_limit(tmp_path: Path, code: str) -> subprocess.CompletedProcess:
    """Run ``code`` in a Python whose files cannot grow past 64 KiB (RLIMIT_FSIZE, as a full disk
    or a quota would stop a write partway), printing the error it raises."""
    prologue = textwrap.dedent("""\
        import resource, signal, sys
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (65536, 65536))
        """)
    return subprocess.run(
        [sys.executable, "-c", prologue + textwrap.dedent(code)], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


def test_a_failed_report_write_keeps_the_old_report(tmp_path):
    """The page (over 64 KiB: dagre alone is) stops at the limit: the report that was there stays,
    whole, and no partial file is left beside it. Written in place, it was cut to 64 KiB."""
    page = tmp_path / "report.html"
    page.write_text("<p>the report of yesterday</p>")
    result = write_with_a_size_limit(
        tmp_path,
        f"""
        import xir
        from xir_tools.html_report import write_ir_report
        graph = xir.parse_graph("graph @forward {{\\n  input %x: f32[2]\\n"
                                "  %0: f32[2] = aten.relu(%x)\\n  return %0\\n}}\\n")
        try:
            write_ir_report({str(page)!r}, graph)
        except OSError as error:
            print("OSError", error.errno)
        """,
    )
    assert "OSError 27" in result.stdout, result.stdout + result.stderr  # EFBIG
    assert page.read_text() == "<p>the report of yesterday</p>"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html"]


def test_a_failed_node_data_write_keeps_the_old_file(tmp_path):
    """The Model Explorer node data of 5,000 delegated nodes (over 64 KiB) stops at the limit: the
    file that was there stays, and no partial file is left."""
    target = tmp_path / "model.pt2.xir-delegates.json"
    target.write_text('{"old": true}')
    result = write_with_a_size_limit(
        tmp_path,
        f"""
        from xir_tools.explorer.data import write_node_data
        data = {{"groups": [{{"index": 0, "stroke": "#3b78c4"}}],
                 "nodes": [{{"id": f"n{{i}}", "kind": "op", "status": "delegated", "group": 0}} for i in range(5000)]}}
        try:
            write_node_data({str(target)!r}, data, "forward (xir)")
        except OSError as error:
            print("OSError", error.errno)
        """,
    )
    assert "OSError 27" in result.stdout, result.stdout + result.stderr
    assert target.read_text() == '{"old": true}'
    assert sorted(p.name for p in tmp_path.iterdir()) == [target.name]
