"""Figures of the house (issue 29) at one or more commits, read from git, not from the work tree.

    .venv/bin/python scripts/house_figures.py [REV ...]      (default: HEAD)

For each revision: lines of Python per top-level folder (and per subfolder of lowering/ and
xir_tools/), library functions longer than 60 lines (xir/, passes/, lowering/; the tools and
tests not counted), op-name string literals in passes/ and lowering/ (a string that is a whole
op name: ``"aten.view_copy"``), and positional operand reads (``operands[0]``) there.

The rooms (issue 55): lowering/'s top-level files and those outside lowering/fx/ that import
ExecuTorch, torch.fx or torch.export; imports inside functions in lowering/; op-family
declarations (a module-level tuple or set of two or more op names or op handles, in xir/, passes/
and lowering/); lines of passes/ naming XNNPACK or ExecuTorch; README and docs/benchmarks.md
lines; library lines over 120 characters; ruff's findings with the revision's own configuration
(``ruff`` of this environment); and the median subject length of the commits since the first
revision given (``--since REV`` to choose another).
"""

from __future__ import annotations

import ast
import re
import statistics
import subprocess
import sys
import tarfile
import tempfile
from collections import Counter
from io import BytesIO
from pathlib import Path

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


FX_SIDE = ("executorch", "torch.fx", "torch.export")
OP_HANDLE_ROOTS = ("aten", "quantized_decomposed", "dim_order_ops", "xir_ops", "torchao", "llama")
BACKEND_WORDS = re.compile(r"xnnpack|executorch", re.IGNORECASE)


def _imports(tree: ast.AST):
    """(module, inside a function) for every import of ``tree``."""
    inside = set()
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            inside.update(id(n) for n in ast.walk(fn) if isinstance(n, (ast.Import, ast.ImportFrom)))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((alias.name, id(node) in inside) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            yield "." * node.level + (node.module or ""), id(node) in inside


def _is_op(element: ast.AST) -> bool:
    if isinstance(element, ast.Constant) and isinstance(element.value, str):
        return bool(OP_NAME.match(element.value))
    while isinstance(element, ast.Attribute):
        element = element.value
    return isinstance(element, ast.Name) and element.id in OP_HANDLE_ROOTS


def _op_families(tree: ast.Module) -> int:
    """Module-level assignments of a tuple/list/set (or frozenset/set/tuple call of one) of two or
    more ops."""
    count = 0
    for node in tree.body:
        value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
        if (
            isinstance(value, ast.Call)
            and value.args
            and getattr(value.func, "id", "") in ("frozenset", "set", "tuple")
        ):
            value = value.args[0]
        if isinstance(value, (ast.Tuple, ast.List, ast.Set)) and len(value.elts) >= 2 and all(map(_is_op, value.elts)):
            count += 1
    return count


def _ruff_findings(rev: str) -> int:
    archive = subprocess.run(["git", "archive", rev], check=True, capture_output=True).stdout
    with tempfile.TemporaryDirectory() as folder:
        with tarfile.open(fileobj=BytesIO(archive)) as tar:
            tar.extractall(folder, filter="data")
        ruff = Path(sys.executable).with_name("ruff")
        done = subprocess.run(
            [str(ruff), "check", "--exit-zero", "--output-format", "concise", "."],
            cwd=folder,
            capture_output=True,
            text=True,
        )
    return sum(1 for line in done.stdout.splitlines() if re.match(r"^\S+:\d+:\d+: ", line))


def rooms(rev: str) -> dict:
    """The issue-55 figures of ``rev`` (see the module's doc)."""
    top, fx_outside, in_function, families, long_lines = [], [], 0, 0, 0
    for path in python_files(rev):
        if not path.startswith(LIBRARY):
            continue
        text = _git("show", f"{rev}:{path}")
        long_lines += sum(1 for line in text.splitlines() if len(line) > 120)
        tree = ast.parse(text)
        families += _op_families(tree)
        if not path.startswith("lowering/"):
            continue
        if path.count("/") == 1:
            top.append(path)
        imports = list(_imports(tree))
        in_function += sum(1 for _, inside in imports if inside)
        if not path.startswith("lowering/fx/") and any(m.startswith(FX_SIDE) for m, _ in imports):
            fx_outside.append(path)
    passes_text = [_git("show", f"{rev}:{p}") for p in python_files(rev) if p.startswith("passes/")]
    return {
        "lowering/ top-level files": len(top),
        "lowering/ files outside lowering/fx/ touching ExecuTorch/FX": len(fx_outside),
        "in-function imports in lowering/": in_function,
        "op-family declarations (tuples/sets of ops)": families,
        "passes/ lines naming XNNPACK or ExecuTorch": sum(len(BACKEND_WORDS.findall(t)) for t in passes_text),
        "README lines": _git("show", f"{rev}:README.md").count("\n"),
        "docs/benchmarks.md lines": _git("show", f"{rev}:docs/benchmarks.md").count("\n"),
        "library lines over 120 characters": long_lines,
        "ruff findings (the revision's configuration)": _ruff_findings(rev),
    }


def subject_lengths(since: str, rev: str) -> tuple[float, int, int]:
    """(median, max, count) of the subject lengths of the commits in since..rev."""
    lengths = [len(s) for s in _git("log", "--format=%s", f"{since}..{rev}").splitlines()]
    return (statistics.median(lengths), max(lengths), len(lengths)) if lengths else (0, 0, 0)


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
    since = None
    if "--since" in argv:
        at = argv.index("--since")
        since, argv = argv[at + 1], argv[:at] + argv[at + 2 :]
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
    print()
    room_figures = {rev: rooms(rev) for rev in revs}
    for label in room_figures[revs[0]]:
        print(f"{label:<62}" + "".join(f"{room_figures[rev][label]:>14,}" for rev in revs))
    since = since or revs[0]
    if since != revs[-1]:
        median, longest, count = subject_lengths(since, revs[-1])
        print(
            f"\ncommit subjects {since[:12]}..{revs[-1][:12]}: {count} commits, median {median:g} characters, max {longest}"
        )
    for rev in revs:
        print(f"\nfunctions over {LONG} lines at {rev}:")
        for path, name, length in results[rev]["long"]:
            print(f"  {length:4d}  {path}:{name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
