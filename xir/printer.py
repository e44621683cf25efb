"""IR text: ASCII, one node per line, readable back by :mod:`xir.parser`.

    graph @forward {
      input %x: f32[2,16]
      param %p_fc_weight: f32[32,16]
      param %p_fc_bias: f32[32]
      %0: f32[2,32] = aten.linear(%x, %p_fc_weight, %p_fc_bias)
      %1: f32[2,32] = aten.relu(%0)
      return %1
    }

Graph inputs keep their names; node results are numbered in program order. Constants are
shown by their type, never their data. Attributes (non-tensor arguments) follow the operands
in ``{}``. With ``show_origin=True`` a node created by a pass ends with ``# by PASS-NAME``.
"""

from __future__ import annotations

import json
import math
from typing import Any

from .attributes import EnumAttr
from .core import Graph, Node, Value
from .dtypes import DType


class Namer:
    """Gives every value its printed name: inputs their own, results ``0, 1, 2, ...``."""

    def __init__(self, graph: Graph | None = None):
        self.names: dict[int, str] = {}
        self._next = 0
        self._taken: set[str] = set()
        if graph is not None:
            for value in graph.inputs:
                self.names[id(value)] = value.name
                self._taken.add(value.name)
            for node in graph:
                for result in node.results:
                    self.name(result)

    def name(self, value: Value) -> str:
        key = id(value)
        if key not in self.names:
            if value.name is not None and value.producer is None:
                self.names[key] = value.name
            else:
                while str(self._next) in self._taken:
                    self._next += 1
                self.names[key] = str(self._next)
                self._next += 1
        return self.names[key]

    def ref(self, value: Value) -> str:
        return "%" + self.name(value)


def format_attribute(value: Any, namer: Namer) -> str:
    if isinstance(value, Value):
        return namer.ref(value)
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, DType):
        return value.value
    if isinstance(value, EnumAttr):
        return str(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(format_attribute(v, namer) for v in value) + "]"
    raise TypeError(f"cannot print attribute value {value!r} of type {type(value).__name__}")


def print_node(node: Node, namer: Namer | None = None, show_origin: bool = False) -> str:
    namer = namer or Namer()
    text = ""
    if node.results:
        text = ", ".join(f"{namer.ref(r)}: {r.type}" for r in node.results) + " = "
    text += node.op + "(" + ", ".join(namer.ref(v) for v in node.operands) + ")"
    if node.attributes:
        text += " {" + ", ".join(f"{k}={format_attribute(v, namer)}" for k, v in node.attributes.items()) + "}"
    if show_origin and node.origin:
        text += f"  # by {node.origin}"
    return text


def print_graph(graph: Graph, show_origin: bool = False) -> str:
    namer = Namer(graph)
    lines = [f"graph @{graph.name} {{"]
    for value in graph.inputs:
        lines.append(f"  {value.input_kind.value} {namer.ref(value)}: {value.type}")
    for node in graph:
        lines.append("  " + print_node(node, namer, show_origin))
    lines.append("  return" + ("" if not graph.outputs else " " + ", ".join(namer.ref(v) for v in graph.outputs)))
    lines.append("}")
    return "\n".join(lines) + "\n"
