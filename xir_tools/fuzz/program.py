"""A generated program as data: inputs, ops (one forward line each), outputs; rendered to the
readable Python source of a ``torch.nn.Module`` (the source is the repro).

Kept free of torch imports at module level so the parent process can edit programs (shrinking)
cheaply; ``instantiate`` execs the source.
"""

from __future__ import annotations

import copy
import linecache
from dataclasses import asdict, dataclass, field

KINDS = ("fp32", "bf16", "static", "dynamic")
QUANTIZED_KINDS = ("static", "dynamic")

# per-op rounding budget, relative to max(1, |ref|max): the tolerance of an output in reduced
# precision grows with the number of rounding ops on its longest path (see xir_tools.harness.tolerance)
LOWP_UNIT = {"bfloat16": 2.0**-5, "float16": 2.0**-8, "float32": 0.0, "float64": 0.0, "int64": 0.0, "bool": 0.0}


@dataclass
class InputSpec:
    name: str
    shape: list
    dtype: str  # "int64", or the kind's float dtype ("float32"; "bfloat16": made as float32, cast by the harness)
    seed: int
    high: int = 0  # int inputs: values in [0, high)

    def line(self) -> str:
        shape = ", ".join(str(d) for d in self.shape)
        generator = f"torch.Generator().manual_seed({self.seed})"
        if self.dtype == "int64":
            return f"{self.name} = torch.randint(0, {self.high}, ({shape}{',' if len(self.shape) == 1 else ''}), generator={generator})"
        return f"{self.name} = torch.randn({shape}, generator={generator})"


@dataclass
class OpSpec:
    id: int
    kind: str
    template: str  # the forward expression, operands as {0}, {1}, ...
    args: list  # operand value names
    outs: list  # result value names
    out_shapes: list
    out_dtypes: list  # torch dtype names after the kind's cast (bfloat16 in the bf16 kind)
    init: list = field(default_factory=list)  # __init__ lines (parameters, submodules, buffers)
    exact: bool = False  # no rounding (data movement, relu, abs, max, ...): adds nothing to the tolerance

    def expression(self) -> str:
        return self.template.format(*self.args)

    def line(self) -> str:
        return f"{', '.join(self.outs)} = {self.expression()}"


@dataclass
class Program:
    seed: int
    kind: str
    via: str  # "etal" (to_edge_transform_and_lower) or "backend" (to_edge().to_backend)
    per_channel: bool
    inputs: list  # InputSpec
    ops: list  # OpSpec
    outputs: list  # value names
    param_seed: int = 0  # torch.manual_seed(param_seed + op.id) before each op's __init__ lines

    # ------------------------------------------------------------------ queries
    def meta(self) -> dict:
        """value name -> (shape, dtype name) for inputs and op results."""
        table = {i.name: (tuple(i.shape), i.dtype) for i in self.inputs}
        for op in self.ops:
            for name, shape, dtype in zip(op.outs, op.out_shapes, op.out_dtypes):
                table[name] = (tuple(shape), dtype)
        return table

    def lowp(self) -> list:
        """Per output: the summed rounding budget (LOWP_UNIT) along its longest path."""
        budget = {i.name: 0.0 for i in self.inputs}
        for op in self.ops:
            base = max([budget.get(a, 0.0) for a in op.args] or [0.0])
            for name, dtype in zip(op.outs, op.out_dtypes):
                budget[name] = base + (0.0 if op.exact else LOWP_UNIT.get(dtype, 0.0))
        return [budget.get(o, 0.0) for o in self.outputs]

    def clone(self) -> "Program":
        return copy.deepcopy(self)

    def to_json(self) -> dict:
        return asdict(self)

    @staticmethod
    def from_json(data: dict) -> "Program":
        data = dict(data)
        data["inputs"] = [InputSpec(**i) for i in data["inputs"]]
        data["ops"] = [OpSpec(**o) for o in data["ops"]]
        return Program(**data)

    # ------------------------------------------------------------------ source
    def module_source(self) -> str:
        """The ``Program`` module class and ``make_inputs()``: readable, self-contained."""
        lines = [
            "import torch",
            "import torch.nn as nn",
            "import torch.nn.functional as F",
            "",
            "",
            "class Program(nn.Module):",
            "    def __init__(self):",
            "        super().__init__()",
        ]
        for op in self.ops:
            if op.init:
                lines.append(f"        torch.manual_seed({self.param_seed + op.id})")
                lines.extend(f"        {line}" for line in op.init)
        lines.append("")
        lines.append(f"    def forward(self, {', '.join(i.name for i in self.inputs)}):")
        for op in self.ops:
            lines.append(f"        {op.line()}")
        if len(self.outputs) == 1:
            lines.append(f"        return {self.outputs[0]}")
        else:
            lines.append(f"        return {', '.join(self.outputs)}")
        lines += ["", "", "def make_inputs():"]
        lines.extend(f"    {i.line()}" for i in self.inputs)
        names = ", ".join(i.name for i in self.inputs)
        lines.append(f"    return ({names}{',' if len(self.inputs) == 1 else ''})")
        return "\n".join(lines) + "\n"

    def describe(self) -> str:
        extra = f", per-channel={self.per_channel}" if self.kind == "static" else ""
        return f"seed {self.seed}, kind {self.kind}, via {self.via}{extra}, {len(self.ops)} ops, {len(self.outputs)} outputs"


def instantiate(source: str, name: str = "<xir_fuzz program>"):
    """Exec the module source; returns (Program class, make_inputs)."""
    linecache.cache[name] = (len(source), None, source.splitlines(True), name)  # tracebacks show the lines
    namespace: dict = {"__name__": "xir_fuzz_program"}
    exec(compile(source, name, "exec"), namespace)
    return namespace["Program"], namespace["make_inputs"]


# ---------------------------------------------------------------------- editing (shrinking)


def dead_code_elimination(program: Program) -> Program:
    """Drop ops none of whose results is used or returned, then unused inputs."""
    live = set(program.outputs)
    kept = []
    for op in reversed(program.ops):
        if any(o in live for o in op.outs):
            kept.append(op)
            live.update(op.args)
    program.ops = list(reversed(kept))
    program.inputs = [i for i in program.inputs if i.name in live]
    return program


def normalize_outputs(program: Program) -> Program:
    """Outputs: no duplicates, no inputs returned as they are."""
    inputs = {i.name for i in program.inputs}
    seen, outputs = set(), []
    for o in program.outputs:
        if o not in seen and o not in inputs:
            seen.add(o)
            outputs.append(o)
    program.outputs = outputs
    return program


def drop_output(program: Program, index: int) -> Program | None:
    if len(program.outputs) <= 1:
        return None
    p = program.clone()
    del p.outputs[index]
    return dead_code_elimination(p)


def drop_op(program: Program, op_id: int) -> Program | None:
    """Remove one op: each result is replaced by an operand of the same shape and dtype when
    there is one; otherwise the ops that depend on it (transitively) and outputs go too."""
    p = program.clone()
    meta = p.meta()
    index = next(i for i, op in enumerate(p.ops) if op.id == op_id)
    op = p.ops.pop(index)
    substitute, dead = {}, set()
    for name in op.outs:
        match = next((a for a in op.args if meta.get(a) == meta[name]), None)
        if match is not None:
            substitute[name] = match
        else:
            dead.add(name)
    kept = []
    for other in p.ops:
        other.args = [substitute.get(a, a) for a in other.args]
        if any(a in dead for a in other.args):
            dead.update(other.outs)
        else:
            kept.append(other)
    p.ops = kept
    p.outputs = [substitute.get(o, o) for o in p.outputs if o not in dead]
    normalize_outputs(p)
    if not p.outputs:
        return None
    return dead_code_elimination(p)


def size(program: Program) -> tuple:
    return (len(program.ops), len(program.outputs), len(program.inputs))
