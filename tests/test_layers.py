"""The rooms and the direction of imports (issue 29): ``xir`` knows nothing of ``passes``,
``passes`` nothing of ``lowering``, ``lowering`` nothing of the tools (``xir_tools``); only xir's
FX importer, ``lowering`` and the tools import torch or ExecuTorch. Every module is read, its
function-level imports too, and every module of ``passes`` and ``lowering`` is imported."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("xir", "passes", "lowering", "xir_tools")  # each may import those before it only
HEAVY = ("torch", "executorch", "torchao", "numpy")
# where a lower room reads torch: the FX importer (its job), and the reproducer's constants
# (torch tensors, written and read as plain arrays)
HEAVY_ALLOWED = {"xir/fx_import.py": ("torch",), "passes/instruments.py": ("torch", "numpy")}


def modules(package: str) -> list[Path]:
    return sorted(p for p in (ROOT / package).rglob("*.py") if "__pycache__" not in p.parts)


def imported(path: Path) -> set[str]:
    """The top-level packages ``path`` imports anywhere (relative imports resolve to its own)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            found.add(path.relative_to(ROOT).parts[0] if node.level else node.module.split(".")[0])
    return found


@pytest.mark.parametrize("layer", LAYERS)
def test_imports_run_one_way(layer):
    above = set(LAYERS[LAYERS.index(layer) + 1 :]) | {"bench", "tests"}
    for path in modules(layer):
        wrong = imported(path) & above
        assert not wrong, f"{path.relative_to(ROOT)} imports {', '.join(sorted(wrong))}, a room above {layer}"


@pytest.mark.parametrize("layer", ("xir", "passes"))
def test_the_ir_and_the_generic_passes_do_not_touch_torch(layer):
    for path in modules(layer):
        relative = path.relative_to(ROOT).as_posix()
        heavy = (imported(path) & set(HEAVY)) - set(HEAVY_ALLOWED.get(relative, ()))
        assert not heavy, f"{relative} imports {', '.join(sorted(heavy))}"


@pytest.mark.parametrize(
    "path",
    [p for layer in ("passes", "lowering") for p in modules(layer)],
    ids=lambda p: p.relative_to(ROOT).as_posix(),
)
def test_every_module_of_the_passes_and_the_backend_imports(path):
    relative = path.relative_to(ROOT).with_suffix("")
    name = ".".join(relative.parts[:-1] if relative.name == "__init__" else relative.parts)
    importlib.import_module(name)


def test_the_backend_passes_are_one_per_file_and_prefixed():
    from passes.registry import listed

    for name, where in listed().items():
        module = where.split(":")[0]
        if module.startswith("lowering."):
            assert module.startswith("lowering.passes."), f"{name} is in {module}, not lowering/passes/"
    files = [p.stem for p in modules("lowering/passes") if not p.stem.startswith("_")]
    per_file = {}
    for name, where in listed().items():
        per_file.setdefault(where.split(":")[0], set()).add(where)
    assert all(len(classes) == 1 for classes in per_file.values()), per_file
    assert len(files) == len([m for m in per_file if m.startswith("lowering.passes.")])
