"""Headless Chromium for the tests that open xir's HTML report, and a tiny DOM of what it dumps.

The page lays its graph out itself (report.js with the vendored dagre), so what a test checks is
the DOM the browser built after the page's scripts ran (``--dump-dom``). Without Chromium these
tests skip and say why (``make test`` prints the reason); with ``XIR_REQUIRE_BROWSER=1``, which CI's
``.ci/run`` sets after installing Chromium, they fail instead. ``XIR_NO_BROWSER=1`` skips them even
where Chromium is installed."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from html.parser import HTMLParser
from pathlib import Path

import pytest

NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def chromium() -> str:
    """The browser's path; skips the test when XIR_NO_BROWSER=1 or when there is none (fails it then
    with XIR_REQUIRE_BROWSER=1)."""
    if os.environ.get("XIR_NO_BROWSER") == "1":
        pytest.skip("XIR_NO_BROWSER=1: the HTML report is not opened in a browser")
    for name in NAMES:
        path = shutil.which(name)
        if path:
            return path
    why = (
        "Chromium is not installed: the HTML report tests open the page in it (Debian: apt-get install "
        "chromium; .ci/run installs it)"
    )
    if os.environ.get("XIR_REQUIRE_BROWSER") == "1":
        pytest.fail(f"{why}, and XIR_REQUIRE_BROWSER=1 requires it", pytrace=False)
    pytest.skip(why)


def run_chromium(url: str, *args: str, budget_ms: int = 15000, timeout: float = 180) -> str:
    """Chromium's stdout for ``url`` in a fresh profile (two tests at once share nothing), with no
    network traffic of its own; ``budget_ms`` of virtual time for the page's scripts."""
    with tempfile.TemporaryDirectory(prefix="xir-chromium-") as profile:
        command = [
            chromium(),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            f"--user-data-dir={profile}",
            f"--virtual-time-budget={budget_ms}",
            *args,
            url,
        ]
        result = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def dom_text(page: Path, fragment: str = "", budget_ms: int = 15000) -> str:
    """The page's DOM, serialized, once its scripts have run."""
    return run_chromium(page.as_uri() + fragment, "--dump-dom", budget_ms=budget_ms)


def dump_dom(page: Path, fragment: str = "") -> "Element":
    """The page's DOM, parsed; asserts that the page's script ran to its end."""
    root = parse(dom_text(page, fragment))
    finished = root.find(lambda e: e.tag == "body" and e.attrs.get("data-rendered") == "true")
    assert finished, "the page's script did not finish"
    return root


# ------------------------------------------------------------------------- a tiny DOM


class Element:
    def __init__(self, tag: str, attrs: dict, parent: "Element | None"):
        self.tag, self.attrs, self.parent = tag, attrs, parent
        self.children: list[Element] = []
        self.texts: list[str] = []

    @property
    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())

    @property
    def text(self) -> str:
        return "".join(self.texts) + "".join(c.text for c in self.children)

    def iter(self):
        yield self
        for child in self.children:
            yield from child.iter()

    def find_all(self, predicate) -> list["Element"]:
        return [e for e in self.iter() if predicate(e)]

    def find(self, predicate) -> "Element | None":
        return next((e for e in self.iter() if predicate(e)), None)


VOID = {"meta", "input", "br", "link", "img", "hr"}


class _Parser(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = Element("#document", {}, None)
        self.current = self.root

    def handle_starttag(self, tag, attrs):
        element = Element(tag, {k: v or "" for k, v in attrs}, self.current)
        self.current.children.append(element)
        if tag not in VOID:
            self.current = element

    def handle_startendtag(self, tag, attrs):
        self.current.children.append(Element(tag, {k: v or "" for k, v in attrs}, self.current))

    def handle_endtag(self, tag):
        element = self.current
        while element is not None and element.tag != tag:
            element = element.parent
        if element is not None and element.parent is not None:
            self.current = element.parent

    def handle_data(self, data):
        self.current.texts.append(data)


def parse(text: str) -> Element:
    parser = _Parser()
    parser.feed(text)
    return parser.root


def graph_nodes(dom: Element) -> list[Element]:
    """The page's element of each IR node (drawn or not)."""
    return dom.find_all(lambda e: e.tag == "g" and {"node", "op"} <= e.classes)


def drawn(element: Element) -> bool:
    """Placed by the layout and not hidden."""
    return "transform" in element.attrs and "display: none" not in element.attrs.get("style", "")
