"""Issue 28, item 4 at the CLI: ``xir lower`` checks its output path before any work, and writes
the .pte through a temporary file and a rename, so a write that fails partway (disk full, quota)
leaves the old file as it was and no partial file behind."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]

# ``xir lower`` with a file size limit (as a quota sets) that starts once the program is serialized:
# writing the .pte fails with EFBIG halfway (SIGXFSZ ignored, as a write(2) then fails instead of
# killing the process)
QUOTA = textwrap.dedent("""
    import resource, signal, sys
    from executorch.exir.program._program import ExecutorchProgramManager

    serialize = ExecutorchProgramManager.buffer.fget

    def buffer(self):
        data = serialize(self)
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (len(data) // 2, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
        return data

    ExecutorchProgramManager.buffer = property(buffer)
    from xir_tools.cli import main
    sys.exit(main(sys.argv[1:]))
""")

OLD = b"the .pte of yesterday\n" * 4096  # larger than the new one: a truncated write would show


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("outputs") / "mlp.pt2"
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 8)).eval()
    torch.export.save(torch.export.export(module, (torch.randn(2, 64),)), path)
    return path


def test_a_write_that_fails_partway_leaves_the_old_output(model, tmp_path):
    out = tmp_path / "out" / "mlp.pte"
    out.parent.mkdir()
    out.write_bytes(OLD)
    result = subprocess.run(
        [sys.executable, "-c", QUOTA, "lower", str(model), "-o", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 2, result.stderr[-3000:]
    assert result.stderr.rstrip().splitlines()[-1] == f"xir: error: cannot write {out}: File too large"
    assert "Traceback" not in result.stderr
    assert out.read_bytes() == OLD
    assert [p.name for p in out.parent.iterdir()] == ["mlp.pte"]  # no temporary file left


def test_the_output_is_checked_before_loading(model, tmp_path, capsys, monkeypatch):
    from xir_tools import cli

    monkeypatch.setattr(cli, "_quiet_logs", lambda: None)
    (tmp_path / "adir").mkdir()
    status = cli.main(["lower", str(model), "-o", str(tmp_path / "adir")])
    err = capsys.readouterr().err
    assert (
        status == 2 and err.rstrip().splitlines()[-1] == f"xir: error: cannot write {tmp_path / 'adir'}: is a directory"
    )
    assert "loading" not in err and "lowering" not in err
