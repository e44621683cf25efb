"""The ``xir`` command, run as a user runs it: a subprocess on small programs saved with
torch.export.save.

Every subprocess pays for importing torch and ExecuTorch (several seconds), so the commands the
selected tests need are all started at once, when the module's fixture is set up, and run in
parallel; each test waits for its own. Options are combined so that few lowerings run.
"""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

# key -> the command's arguments (paths relative to the working folder, as a user types them)
COMMANDS: dict[str, list[str]] = {
    # lowerings (the slow ones first: they are started first)
    "demo-mlp": ["demo", "--only", "mlp", "--out", "demo"],
    "lower-fp32": [
        "lower",
        "mlp.pt2",
        "-o",
        "out/new/mlp.pte",
        "--verify",
        "--report",
        "--print-ir-after-all",
        "--dump-dir",
        "dumps",
        "--time-passes",
    ],
    "lower-bf16": [
        "lower",
        "gelu.pt2",
        "-o",
        "gelu-bf16.pte",
        "--dtype",
        "bf16",
        "--per-op",
        "--verify",
        "--report",
        "--pipeline",
        "remove-no-ops,dead-code-elimination",
        "--print-ir-after-change",
    ],
    "lower-static": ["lower", "conv.pt2", "--quantize", "static", "--verify", "--report"],
    "lower-dynamic": ["lower", "mlp-no-inputs.pt2", "-o", "mlp-dynamic.pte", "--quantize", "dynamic", "--verify"],
    "explain": ["explain", "gelu.pt2"],
    "explain-html": ["explain", "conv.pt2", "--html", "reports/conv.html"],
    "dump": ["dump", "gelu.pt2"],
    "dump-after": ["dump", "gelu.pt2", "--after", "remove-no-ops,dead-code-elimination", "--time-passes"],
    "passes": ["passes"],
    # errors
    "missing": ["lower", "nope.pt2"],
    "not-a-program": ["dump", "notes.pt2"],
    "unknown-pass": ["lower", "mlp.pt2", "--pipeline", "remove-no-ops,no-such-pass"],
    "lowering-fails": ["lower", "inverse.pt2", "-o", "inverse.pte"],
}


def uses(*keys: str):
    """The commands a test reads (started in parallel by the fixture)."""

    def mark(function):
        function.cli_commands = keys
        return function

    return mark


def _save_models(folder: Path) -> None:
    import torch
    import torch.nn.functional as F

    class MLP(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2 = torch.nn.Linear(16, 32), torch.nn.Linear(32, 8)

        def forward(self, x):
            return self.fc2(torch.relu(self.fc1(x)))

    class Gelu(torch.nn.Module):
        """linear, relu, a no-op permute, tanh GELU (XNNPACK's GELU is exact: in fp32 xir rewrites it as its
        formula, in bf16 it stays outside), linear"""

        def __init__(self):
            super().__init__()
            self.fc1, self.fc2 = torch.nn.Linear(8, 16), torch.nn.Linear(16, 4)

        def forward(self, x):
            h = torch.relu(self.fc1(x)).permute(0, 1)
            return self.fc2(F.gelu(h, approximate="tanh"))

    class Conv(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 8, 3)

        def forward(self, x):
            return torch.relu(self.conv(x))

    class Inverse(torch.nn.Module):  # exports, but linalg_inv is not in ExecuTorch's edge op set
        def forward(self, x):
            return torch.linalg.inv(x)

    torch.manual_seed(0)
    torch.export.save(torch.export.export(MLP().eval(), (torch.randn(4, 16),)), folder / "mlp.pt2")
    torch.export.save(torch.export.export(Gelu().eval(), (torch.randn(2, 8),)), folder / "gelu.pt2")
    torch.export.save(torch.export.export(Conv().eval(), (torch.randn(1, 3, 8, 8),)), folder / "conv.pt2")
    torch.export.save(torch.export.export(Inverse(), (torch.randn(3, 3) + 3 * torch.eye(3),)), folder / "inverse.pt2")
    # a dynamic batch and no example inputs saved: the command makes random inputs of the right shape
    batch = torch.export.Dim("batch", min=2, max=16)
    ep = torch.export.export(MLP().eval(), (torch.randn(4, 16),), dynamic_shapes=({0: batch},))
    ep.example_inputs = None
    torch.export.save(ep, folder / "mlp-no-inputs.pt2")
    (folder / "notes.pt2").write_text("not a program\n")
    torch.save(MLP().state_dict(), folder / "state-dict.pt2")


def _run(folder: Path, args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "xir_tools.cli", *args], cwd=folder, capture_output=True, text=True, timeout=600
    )


class Runs:
    def __init__(self, folder: Path, futures: dict):
        self.folder = folder
        self.futures = futures

    def __call__(self, key: str) -> subprocess.CompletedProcess:
        return self.futures[key].result()


@pytest.fixture(scope="module")
def xir(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp("cli")
    _save_models(folder)
    wanted = set()
    for item in request.session.items:
        if getattr(item, "module", None) is sys.modules[__name__]:
            wanted.update(getattr(getattr(item, "function", None), "cli_commands", ()))
    pool = ThreadPoolExecutor(max_workers=(os.cpu_count() or 2) + 1)
    futures = {key: pool.submit(_run, folder, COMMANDS[key]) for key in COMMANDS if key in wanted}
    yield Runs(folder, futures)
    pool.shutdown(wait=True, cancel_futures=True)


def ok(result: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert result.returncode == 0, f"exit status {result.returncode}\n{result.stderr[-3000:]}"
    assert "Traceback" not in result.stderr
    assert "xir: error" not in result.stderr
    return result


def error_line(result: subprocess.CompletedProcess) -> str:
    """The one error line (the last line on stderr); exit status 2, no traceback."""
    assert result.returncode == 2, f"exit status {result.returncode}\n{result.stderr[-3000:]}"
    errors = [line for line in result.stderr.splitlines() if line.startswith("xir: error:")]
    assert len(errors) == 1, result.stderr
    assert result.stderr.rstrip().splitlines()[-1] == errors[0]
    assert "Traceback" not in result.stderr
    return errors[0]


# --------------------------------------------------------------------------------- lower


@uses("lower-fp32")
def test_lower_writes_a_pte_that_matches_eager_with_the_instruments(xir):
    result = ok(xir("lower-fp32"))
    pte = xir.folder / "out" / "new" / "mlp.pte"  # the missing folders are created
    assert pte.stat().st_size > 0
    assert (
        f"wrote out/new/mlp.pte ({pte.stat().st_size:,} bytes): 3 op(s) in 1 XNNPACK delegate(s), 0 op(s) outside"
        in result.stdout
    )
    # --report
    assert "xir partition: 3 node(s) delegated to XNNPACK in 1 group(s); 0 left outside" in result.stdout
    # --verify
    assert "verify: max error" in result.stdout and result.stdout.rstrip().endswith(": ok")
    # --print-ir-after-all (stderr), every pass of the default pipeline
    assert "// ----- IR after xnnpack.remove-no-ops (unchanged) -----" in result.stderr
    assert "// ----- IR after dead-code-elimination (unchanged) -----" in result.stderr
    assert "graph @forward {" in result.stderr and "graph @forward {" not in result.stdout
    # --time-passes
    assert "pass " in result.stderr and "seconds" in result.stderr and "\ntotal " in result.stderr
    # --dump-dir
    dumps = sorted(p.name for p in (xir.folder / "dumps").iterdir())
    assert (
        dumps[0] == "00-input.xir"
        and "01-hoist-row-select.xir" in dumps
        and "02-xnnpack.eager-scalar-promotion.xir" in dumps
        and "03-xnnpack.remove-no-ops.xir" in dumps
        and dumps[-1].endswith("-dead-code-elimination.xir")
    )
    # progress on stderr
    assert "[mlp.pt2] loading mlp.pt2 ..." in result.stderr
    assert "[mlp.pt2] lowering to XNNPACK with xir" in result.stderr


@uses("lower-bf16")
def test_lower_bf16_per_op_with_a_pipeline(xir):
    result = ok(xir("lower-bf16"))
    assert (xir.folder / "gelu-bf16.pte").stat().st_size > 0
    assert "[gelu.pt2] casting to bf16 and re-exporting ..." in result.stderr
    assert "lowering to XNNPACK with xir (bf16, per op)" in result.stderr
    # per op: linear, relu and linear each in their own delegate; the tanh GELU outside, in bf16
    assert "3 node(s) delegated to XNNPACK in 3 group(s); 1 left outside" in result.stdout
    assert "aten.gelu  bf16[2,16]  constraint  approximate='tanh'" in result.stdout
    assert "verify: max error" in result.stdout and result.stdout.rstrip().endswith(": ok")
    # --pipeline and --print-ir-after-change: remove-no-ops drops the no-op permute, dead-code-elimination changes nothing
    assert "// ----- IR after remove-no-ops -----" in result.stderr
    assert "IR after dead-code-elimination" not in result.stderr
    assert "IR after fold-batch-norm" not in result.stderr


@uses("lower-static")
def test_lower_quantize_static_next_to_the_model(xir):
    result = ok(xir("lower-static"))
    assert (xir.folder / "conv.pte").stat().st_size > 0  # default output: MODEL.pte next to MODEL.pt2
    assert "[conv.pt2] quantizing (static) with XNNPACKQuantizer and re-exporting ..." in result.stderr
    assert "in 1 group(s); 0 left outside" in result.stdout
    assert "Q/DQ folded" in result.stdout and "aten.convolution" in result.stdout
    assert result.stdout.rstrip().endswith(": ok")


@uses("lower-dynamic")
def test_lower_quantize_dynamic_without_saved_inputs(xir):
    result = ok(xir("lower-dynamic"))
    assert (xir.folder / "mlp-dynamic.pte").stat().st_size > 0
    assert "no example inputs saved in the program: using random ones of the input shapes" in result.stderr
    assert "note: the re-exported program has static shapes" in result.stderr
    assert "0 op(s) outside" in result.stdout
    assert result.stdout.rstrip().endswith(": ok")


# ------------------------------------------------------------------ explain, dump, passes, demo


@uses("explain")
def test_explain_prints_the_partition_report(xir):
    result = ok(xir("explain"))
    lines = result.stdout.splitlines()
    assert lines[0] == "xir partition: 11 node(s) delegated to XNNPACK in 1 group(s); 0 left outside"
    # (gelu-tanh's final product with 0.5 goes into the second linear: fold-scale-shift-into-linears)
    assert (
        "tag0: 11 node(s): aten.linear x2, aten.relu, aten.mul.Tensor x5, aten.add.Tensor x2, aten.tanh"
        in result.stdout
    )
    assert not list(xir.folder.glob("gelu.pte"))  # explain writes nothing
    assert "[gelu.pt2] XNNPACK preprocessing delegate 1 of 1" in result.stderr  # progress (plain lines: not a tty)


@uses("explain-html")
def test_explain_html_writes_the_page(xir):
    result = ok(xir("explain-html"))
    assert result.stdout.startswith("xir partition: ")
    assert result.stdout.rstrip().endswith("HTML report: reports/conv.html (open it in a browser)")
    page = (xir.folder / "reports" / "conv.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and "var dagre" in page and "aten.convolution" in page
    assert '"passes_recorded":true' in page  # the passes' diffs were recorded


@uses("dump", "dump-after")
def test_dump_and_dump_after_a_pipeline(xir):
    before, after = ok(xir("dump")).stdout, ok(xir("dump-after")).stdout
    assert before.startswith("graph @forward {\n") and before.rstrip().endswith("}")
    assert "input %x: f32[2,8]" in before
    assert "aten.gelu(" in before and "approximate=tanh" in before.replace("'", "").replace('"', "")
    assert "dims=[0, 1]" in before  # the no-op permute
    assert "dims=[0, 1]" not in after and "aten.gelu(" in after
    assert "remove-no-ops" in xir("dump-after").stderr and "total" in xir("dump-after").stderr  # --time-passes
    import xir as ir

    assert ir.print_graph(ir.parse_graph(after))  # the text parses back


@uses("passes")
def test_passes(xir):
    result = ok(xir("passes"))
    assert "remove-no-ops\n    " in result.stdout
    assert "fold-batch-norm{to_affine=true}" in result.stdout
    assert "xnnpack.bf16-bmm-f32-output{enable_bf16=false}" in result.stdout  # lowering's rewrites are registered too


@uses("demo-mlp")
def test_demo_only_mlp(xir):
    result = ok(xir("demo-mlp"))
    rows = [line.split() for line in result.stdout.splitlines() if line.startswith("mlp ")]
    assert [row[:4] for row in rows] == [["mlp", "stock", "yes", "yes"], ["mlp", "xir", "yes", "yes"]]
    assert (xir.folder / "demo" / "mlp-xir.pte").exists() and (xir.folder / "demo" / "mlp-report.txt").exists()


# -------------------------------------------------------------------------------- errors


@uses("missing")
def test_missing_file(xir):
    assert error_line(xir("missing")) == "xir: error: nope.pt2: no such file"


@uses("not-a-program")
def test_not_an_exported_program(xir):
    assert error_line(xir("not-a-program")) == (
        "xir: error: notes.pt2 is not an exported program (a .pt2 file written by torch.export.save): "
        "it is not a zip archive"
    )


@uses("unknown-pass")
def test_unknown_pass(xir):
    result = xir("unknown-pass")
    line = error_line(result)
    assert line.startswith("xir: error: --pipeline: unknown pass 'no-such-pass'; registered passes: ")
    assert "remove-no-ops" in line and "xnnpack.bf16-bmm-f32-output" in line
    assert "loading" not in result.stderr  # checked before any work


@uses("lowering-fails")
def test_a_model_that_fails_to_lower(xir):
    line = error_line(xir("lowering-fails"))
    assert line.startswith("xir: error: lowering inverse.pt2 failed: SpecViolationError: ")
    assert "linalg_inv" in line and line.endswith(" (--debug shows the traceback)")
    assert not (xir.folder / "inverse.pte").exists()


# More errors, checked in this process: the same code paths as the subprocesses above (a subprocess
# each would mostly repeat the multi-second imports of torch and ExecuTorch).


def run_main(argv: list[str], capsys, monkeypatch) -> tuple[int, str, str]:
    from xir_tools import cli

    monkeypatch.setattr(cli, "_quiet_logs", lambda: None)  # keep this process's logging as it is
    status = cli.main(argv)
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.mark.parametrize(
    "argv, message",
    [
        ([], "the following arguments are required: COMMAND (see 'xir --help')"),
        (["lower"], "the following arguments are required: MODEL.pt2 (see 'xir lower --help')"),
        (["lower", "m.pt2", "--bogus"], "unrecognized arguments: --bogus (see 'xir lower --help')"),
        (
            ["lower", "m.pt2", "--dtype", "fp16"],
            "argument --dtype: invalid choice: 'fp16' (choose from 'bf16', 'fp32') (see 'xir lower --help')",
        ),
        (
            ["lower", "m.pt2", "--print-ir-after-all", "--print-ir-after-change"],
            "argument --print-ir-after-change: not allowed with argument --print-ir-after-all (see 'xir lower --help')",
        ),
        (["demo", "--only", "nonesuch"], "argument --only: invalid choice: 'nonesuch'"),
        (["explain", "TMP"], "TMP is a directory, not an exported program (.pt2)"),
        (
            ["lower", "TMP/m.pt2", "--dtype", "bf16", "--quantize", "static"],
            "--dtype bf16 and --quantize cannot be combined (XNNPACK's quantized ops take fp32)",
        ),
        (
            ["lower", "TMP/m.pt2", "-o", "TMP/m.pt2"],
            "-o TMP/m.pt2 is the input TMP/m.pt2: writing it would overwrite the input; give another file",
        ),
        (
            ["dump", "TMP/m.pt2", "--after", "fold-batch-norm{bogus=1}"],
            "--after: pass fold-batch-norm has no option 'bogus'; its options: to_affine",
        ),
        (
            ["explain", "TMP/m.pt2", "--pipeline", "fold-batch-norm{to_affine=maybe}"],
            "--pipeline: pass fold-batch-norm: option to_affine='maybe' is invalid: expected true or false",
        ),
        (
            ["dump", "TMP/m.pt2", "--after", "remove-no-ops{"],
            "--after: pipeline text, column 14: '{' of pass remove-no-ops is never closed",
        ),
    ],
)
def test_argument_errors(argv, message, tmp_path, capsys, monkeypatch):
    (tmp_path / "m.pt2").write_bytes(b"")
    status, _, err = run_main([a.replace("TMP", str(tmp_path)) for a in argv], capsys, monkeypatch)
    assert status == 2
    assert err.strip().splitlines()[-1].startswith("xir: error: " + message.replace("TMP", str(tmp_path))), err
    assert "Traceback" not in err


@uses()
def test_a_torch_save_file(xir, capsys, monkeypatch):
    status, _, err = run_main(["explain", str(xir.folder / "state-dict.pt2")], capsys, monkeypatch)
    assert status == 2
    line = err.strip().splitlines()[-1]
    assert line.startswith(f"xir: error: {xir.folder / 'state-dict.pt2'} is not an exported program")
    assert "it is a torch.save file" in line and "torch.export.save" in line


@uses()
def test_debug_shows_the_traceback(xir, capsys, monkeypatch):
    status, _, err = run_main(
        ["--debug", "lower", str(xir.folder / "inverse.pt2"), "-o", str(xir.folder / "x.pte")], capsys, monkeypatch
    )
    assert status == 2
    assert "Traceback (most recent call last)" in err
    last = err.rstrip().splitlines()[-1]
    assert last.startswith(f"xir: error: lowering {xir.folder / 'inverse.pt2'} failed: SpecViolationError: ")
    assert "--debug shows" not in last


@uses()
def test_verify_exits_with_1_when_the_program_does_not_match(xir, capsys, monkeypatch):
    import xir_tools.harness

    real = xir_tools.harness.run_pte
    monkeypatch.setattr(xir_tools.harness, "run_pte", lambda buffer, inputs: [t + 1 for t in real(buffer, inputs)])
    out = xir.folder / "wrong.pte"
    status, stdout, err = run_main(
        ["lower", str(xir.folder / "mlp.pt2"), "-o", str(out), "--verify"], capsys, monkeypatch
    )
    assert status == 1
    assert stdout.rstrip().endswith(": MISMATCH")
    assert (
        err.rstrip()
        .splitlines()[-1]
        .startswith(f"xir: error: verify: {out} does not match eager PyTorch: max error 1 > ")
    )


def test_not_lowerable_names_the_ops_and_the_reasons(tmp_path, capsys, monkeypatch):
    """An int4 weight-only linear (torchao): XNNPACK takes no such linear with an fp32 input, and its
    dequantize has no kernel outside XNNPACK. The error names the op and the reason (the message was
    cut to its first line, which ends in ':'). torch.export.save pickles the weight (a tensor
    subclass): the archive loads with --trust-pickle only."""
    import torch
    from torchao.quantization import IntxWeightOnlyConfig, quantize_
    from torchao.quantization.granularity import PerGroup

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 32)).eval()
    quantize_(model, IntxWeightOnlyConfig(weight_dtype=torch.int4, granularity=PerGroup(32)))
    path = tmp_path / "int4.pt2"
    torch.export.save(torch.export.export(model, (torch.randn(4, 64),)), path)
    status, _, err = run_main(["lower", str(path)], capsys, monkeypatch)
    assert status == 2
    assert err.rstrip().splitlines()[-1] == (
        f"xir: error: {path}: weight 0.weight (member int4/data/weights/weight_0) is pickled (a tensor subclass: "
        f"a torchao quantized weight, for example): loading it would run code from the file (--trust-pickle, "
        f"or trust_pickle=True, loads it if you trust the file)"
    )
    status, _, err = run_main(["lower", str(path), "--trust-pickle"], capsys, monkeypatch)
    line = err.rstrip().splitlines()[-1]
    assert status == 2 and "Traceback" not in err
    assert line.startswith(
        f"xir: error: lowering {path} failed: NotLowerable: XNNPACK cannot run these ops, and "
        f"their quantize/dequantize ops cannot run outside an XNNPACK delegate either"
    )
    assert "): aten.linear f32[4,32]: " in line and "int8 weight-only linear: an int4 or group-wise weight" in line
    assert "--debug" not in line  # the reason is the message, not a library's failure


def test_debug_flag_before_or_after_the_command():
    from xir_tools.cli import _parser

    assert _parser().parse_args(["--debug", "passes"]).debug is True
    assert _parser().parse_args(["passes", "--debug"]).debug is True
    assert _parser().parse_args(["passes"]).debug is False
