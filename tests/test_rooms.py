"""What each room of the house may know, checked on the source.

* ``passes/`` is generic: it names no backend (XNNPACK, ExecuTorch) and none of the backend's own
  ops (``lowering.ops``), and decides by the traits of op definitions.
* The op families are declared once, as traits on the op definitions.
"""

from __future__ import annotations

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
