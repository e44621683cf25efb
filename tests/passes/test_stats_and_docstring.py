"""Two defects of issue 29 (#7): equal pass instances shared their ``last_stats``; the pipeline
module's docstring example did not parse."""

from __future__ import annotations

import gc

import passes.pipeline
import passes.rewriter
from passes import PassManager, format_pipeline, parse_pipeline
from passes.remove_no_ops import RemoveNoOps
from xir import parse_graph

TEXT = """graph @g {
  input %x: f32[2,3]
  %0: f32[2,3] = aten.clone(%x)
  %1: f32[2,3] = aten.relu(%0)
  return %1
}
"""


def test_equal_pass_instances_keep_their_own_stats():
    first, second = RemoveNoOps(), RemoveNoOps()
    assert first == second and first is not second  # (frozen values: equal, and equally hashed)
    graph = parse_graph(TEXT)
    PassManager([first, second]).run(graph)
    assert first.last_stats.changed  # the clone went in the first run
    assert not second.last_stats.changed  # the second had nothing left to do
    assert first.last_stats is not second.last_stats


def test_a_collected_pass_leaves_no_stats_behind():
    p = RemoveNoOps()
    p.run(parse_graph(TEXT))
    key = id(p)
    assert key in passes.rewriter._LAST_STATS
    del p
    gc.collect()
    assert key not in passes.rewriter._LAST_STATS


def test_the_pipeline_docstring_example_parses_and_prints_back():
    (example,) = [
        line.strip() for line in passes.pipeline.__doc__.splitlines() if line.startswith("    ") and line.strip()
    ]
    pipeline = parse_pipeline(example)
    assert format_pipeline(pipeline) == example
    assert any(vars(p) or getattr(p, "__attrs_attrs__", ()) for p in pipeline)
