"""Walk a lowered program op by op against its reference: where does it depart?

``walk(module, inputs)`` takes a module (typically a statically quantized, pt2e-converted
``GraphModule``: ``lowering.fx.quantizer.quantize_pt2e``'s result) and finds the first op where the
program lowered from it departs from the module itself, run eagerly:

1. The candidate intermediates are picked in the module's FX graph: in a quantized graph the
   activation quantizes (each op's result on its int8 grid; a fresh dequantize of each becomes a
   graph output, so the quantized op before it stays quantized and in its delegate), else every
   float result of a compute op.
2. Each candidate is made a graph output, all at once (``mode="all"``: one lowering per
   partitioner) or one prefix at a time (``mode="prefix"``: the graph cut after the candidate, one
   lowering per candidate and partitioner; slower, but each prefix is lowered as it would be alone).
3. The graph is exported, lowered with xir's partitioner and with stock's
   (``to_edge_transform_and_lower``), serialized, loaded and run with ``executorch.runtime``, and
   every output is compared with the eager module's value at that node: ``max|lowered - ref| /
   max|ref|`` (error over the tensor's peak) and, for a quantized value, the error in quantization
   steps.

The op that departs is the first whose error over its peak exceeds ``threshold`` (and, for a
quantized value, ``min_steps`` quantization steps) while no candidate upstream of it does, and the table names, for each candidate, how much of its error it
adds to its inputs' worst (``jump``).

    xir walk MODEL.pt2 [--mode prefix] [--threshold 0.05]

or from Python: ``print(walk(converted, inputs).table())``.
"""

from __future__ import annotations

import copy
import operator
from dataclasses import dataclass, field

import torch

_QD = "quantized_decomposed"


def _is(node, name: str) -> bool:
    return node.op == "call_function" and _QD in str(node.target) and str(node.target).split(".")[-2] == name


def _producer(node):
    """The op whose result a quantize quantizes (through nothing: the quantize's input)."""
    source = node.args[0]
    return source if isinstance(source, torch.fx.Node) else None


def _is_activation_quantize(node) -> bool:
    """A per-tensor quantize of a computed value (not a weight's: those read get_attr constants)."""
    if not _is(node, "quantize_per_tensor"):
        return False
    source = _producer(node)
    return source is not None and source.op != "get_attr"


def _op_label(node) -> str:
    if node.op == "placeholder":
        return "input"
    target = node.target
    name = getattr(target, "__name__", str(target))
    if hasattr(target, "_schema") or "aten" in str(target):
        name = str(target).replace("aten.", "").replace(".default", "").replace(".Tensor", "")
    return name


def _described(node) -> tuple[str, str]:
    """(node name, op) of the value a candidate stands for: a quantize stands for the op it quantizes."""
    if _is(node, "quantize_per_tensor"):
        source = _producer(node)
        return (source.name, _op_label(source)) if source is not None else (node.name, _op_label(node))
    return node.name, _op_label(node)


def candidates(gm: torch.fx.GraphModule) -> list[torch.fx.Node]:
    """The intermediates to compare, in graph order: activation quantizes in a quantized graph, else
    every call_function with one float tensor result."""
    nodes = list(gm.graph.nodes)
    quantizes = [n for n in nodes if _is_activation_quantize(n)]
    if quantizes:
        output = next(n for n in nodes if n.op == "output")
        results = [v for v in torch.utils._pytree.tree_leaves(output.args[0]) if isinstance(v, torch.fx.Node)]
        # the graph's own results, where not the dequantize of a picked quantize (a float output)
        return quantizes + [r for r in results if not (_is(r, "dequantize_per_tensor") and r.args[0] in quantizes)]
    return [
        n
        for n in nodes
        if n.op == "call_function"
        and n.target is not operator.getitem
        and isinstance(n.meta.get("val"), torch.Tensor)
        and n.meta["val"].is_floating_point()
    ]


def _with_outputs(gm: torch.fx.GraphModule, picked: list[str], keep_outputs: bool) -> torch.fx.GraphModule:
    """A copy of ``gm`` returning the picked nodes' values (a quantize's through a fresh dequantize),
    then, with ``keep_outputs``, its own outputs; flat positional inputs, a flat tuple of outputs."""
    gm = copy.deepcopy(gm)
    graph = gm.graph
    by_name = {n.name: n for n in graph.nodes}
    output = next(n for n in graph.nodes if n.op == "output")
    values = []
    for name in picked:
        node = by_name[name]
        if _is(node, "quantize_per_tensor"):
            dequantize = getattr(torch.ops.quantized_decomposed.dequantize_per_tensor, node.target._overloadname)
            with graph.inserting_after(node):
                node = graph.call_function(dequantize, (node, *node.args[1:]))
        values.append(node)
    if keep_outputs:
        values += [v for v in torch.utils._pytree.tree_leaves(output.args[0]) if isinstance(v, torch.fx.Node)]
    graph.erase_node(output)
    graph.output(tuple(values))
    graph._codegen = torch.fx.graph.CodeGen()
    graph.eliminate_dead_code()
    gm.recompile()
    return gm


@dataclass
class Step:
    """One candidate: its node (the op it stands for), the op, its peak, each partitioner's error."""

    name: str
    op: str
    peak: float
    scale: float | None  # a quantized value's step
    errors: dict = field(default_factory=dict)  # partitioner -> max |lowered - ref| (None: did not run)
    upstream: list = field(default_factory=list)  # indices of the nearest candidates it reads

    def relative(self, which: str) -> float | None:
        error = self.errors.get(which)
        return None if error is None else error / max(self.peak, 1e-12)


@dataclass
class Walk:
    steps: list[Step]
    partitioners: tuple
    threshold: float
    min_steps: float = 2.0
    failures: dict = field(default_factory=dict)  # partitioner -> why it did not run (all at once)

    def jump(self, index: int, which: str) -> float | None:
        """This step's error over its peak minus the worst of its upstream candidates'."""
        mine = self.steps[index].relative(which)
        if mine is None:
            return None
        before = [self.steps[i].relative(which) for i in self.steps[index].upstream]
        return mine - max([0.0] + [b for b in before if b is not None])

    def over(self, index: int, which: str) -> bool:
        """Whether this step's error is over the threshold of its peak and, for a quantized value,
        over ``min_steps`` quantization steps (a value whose peak is a step or two is one rounding
        away from an error of half its peak)."""
        step = self.steps[index]
        rel = step.relative(which)
        if rel is None or rel <= self.threshold:
            return False
        return step.scale is None or step.errors[which] > self.min_steps * step.scale * (1 + 1e-6)

    def departs(self, which: str) -> int | None:
        """The first step over the threshold none of whose upstream candidates is over it."""
        for index, step in enumerate(self.steps):
            if self.over(index, which) and not any(self.over(i, which) for i in step.upstream):
                return index
        return None

    def largest_jump(self, which: str) -> int | None:
        jumps = [(self.jump(i, which) or 0.0, i) for i in range(len(self.steps))]
        return max(jumps)[1] if jumps else None

    def table(self) -> str:
        header = ["#", "node", "op", "peak", "step"]
        for which in self.partitioners:
            header += [f"{which} err/peak", f"{which} steps", f"{which} jump"]
        rows = []
        for index, step in enumerate(self.steps):
            row = [
                str(index),
                step.name,
                step.op,
                f"{step.peak:.3g}",
                "-" if step.scale is None else f"{step.scale:.3g}",
            ]
            for which in self.partitioners:
                rel, error, jump = step.relative(which), step.errors.get(which), self.jump(index, which)
                row += [
                    "-" if rel is None else f"{rel:.4f}",
                    "-" if error is None or step.scale is None else f"{error / step.scale:.1f}",
                    "-" if jump is None else f"{jump:+.4f}",
                ]
            rows.append(row)
        widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]
        lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths)), "  ".join("-" * w for w in widths)]
        lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
        for which in self.partitioners:
            if which in self.failures:
                lines.append(f"{which}: {self.failures[which]}")
                continue
            first, big = self.departs(which), self.largest_jump(which)
            where = "none" if first is None else f"#{first} {self.steps[first].name} ({self.steps[first].op})"
            lines.append(
                f"{which}: first departure over {self.threshold:g} of peak (and {self.min_steps:g} steps): {where}; "
                "largest jump: "
                f"#{big} {self.steps[big].name} ({self.steps[big].op}, {self.jump(big, which):+.4f})"
                if big is not None
                else f"{which}: first departure: {where}"
            )
        return "\n".join(lines)


def _upstream(gm: torch.fx.GraphModule, picked: list[torch.fx.Node]) -> list[list[int]]:
    """For each picked node, the indices of the nearest picked nodes it depends on."""
    index = {node: i for i, node in enumerate(picked)}
    nearest: dict = {}
    for node in gm.graph.nodes:
        found: set = set()
        for source in node.all_input_nodes:
            found |= {index[source]} if source in index else nearest.get(source, set())
        nearest[node] = found
    return [sorted(nearest[node]) for node in picked]


def _run(gm, inputs, which: str, **options):
    """Export ``gm``, lower with ``which``, run: (outputs, None) or (None, why)."""
    from xir_tools.harness import lower

    ep = torch.export.export(gm, tuple(inputs), strict=False)
    result = lower(ep, inputs, which, **options)
    return result.outputs, result.error


def walk(
    module: torch.fx.GraphModule,
    inputs: tuple,
    partitioners=("xir", "stock"),
    mode: str = "all",
    threshold: float = 0.05,
    limit: int | None = None,
    min_steps: float = 2.0,
) -> Walk:
    """Compare every candidate intermediate of ``module`` (an FX GraphModule; the pt2e-converted
    model) lowered with each of ``partitioners`` against ``module`` run eagerly on ``inputs``."""
    import executorch.kernels.quantized  # noqa: F401  (a dequantize made an output runs outside)

    picked = candidates(module)
    if limit is not None:
        picked = picked[:limit]
    names = [n.name for n in picked]
    upstream = _upstream(module, picked)
    full = _with_outputs(module, names, keep_outputs=False)
    with torch.no_grad():
        expected = list(full(*inputs))
    steps = []
    for node, value, ups in zip(picked, expected, upstream):
        name, op = _described(node)
        quantized = _is(node, "quantize_per_tensor") and not isinstance(node.args[1], torch.fx.Node)
        scale = float(node.args[1]) if quantized else None
        steps.append(Step(name, op, value.abs().max().item(), scale, upstream=ups))
    result = Walk(steps, tuple(partitioners), threshold, min_steps)
    for which in partitioners:
        if mode == "all":
            outputs, error = _run(full, inputs, which)
            if outputs is None:
                result.failures[which] = error
                continue
            for step, got, want in zip(steps, outputs, expected):
                step.errors[which] = (got.float() - want.float()).abs().max().item()
        else:
            for step, name, want in zip(steps, names, expected):
                outputs, _ = _run(_with_outputs(module, [name], keep_outputs=False), inputs, which)
                step.errors[which] = None if outputs is None else (outputs[0] - want).abs().max().item()
    return result
