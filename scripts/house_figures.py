"""Figures of the house (issue 29) at one or more commits, read from git, not from the work tree.

    .venv/bin/python scripts/house_figures.py [REV ...]      (default: HEAD)

For each revision: lines of Python per top-level folder (and per subfolder of lowering/ and
xir_tools/), library functions longer than 60 lines (xir/, passes/, lowering/; the tools and
tests not counted), op-name string literals in passes/ and lowering/ (a string that is a whole
op name: ``"aten.view_copy"``), and positional operand reads (``operands[0]``) there.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections import Counter

LIBRARY = ("xir/", "passes/", "lowering/")
OP_ROOMS = ("passes/", "lowering/")
OP_NAME = re.compile(r"^(aten|quantized_decomposed|dim_order_ops|xir|llama|torchao)\.[A-Za-z_][\w]*(\.[\w]+)?$")
POSITIONAL = re.compile(r"\boperands\[\s*-?\d+\s*\]")
LONG = 60


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], check=True, capture_output=True, text=True).stdout


def python_files(rev: str) -> list[str]:
    return [p for p in _git("ls-tree", "-r", "--name-only", rev).splitlines() if p.endswith(".py")]


def folder(path: str) -> str:
    parts = path.split("/")
    if len(parts) == 1:
        return "(top)"
    if parts[0] in ("lowering", "xir_tools") and len(parts) > 2:
        return f"{parts[0]}/{parts[1]}/"
    return parts[0] + "/"


def figures(rev: str) -> dict:
    lines: Counter = Counter()
    long_functions: list[tuple[str, str, int]] = []
    literals = 0
    positional = 0
    for path in python_files(rev):
        text = _git("show", f"{rev}:{path}")
        lines[folder(path)] += text.count("\n")
        if not path.startswith(LIBRARY):
            continue
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        long_functions += [
            (path, node.name, node.end_lineno - node.lineno + 1)
            for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno + 1 > LONG
        ]
        if path.startswith(OP_ROOMS):
            docstrings = {
                id(n.body[0].value)
                for n in ast.walk(tree)
                if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                and n.body
                and isinstance(n.body[0], ast.Expr)
                and isinstance(n.body[0].value, ast.Constant)
            }
            literals += sum(
                1
                for n in ast.walk(tree)
                if isinstance(n, ast.Constant)
                and isinstance(n.value, str)
                and id(n) not in docstrings
                and OP_NAME.match(n.value)
            )
            positional += len(POSITIONAL.findall(text))
    return {
        "lines": lines,
        "long": sorted(long_functions, key=lambda f: -f[2]),
        "literals": literals,
        "positional": positional,
    }


def main(argv: list[str]) -> int:
    revs = argv or ["HEAD"]
    results = {rev: figures(rev) for rev in revs}
    folders = sorted({f for r in results.values() for f in r["lines"]})
    print("lines of Python by folder")
    print(f"  {'folder':<28}" + "".join(f"{rev[:12]:>14}" for rev in revs))
    for f in folders:
        print(f"  {f:<28}" + "".join(f"{results[rev]['lines'].get(f, 0):>14,}" for rev in revs))
    print(f"  {'total':<28}" + "".join(f"{sum(results[rev]['lines'].values()):>14,}" for rev in revs))
    print()
    for label, key in (
        ("library functions over 60 lines", "long"),
        ("op-name string literals in passes/, lowering/", "literals"),
        ("positional operand reads (operands[i]) in passes/, lowering/", "positional"),
    ):
        values = [len(results[rev][key]) if key == "long" else results[rev][key] for rev in revs]
        print(f"{label:<62}" + "".join(f"{v:>14}" for v in values))
    for rev in revs:
        print(f"\nfunctions over {LONG} lines at {rev}:")
        for path, name, length in results[rev]["long"]:
            print(f"  {length:4d}  {path}:{name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
