"""What each room of the house may know, checked on the source.

* ``passes/`` is generic: it names no backend (XNNPACK, ExecuTorch) and none of the backend's own
  ops (``lowering.ops``), and decides by the traits of op definitions.
* The op families are declared once, as traits on the op definitions.
* ``lowering/fx/`` is the only folder of ``lowering/`` that imports ExecuTorch, torch.fx or
  torch.export; an import inside a function in ``lowering/`` is one of :data:`IN_FUNCTION`.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import lowering.ops
from xir.ops import family, lookup

ROOT = Path(__file__).resolve().parent.parent
BACKEND_WORDS = re.compile(r"xnnpack|executorch", re.IGNORECASE)


def _python(folder: str) -> list[Path]:
    return sorted((ROOT / folder).rglob("*.py"))


def test_generic_passes_name_no_backend():
    found = []
    backend_ops = [*lowering.ops.NAMES, "xir_ops"]
    for path in _python("passes"):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if BACKEND_WORDS.search(line) or any(op in line for op in backend_ops):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not found, "passes/ is generic; backend knowledge belongs in lowering/:\n" + "\n".join(found)


def test_backend_ops_are_defined_by_the_backend():
    core = (ROOT / "xir" / "op_definitions.py").read_text()
    for name in lowering.ops.NAMES:
        assert f'"{name}"' not in core
        assert lookup(name) is not None and lookup(name).doc


def test_families_are_traits():
    assert family("linear") == ("aten.addmm", "aten.linear", "aten.mm")
    assert set(family("matmul")) >= {"aten.bmm", "aten.matmul", *family("linear"), "xir.bmm_f32out", "xir.linear_f16w"}
    assert family("random") == ("aten.native_dropout",)
    assert "quantized_decomposed.dequantize_per_channel" in family("dequantize")
    assert "torchao.choose_qparams_affine" in family("choose-qparams")
    assert family("cast") == ("aten._to_copy", "dim_order_ops._to_dim_order_copy")
    assert family("softmax") == ("aten._log_softmax", "aten._softmax")
    assert "aten.view_copy" in family("reshape") and "aten.permute_copy" not in family("reshape")


def test_no_family_is_written_out_twice():
    """A tuple of op handles that equals a family is that family, read with ``family(...)``."""
    pattern = re.compile(r"\(\s*aten\.linear,\s*aten\.addmm,\s*aten\.mm\s*\)|\"aten\.linear\",\s*\"aten\.addmm\"")
    found = [
        str(p.relative_to(ROOT))
        for folder in ("passes", "lowering", "xir")
        for p in _python(folder)
        if pattern.search(p.read_text())
    ]
    assert not found, found


# The imports lowering/ may make inside a function, and why. Everything else is imported at the top
# of its module. (``import lowering``, IR-text pipelines and the ``xir`` commands on IR text stay
# torch-free: tests/test_cli_fast.py.)
IN_FUNCTION = {
    # tensor data, computed only where a pass folds or reads a constant's data (a parsed graph has
    # none); torch's import costs seconds
    "torch": "constant data",
    "torch._subclasses.fake_tensor": "constant data (outside the lowering's fake mode)",
    "xir.fx_import": "fold-constants' torch dtype tables (the module imports torch)",
    # the FX side, reached only from a graph imported from a program: fold-constants evaluates a
    # node with the program's own edge op; capability asks the FX graph for the source partitions
    # XNNPACK's ConvertToLinearPass will find
    "..fx.writeback": "fold-constants evaluates with the program's own op",
    "..fx.linear_rebuild": "capability asks the FX graph for a linear's source partition",
    # symbolic sizes compared by value, only when two differ as text
    "sympy": "symbolic sizes",
    # lowering/__init__: the lazy door to lowering.fx (XnnpackPartitioner, ...)
    "importlib": "lowering's lazy attributes",
}
EXECUTORCH_SIDE = ("executorch", "torch.fx", "torch.export")


def _imports(tree: ast.AST):
    """(module name as written, whether inside a function, line) for every import of ``tree``."""
    inside = set()
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            inside.update(id(n) for n in ast.walk(fn) if isinstance(n, (ast.Import, ast.ImportFrom)))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, id(node) in inside, node.lineno
        elif isinstance(node, ast.ImportFrom):
            yield "." * node.level + (node.module or ""), id(node) in inside, node.lineno


def test_in_function_imports_are_the_listed_ones():
    found = []
    for path in _python("lowering"):
        for module, in_function, line in _imports(ast.parse(path.read_text())):
            if in_function and module not in IN_FUNCTION:
                found.append(f"{path.relative_to(ROOT)}:{line}: import {module}")
    assert not found, "import at the top of the module (or list it, with why, in IN_FUNCTION):\n" + "\n".join(found)


def test_only_lowering_fx_touches_executorch():
    found = []
    for path in _python("lowering"):
        if (ROOT / "lowering" / "fx") in path.parents:
            continue
        for module, _, line in _imports(ast.parse(path.read_text())):
            if module.startswith(EXECUTORCH_SIDE):
                found.append(f"{path.relative_to(ROOT)}:{line}: import {module}")
    assert not found, "only lowering/fx/ imports ExecuTorch, torch.fx or torch.export:\n" + "\n".join(found)


def test_the_docs_stay_short():
    """The README at most 200 lines, docs/benchmarks.md at most 400: older runs go to data/results/."""
    assert len((ROOT / "README.md").read_text().splitlines()) <= 200
    assert len((ROOT / "docs" / "benchmarks.md").read_text().splitlines()) <= 400
