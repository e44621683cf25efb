"""IR-text pass tests: IR in, pipeline, IR out, compared up to value names.

    check_pipeline('''
    graph @g {
      input %x: f32[2,3]
      %0: f32[2,3] = aten.view_copy(%x) {size=[2, 3]}
      %1: f32[2,3] = aten.relu(%0)
      return %1
    }''', "remove-no-ops", '''
    graph @g {
      input %x: f32[2,3]
      %0: f32[2,3] = aten.relu(%x)
      return %0
    }''')

Both texts are parsed and printed again, so names of node results in them do not matter
(the printer numbers results in program order); a mismatch shows a unified diff.
"""

from __future__ import annotations

import difflib
import re
import textwrap
from typing import Sequence

from xir import Graph, parse_graph, print_graph

from .instruments import CheckChanged, VerifyEach
from .manager import PassManager, PipelineResult
from .pass_base import Pass
from .pipeline import parse_pipeline


def graph_with_data(text: str, **data) -> Graph:
    """The graph of IR ``text`` with its constant inputs given data, by name: a pass that reads
    constants' values (folding, a range check) needs it, and IR text holds none."""
    graph = parse_graph(textwrap.dedent(text))
    for name, tensor in data.items():
        graph.input_named(name).data = tensor
    return graph


def normalize(text: str) -> str:
    """IR text in canonical form (results renumbered, spacing and comments normalized)."""
    return print_graph(parse_graph(textwrap.dedent(text)))


def check_pipeline(
    before: str | Graph, pipeline: Sequence[Pass] | str, expected: str, *, changed: bool | None = None
) -> Graph:
    """Run ``pipeline`` on ``before`` (IR text, or a graph already built, e.g. one whose
    constants were given data) verifying after each pass and checking each pass's changed
    flag, and compare with ``expected``. Returns the transformed graph."""
    graph = before if isinstance(before, Graph) else parse_graph(textwrap.dedent(before))
    result: PipelineResult = PassManager(pipeline, [VerifyEach(), CheckChanged()]).run(graph)
    actual = print_graph(graph)
    wanted = normalize(expected)
    if actual != wanted:
        diff = "".join(difflib.unified_diff(wanted.splitlines(True), actual.splitlines(True), "expected", "actual"))
        raise AssertionError(f"pipeline {PassManager(pipeline).pipeline_text!r} gave different IR:\n{diff}")
    if changed is not None and result.changed != changed:
        raise AssertionError(f"pipeline reported changed={result.changed}, expected {changed}")
    return graph


def check_declined(before: str | Graph, pipeline: Sequence[Pass] | str, rule: str, reason: str) -> None:
    """Run ``pipeline`` on ``before`` as :func:`check_pipeline` does, expecting the IR unchanged, and
    check that its first pass's rule ``rule`` declined with a reason matching the regex ``reason``."""
    passes = parse_pipeline(pipeline) if isinstance(pipeline, str) else list(pipeline)
    text = print_graph(before) if isinstance(before, Graph) else before
    check_pipeline(before, passes, text, changed=False)
    declined = passes[0].last_stats.declined[rule]
    if not any(re.search(reason, r) for r in declined):
        raise AssertionError(f"{rule} declined with {declined}, none matching {reason!r}")


def case(name: str, before: str, expected: str | None = None):
    """A ``pytest.param(before, expected, changed, id=name)`` for a table of IR-text cases run by
    ``check_pipeline(before, pipeline, expected, changed=changed)``: ``expected`` omitted means the
    pass leaves ``before`` as it is (``changed`` False)."""
    import pytest

    return pytest.param(before, expected if expected is not None else before, expected is not None, id=name)
