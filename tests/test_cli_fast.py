"""The ``xir`` command's fast paths import neither torch nor ExecuTorch: ``xir --help``,
``xir passes``, ``xir dump`` of IR text, and the errors found before any work. Each case runs in a
fresh interpreter and reports which heavy modules were imported (no timing assertion).
And the progress display of the long steps."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

PROBE = textwrap.dedent("""
    import contextlib, io, json, sys
    from xir_tools.cli import main
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(sys.argv[1:])
        except SystemExit as stop:  # --help
            status = stop.code
    heavy = sorted(m for m in ("torch", "executorch", "numpy", "torchao") if m in sys.modules)
    print(json.dumps({"status": status, "out": out.getvalue(), "err": err.getvalue(), "heavy": heavy}))
""")

IR = textwrap.dedent("""\
    graph @forward {
      param %w: f32[4,8]
      input %x: f32[2,8]
      %0: f32[2,4] = aten.linear(%x, %w)
      %1: f32[4,2] = aten.permute_copy(%0) {dims=[1, 0]}
      %2: f32[2,4] = aten.permute_copy(%1) {dims=[1, 0]}
      %3: f32[2,4] = aten.relu(%2)
      return %3
    }
    """)


# IR text that does not parse or verify: the error names the file, the line and the column
BAD_IR = {
    "unbalanced.xir": IR.replace("input %x: f32[2,8]", "input %x: f32[2,8"),
    "huge-integer.xir": IR.replace("input %x: f32[2,8]", "input %x: f32[2," + "9" * 5000 + "]"),
    "trailing.xir": IR + "}\n",
    "nested.xir": IR.replace("{dims=[1, 0]}", "{dims=" + "[" * 10000 + "]" * 10000 + "}", 1),
    "wrong-dims.xir": IR.replace("{dims=[1, 0]}", "{dims=[5, 0]}", 1),
}


def probe(args: list[str], cwd: Path) -> dict:
    result = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[-1])


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("fast")
    (folder / "model.xir").write_text(IR)
    (folder / "broken.xir").write_text(IR.replace("aten.linear(%x, %w)", "aten.linear(%y, %w)"))
    for name, text in BAD_IR.items():
        (folder / name).write_text(text)
    (folder / "adir").mkdir()
    (folder / "afile").write_text("a file, not a folder\n")
    return folder


def test_passes_lists_every_pass_without_torch(folder):
    result = probe(["passes"], folder)
    assert result["status"] == 0 and result["heavy"] == []
    out = result["out"]
    assert "remove-no-ops\n    " in out and "fold-batch-norm{to_affine=true}" in out
    # lowering's passes, with their options and their docs
    assert "xnnpack.bf16-bmm-f32-output{enable_bf16=false}\n    Rewrite bf16 bmm as XNNPACK" in out
    assert "fold-constants{max_elements=65536}\n    " in out
    assert "xnnpack.casts-as-converts" in out and "xnnpack.safe-softmax" in out


def test_passes_shows_the_phases_without_torch(folder):
    from lowering.pipeline import describe

    result = probe(["passes", "--phases"], folder)
    assert result["status"] == 0 and result["heavy"] == [], result["err"]
    assert result["out"] == describe()
    assert result["out"].startswith("as-exported: ") and "   1 hoist-row-select\n" in result["out"]


def test_the_listing_is_the_whole_registry():
    """Every listed pass (the built-in ones and the backend's entry points) is in ``xir passes``."""
    from passes import pass_help
    from passes.registry import listed

    fast = probe(["passes"], ROOT)["out"]
    # the project's own passes (other tests define passes of their own in this process)
    rows = [(name, options, description) for name, options, description in pass_help() if name in listed()]
    for name, options, description in rows:
        assert f"{name}{'{' + options + '}' if options else ''}\n    {description}" in fast
    assert len(rows) == 49  # (the old names of renamed passes are not listed)


def test_help_without_torch(folder):
    for args in (["--help"], ["dump", "--help"], ["explain", "--help"]):
        result = probe(args, folder)
        assert result["status"] == 0 and result["heavy"] == [], args
        assert "usage: xir" in result["out"]


def test_dump_of_ir_text_without_torch(folder):
    result = probe(["dump", "model.xir"], folder)
    assert result["status"] == 0 and result["heavy"] == [], result["err"]
    assert result["out"].startswith("graph @forward {\n") and "aten.permute_copy" in result["out"]
    result = probe(["dump", "model.xir", "--after", "remove-no-ops,dead-code-elimination", "--time-passes"], folder)
    assert result["status"] == 0 and result["heavy"] == [], result["err"]
    assert "permute" not in result["out"] and "aten.relu(%0)" in result["out"]
    assert "remove-no-ops" in result["err"] and "total" in result["err"]
    import xir

    assert xir.parse_graph(result["out"])  # parses back


def test_explain_of_ir_text_without_torch(folder):
    result = probe(["explain", "model.xir", "--html", "out/model.html"], folder)
    assert result["status"] == 0 and result["heavy"] == [], result["err"]
    assert result["out"].startswith("xir partition: 4 node(s) delegated to XNNPACK in 1 group(s)")
    assert "HTML report: out/model.html" in result["out"]
    page = (folder / "out" / "model.html").read_text()
    assert "aten.permute_copy" in page and "var dagre" in page


def test_explain_explorer_writes_node_data_and_prints_the_command(folder):
    result = probe(["explain", "model.xir", "--explorer"], folder)
    assert result["status"] == 0 and result["heavy"] == [], result["err"]
    lines = result["out"].splitlines()
    assert "  python -m xir_tools.explorer model.xir --node-data model.xir.xir-delegates.json" in lines
    assert any(
        line.startswith(
            "  (or: model-explorer model.xir --extensions=xir_tools.explorer "
            "--node_data_paths=model.xir.xir-delegates.json"
        )
        for line in lines
    )
    data = json.loads((folder / "model.xir.xir-delegates.json").read_text())
    results = data["forward (xir, as written)"]["results"]
    assert len(results) == 4 and {r["value"] for r in results.values()} == {0}  # one delegate, its colour


@pytest.mark.parametrize(
    "args, message",
    [
        (["dump", "broken.xir"], "xir: error: broken.xir:4:30: unknown value %y"),
        (["dump", "nope.pt2"], "xir: error: nope.pt2: no such file"),
        (["lower"], "xir: error: the following arguments are required: MODEL.pt2 (see 'xir lower --help')"),
        (["passes", "--bogus"], "xir: error: unrecognized arguments: --bogus (see 'xir passes --help')"),
        (["demo", "--only", "nonesuch"], "xir: error: argument --only: invalid choice: 'nonesuch'"),
        (["lower", "model.xir", "--pipeline", "no-such-pass"], "xir: error: --pipeline: unknown pass 'no-such-pass'"),
        (
            ["dump", "model.xir", "--after", "fold-batch-norm{bogus=1}"],
            "xir: error: --after: pass fold-batch-norm has no option 'bogus'",
        ),
        (["dump", "model.xir", "--dtype", "bf16"], "xir: error: --dtype and --quantize apply to an exported program"),
        # the output is checked before the model is loaded (the model here is not even a program)
        (["lower", "model.xir", "-o", "adir"], "xir: error: cannot write adir: is a directory"),
        (
            ["lower", "model.xir", "-o", "afile/model.pte"],
            "xir: error: cannot write afile/model.pte: not a folder: afile",
        ),
        (
            ["explain", "model.xir", "--html", "afile/model.html"],
            "xir: error: cannot write afile/model.html: not a folder: afile",
        ),
        # bad IR text, read by dump and by explain
        (["dump", "unbalanced.xir"], "xir: error: unbalanced.xir:3:16: "),
        (["explain", "huge-integer.xir"], "xir: error: huge-integer.xir:3:19: "),
        (["dump", "trailing.xir"], "xir: error: trailing.xir:10:1: "),
        (["explain", "nested.xir"], "xir: error: nested.xir:5:"),
        (["dump", "wrong-dims.xir"], "xir: error: wrong-dims.xir:5:3: aten.permute_copy: "),
    ],
)
def test_errors_without_torch(folder, args, message):
    result = probe(args, folder)
    assert result["status"] == 2 and result["heavy"] == [], result
    assert result["err"].rstrip().splitlines()[-1].startswith(message), result["err"]
    assert result["err"].count("xir: error:") == 1 and "Traceback" not in result["err"], result["err"]


def test_example_names_are_the_examples():
    from xir_tools.cli import EXAMPLE_NAMES
    from xir_tools.examples import EXAMPLES

    assert EXAMPLE_NAMES == tuple(EXAMPLES)


# -------------------------------------------------------------------------------- progress


def test_progress_plain_lines():
    from xir_tools.progress import Progress

    stream = io.StringIO()
    progress = Progress(stream, live=False)
    with progress.step("m.pt2", "lowering", total=2, unit="delegates") as step:
        step.note("xir pass 1/3: remove-no-ops", plain=False)  # live line only
        step.note("XNNPACK preprocessing delegate 1 of 2")
        step.advance()
        step.advance("delegate 2 done")
    progress.message("m.pt2", "a note")
    assert stream.getvalue().splitlines() == [
        "[m.pt2] lowering ...",
        "[m.pt2] XNNPACK preprocessing delegate 1 of 2",
        "[m.pt2] 2/2 delegate 2 done",
        "[m.pt2] a note",
    ]


def test_progress_live_line_has_a_bar_and_the_elapsed_time():
    from xir_tools.progress import Progress

    stream = io.StringIO()
    progress = Progress(stream, live=True)
    with progress.step("m.pt2", "lowering", total=4, unit="delegates") as step:
        step.advance("delegate 1")
        step.advance("delegate 2")
        assert progress.current is step
    with pytest.raises(ValueError), progress.step("m.pt2", "serializing"):
        raise ValueError("boom")
    text = stream.getvalue()
    assert "\r[m.pt2] lowering  [##########----------] 2/4 delegates  delegate 2  0.0s\x1b[K" in text
    lines = [line.split("\r")[-1].replace("\x1b[K", "") for line in text.split("\n") if line]
    assert lines[0].startswith("[m.pt2] lowering ... done in ") and lines[0].endswith("s")
    assert lines[1] == "[m.pt2] serializing ... failed"
    assert progress.current is None and progress._thread is None


def test_progress_choice_by_environment(monkeypatch):
    from xir_tools.progress import live_wanted

    monkeypatch.setenv("XIR_PROGRESS", "bar")
    assert live_wanted(io.StringIO())
    monkeypatch.setenv("XIR_PROGRESS", "plain")
    assert not live_wanted(io.StringIO())
    monkeypatch.delenv("XIR_PROGRESS")
    assert not live_wanted(io.StringIO())  # not a terminal


def test_optimum_without_the_extra_names_the_install(folder):
    """``xir optimum`` where optimum-executorch is not importable (blocked here, so the test means
    the same with or without the extra installed): one line naming what to install, status 2."""
    code = "import sys; sys.modules['optimum'] = None\n" + PROBE
    result = subprocess.run(
        [sys.executable, "-c", code, "optimum", "--model", "m", "-o", "optimum-out"],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["status"] == 2, report
    assert "optimum-executorch is not installed" in report["err"] and "pip install 'xir[optimum]'" in report["err"]
    assert not (folder / "optimum-out").exists()
