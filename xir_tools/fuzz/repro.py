"""Standalone repro files: the harness (xir_tools/harness.py and case.py, verbatim), the
program's source, its inputs, kind and lowering path, and the observed classification. ``python repro.py`` prints both
outcomes and whether they match what the fuzzer saw."""

from __future__ import annotations

import ast
import inspect
import textwrap
from pathlib import Path

from xir.files import write_atomic

from .. import harness
from . import case
from .program import KINDS, Program

# the closed sets a repro's name and docstring are made of (a journal read back by --resume is data:
# a label or a status outside them is refused, never placed in a file name or in Python source)
LABELS = ("ok", "xir-own", "shared", "stock-only", "invalid")
STATUSES = ("ok", *case.FAILURE_CLASSES, "invalid", "harness-error")

MAIN = '''
# ================================================================== running this case

import json
import sys


def _run_isolated(side):
    """Run one side in a child process (a crash there is reported, not fatal here)."""
    import subprocess

    child = subprocess.run([sys.executable, __file__, "--side", side], capture_output=True, text=True,
                           timeout=TIMEOUT)
    for line in child.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])[side]
    tail = " | ".join(line for line in child.stderr.splitlines()[-4:] if line.strip())
    signal_text = f"signal {-child.returncode}" if child.returncode < 0 else f"exit status {child.returncode}"
    return {"status": "crashed", "error": f"{signal_text}; {tail}"}


def main(argv):
    import argparse
    import warnings

    warnings.filterwarnings("ignore")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--side", choices=["xir", "stock"], help="run only this side (in this process)")
    parser.add_argument("--isolate", action="store_true", help="run each side in a child process")
    args = parser.parse_args(argv)
    if args.side:
        outcome = run_case(Program, make_inputs, KIND, VIA, PER_CHANNEL, LOWP, sides=(args.side,), xir_options=XIR_OPTIONS)
        print("RESULT " + json.dumps({args.side: outcome[args.side]}))
        return 0
    if args.isolate or ISOLATE:
        outcome = {side: _run_isolated(side) for side in ("xir", "stock")}
    else:
        outcome = run_case(Program, make_inputs, KIND, VIA, PER_CHANNEL, LOWP, xir_options=XIR_OPTIONS)
    print(f"kind {KIND}, lowering via {VIA}" + (f", per-channel {PER_CHANNEL}" if KIND == "static" else ""))
    print("xir:  ", describe(outcome["xir"]))
    print("stock:", describe(outcome["stock"]))
    observed = {side: OBSERVED[side] for side in ("xir", "stock")}
    now = {side: outcome[side]["status"] for side in ("xir", "stock")}
    print("reproduced" if now == observed else f"NOT reproduced: the fuzzer saw {observed}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
'''


def _clean(text: str) -> str:
    """Safe inside the docstring."""
    return " ".join(text.replace(chr(92), "/").replace(chr(34) * 3, chr(39) * 3).split())


def _label_text(label: str) -> str:
    return _clean(
        {
            "xir-own": "xir's own failure (stock ok)",
            "shared": "shared failure (stock fails too)",
            "stock-only": "stock fails, xir ok",
            "ok": "both ok",
        }.get(label, label)
    )


def case_source() -> str:
    """case.py's text without its import of the harness (embedded ahead of it in a repro)."""
    text = inspect.getsource(case)
    lines = text.splitlines(keepends=True)
    (node,) = [n for n in ast.parse(text).body if isinstance(n, ast.ImportFrom) and n.module == "xir_tools.harness"]
    lines[node.lineno - 1 : node.end_lineno] = ["# (the harness's names: defined above)\n"]
    return "".join(lines)


def repro_source(
    program: Program,
    outcome: dict,
    label: str,
    original: Program | None = None,
    timeout: float = 600.0,
    xir_options: dict | None = None,
) -> str:
    xir, stock = outcome.get("xir") or {}, outcome.get("stock") or {}
    observed = {"xir": xir.get("status"), "stock": stock.get("status")}
    isolate = any(s in ("crashed", "timeout") for s in observed.values())
    history = ""
    if original is not None and len(original.ops) != len(program.ops):
        history = (
            f" Shrunk from {len(original.ops)} ops / {len(original.outputs)} outputs"
            f" (the original: python -m xir_tools.fuzz --replay {program.seed} --kind {program.kind})."
        )
    channel = ", per-channel" if program.per_channel and program.kind == "static" else ""
    header = "\n".join(
        [
            f'"""xir_fuzz repro: kind {program.kind}, seed {program.seed}, lowering via {program.via}{channel}: '
            f"{_label_text(label)}.",
            "",
            "Observed by the fuzzer:",
            f"  xir:   {_clean(case.describe(xir)) if xir else '-'}",
            f"  stock: {_clean(case.describe(stock)) if stock else '-'}",
            f"{len(program.ops)} ops, {len(program.outputs)} outputs.{history}",
            "",
            "Run with the xir checkout's venv: python THIS_FILE.py  (--isolate runs each side in a child",
            "process; --side xir|stock runs one). The harness below is xir_tools/harness.py and",
            "xir_tools/fuzz/case.py verbatim (but case.py's import of the harness): export",
            "(pt2e-quantized first for static/dynamic), lower with xir and with stock, to_executorch,",
            "load and run with executorch.runtime, compare with the eager reference.",
            '"""',
            "",
        ]
    )
    config = textwrap.dedent(f"""\
        # ================================================================== this case

        KIND = {program.kind!r}
        VIA = {program.via!r}  # "etal": to_edge_transform_and_lower, "backend": to_edge().to_backend()
        PER_CHANNEL = {program.per_channel!r}
        LOWP = {[round(v, 6) for v in program.lowp()]!r}  # per output: reduced-precision rounding budget (see tolerance())
        OBSERVED = {observed!r}
        ISOLATE = {isolate!r}  # the fuzzer saw a crash or a timeout: run the sides in child processes
        TIMEOUT = {timeout!r}
        XIR_OPTIONS = {dict(xir_options or {})!r}  # xir's partitioner options for a bf16 program (--bf16-option)
        """)
    parts = [
        header,
        "# ================================================================== harness (xir_tools/harness.py)\n",
        inspect.getsource(harness),
        "\n\n# ================================================================== the case (xir_tools/fuzz/case.py)\n",
        case_source(),
        "\n\n# ================================================================== the program\n\n",
        program.module_source(),
        "\n\n",
        config,
        MAIN,
    ]
    return "".join(parts)


def repro_name(program: Program, outcome: dict, label: str) -> str:
    """``KIND-seedSEED-LABEL-STATUS.py``; each part from its closed set (ValueError names the one
    that is not: it would otherwise be a path, or text, from a journal anyone may have edited)."""
    xir = (outcome.get("xir") or {}).get("status", "x")
    stock = (outcome.get("stock") or {}).get("status", "x")
    if program.kind not in KINDS or type(program.seed) is not int:
        raise ValueError(f"a repro of kind {program.kind!r}, seed {program.seed!r}: not a kind and an integer seed")
    if label not in LABELS:
        raise ValueError(f"a repro labelled {label!r}: the label is none of {', '.join(LABELS)}")
    for side, status in (("xir", xir), ("stock", stock)):
        if status != "x" and status not in STATUSES:
            raise ValueError(f"a repro whose {side} status is {status!r}: none of {', '.join(STATUSES)}")
    status = xir if label != "stock-only" else f"stock-{stock}"
    return f"{program.kind}-seed{program.seed}-{label}-{status}.py"


def write_repro(
    out_dir: str | Path,
    program: Program,
    outcome: dict,
    label: str,
    original: Program | None = None,
    timeout: float = 600.0,
    xir_options: dict | None = None,
) -> Path:
    """Write the repro file of ``program`` in ``out_dir`` (atomically: an earlier repro of the same
    name stays whole if the write fails); returns its path. The file is in ``out_dir`` itself
    (ValueError otherwise), whatever the outcome and label say."""
    out = Path(out_dir)
    name = repro_name(program, outcome, label)
    target = out / name
    if Path(name).name != name or target.parent != out:
        raise ValueError(f"the repro name {name!r} is not a file name in {out}")
    out.mkdir(parents=True, exist_ok=True)
    if target.resolve().parent != out.resolve():
        raise ValueError(f"the repro {target} would be written outside {out}")
    text = repro_source(program, outcome, label, original, timeout, xir_options)
    return write_atomic(target, text)
