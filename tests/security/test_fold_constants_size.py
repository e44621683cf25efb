"""fold-constants allocates no more than a node's declared result type says (issue 28, item 6).

The size limit (``max_elements``) is checked against the declared type; a node whose attributes
(``aten.full() {size=[20000, 20000]}``) or operands (two constants broadcast against each other)
give a far bigger result than that type must be refused before anything is evaluated, not after
the op has filled gigabytes. Each payload runs in a process of its own, which reports how much its
peak memory grew; the creation ops' declared types are also checked by the verifier.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import xir

ROOT = Path(__file__).resolve().parents[2]

# the payload: its attributes make 20000 x 20000 floats (1.6 GB); its type says two
FULL = """graph @g {
  input %x: f32[2]
  %0: f32[2] = aten.full() {size=[20000, 20000], fill_value=1.0, dtype=f32}
  %1: f32[2] = aten.add.Tensor(%x, %0)
  return %1
}
"""
# two small constants (80 KB each) whose comparison broadcasts to 20000 x 20000 bools (400 MB)
BROADCAST = """graph @g {
  input %x: f32[2]
  param %a: f32[20000,1]
  param %b: f32[1,20000]
  %0: bool[2] = aten.eq.Tensor(%a, %b)
  %1: f32[2] = aten.where.self(%0, %x, %x)
  return %1
}
"""
# a fold that really happens first, so that what the pass imports and sets up is not counted
WARM_UP = """graph @g {
  input %x: f32[4]
  %0: f32[4] = aten.full() {size=[4], fill_value=1.0, dtype=f32}
  %1: f32[4] = aten.add.Tensor(%x, %0)
  return %1
}
"""

SCRIPT = """
import json, resource, sys
import torch
import lowering  # (declares the backend's passes, fold-constants among them)
import xir
from passes import PassFailure, PassManager

warm_up, text, constants = json.loads(sys.stdin.read())
PassManager("fold-constants").run(xir.parse_graph(warm_up))
graph = xir.parse_graph(text)
for name, shape in constants.items():
    graph.input_named(name).data = torch.zeros(shape)
before_text = xir.print_graph(graph)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    PassManager("fold-constants").run(graph)
    outcome = "folded"
except PassFailure as failure:
    outcome = str(failure)
grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak
print(json.dumps({"grown_mb": grown / 1024, "outcome": outcome, "unchanged": xir.print_graph(graph) == before_text}))
"""


def _fold_in_a_process(text: str, constants: dict) -> dict:
    run = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        input=json.dumps([WARM_UP, text, constants]),
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout.splitlines()[-1])


@pytest.mark.parametrize(
    "text, constants, node, size",
    [
        (FULL, {}, "aten.full", "f32[20000,20000]"),
        (BROADCAST, {"a": [20000, 1], "b": [1, 20000]}, "aten.eq.Tensor", "bool[20000,20000]"),
    ],
    ids=["attributes", "broadcast"],
)
def test_a_result_bigger_than_its_type_is_refused_before_it_is_allocated(text, constants, node, size):
    result = _fold_in_a_process(text, constants)
    assert result["grown_mb"] < 100, f"folding allocated {result['grown_mb']:.0f} MB"
    # the pass fails naming the node and the size its inputs really give, and the graph is as it was
    assert node in result["outcome"] and size in result["outcome"], result["outcome"]
    assert result["unchanged"]


@pytest.mark.parametrize(
    "line, message",
    [
        (
            "%0: f32[2] = aten.full() {size=[20000, 20000], fill_value=1.0, dtype=f32}",
            "result shape is [2], expected [20000,20000]",
        ),
        ("%0: f32[2] = aten.full() {size=[2], fill_value=1}", "result dtype is f32, expected i64"),
        ("%0: f32[2] = aten.zeros() {size=[20000, 20000]}", "result shape is [2], expected [20000,20000]"),
        ("%0: f32[2] = aten.ones() {size=[2, 1]}", "result shape is [2], expected [2,1]"),
        ("%0: i64[2] = aten.arange.start_step() {start=0, end=400000000}", "result shape is [2], expected [400000000]"),
        ("%0: i64[2] = aten.arange() {end=2.0}", "result dtype is i64, expected f32"),
        ("%0: f32[2] = aten.arange.start_step() {start=0, end=2, step=0}", "a step of 0 does not go from 0 to 2"),
        ("%0: f32[2] = aten.full_like(%x) {fill_value=1.0, dtype=bf16}", "result dtype is f32, expected bf16"),
        ("%0: f32[4] = aten.zeros_like(%x)", "result shape is [4], expected [2]"),
        ("%0: f32[4] = aten.ones_like(%x)", "result shape is [4], expected [2]"),
        ("%0: f32[2] = aten.scalar_tensor() {s=1.0}", "result shape is [2], expected []"),
        ("%0: f32[2] = aten.full() {size=[2, -1], fill_value=1.0}", "size [2, -1] has a negative size"),
    ],
)
def test_a_creation_op_whose_declared_type_disagrees_with_its_attributes_fails_verification(line, message):
    graph = xir.parse_graph(f"graph @g {{\n  input %x: f32[2]\n  {line}\n  return %0\n}}\n")
    with pytest.raises(xir.VerificationError) as info:
        xir.verify(graph)
    assert message in info.value.message
    assert (info.value.line, info.value.column) == (3, 3)
