"""Issue 57, item 3, and the CLI messages of item 4: no command writes over its own input
(``explain --html``, ``lower -o``, ``--dump-dir``: one shared check), and an output under a file
is named as such."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

IR = "graph @g {\n  input %x: f32[2,3]\n  %0 = relu(%x)\n  return %0\n}\n"


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("inputs") / "mlp.pt2"
    torch.export.save(torch.export.export(torch.nn.Linear(4, 2).eval(), (torch.randn(1, 4),)), path)
    return path


def run_cli(argv, capsys, monkeypatch) -> tuple[int, str]:
    from xir_tools import cli

    monkeypatch.setattr(cli, "_quiet_logs", lambda: None)
    status = cli.main([str(a) for a in argv])
    return status, capsys.readouterr().err.strip().splitlines()[-1]


@pytest.mark.parametrize("kind", ["pt2", "xir", "link"])
def test_explain_html_does_not_write_over_the_model(kind, model, tmp_path, capsys, monkeypatch):
    """``xir explain M --html M`` (M a .pt2, IR text, or a link to the .pt2) is refused, M unchanged."""
    if kind == "xir":
        source = tmp_path / "g.xir"
        source.write_text(IR)
    else:
        source = tmp_path / "mlp.pt2"
        source.write_bytes(model.read_bytes())
    target = source
    if kind == "link":
        target = tmp_path / "report.html"
        target.symlink_to(source)
    before = source.read_bytes()
    status, line = run_cli(["explain", source, "--html", target], capsys, monkeypatch)
    assert status == 2 and line == (
        f"xir: error: --html {target} is the input {source}: writing it would overwrite the input; give another file"
    ), line
    assert source.read_bytes() == before


def test_dump_dir_does_not_write_over_the_model(model, tmp_path, capsys, monkeypatch):
    """``xir lower M --dump-dir M``: refused before any work, M unchanged."""
    source = tmp_path / "mlp.pt2"
    source.write_bytes(model.read_bytes())
    status, line = run_cli(["lower", source, "-o", tmp_path / "out.pte", "--dump-dir", source], capsys, monkeypatch)
    assert status == 2 and line == (
        f"xir: error: --dump-dir {source} is the input {source}: writing it would "
        f"overwrite the input; give another folder"
    ), line
    assert source.read_bytes() == model.read_bytes() and not (tmp_path / "out.pte").exists()
    other = tmp_path / "notes.txt"
    other.write_text("notes")
    status, line = run_cli(["lower", source, "-o", tmp_path / "out.pte", "--dump-dir", other], capsys, monkeypatch)
    assert status == 2 and line == f"xir: error: --dump-dir {other} is a file, not a folder", line


def test_lower_output_under_a_file_names_the_file(model, tmp_path, capsys, monkeypatch):
    """``-o base.pt2/x.pte``: not "File exists: base.pt2"."""
    status, line = run_cli(["lower", model, "-o", model / "x.pte"], capsys, monkeypatch)
    assert status == 2 and line == f"xir: error: cannot write {model / 'x.pte'}: not a folder: {model}", line
