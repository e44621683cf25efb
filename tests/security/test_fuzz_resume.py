"""Items 8 and 4 of issue 28 for the fuzzer: ``xir fuzz --resume`` runs no program stored in a
journal (it rebuilds each from its seed and refuses one its seed does not build), a journal's
torn last line is dropped with a note, and the journal and repro files are written atomically.

The journals are written by hand with the header a campaign at this checkout writes (so that
--resume accepts them) and entries whose stored program would create a marker file if run.
"""

from __future__ import annotations

import json
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from xir_tools.fuzz.cli import source_code_id, source_commit
from xir_tools.fuzz.generator import GENERATOR, generate

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = ["--kind", "fp32", "--seed", "1000", "--jobs", "1", "--max-ops", "2", "--min-ops", "2", "--timeout", "300"]


def _journal(folder: Path, entries: list[dict], generator: int | None = GENERATOR) -> Path:
    """``folder/programs.jsonl`` as a campaign with SETTINGS at this checkout writes it (``generator``
    None: as one written before the journal named the generator's edition)."""
    folder.mkdir(parents=True, exist_ok=True)
    header = {
        "campaign": {
            "commit": source_commit(),
            "code": source_code_id(),
            "max_ops": 2,
            "min_ops": 2,
            "timeout": 300.0,
            **({} if generator is None else {"generator": generator}),
        }
    }
    path = folder / "programs.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in [header] + entries) + "\n")
    return path


def _entry(seed: int, label: str = "xir-own", program: dict | None = None) -> dict:
    """A journal entry of fp32 ``seed``: xir failed to lower it (stock ok) when ``label`` is
    xir-own, so a resumed campaign shrinks it and writes its repro."""
    xir = {"status": "lower-failed", "error": "RuntimeError: boom"} if label == "xir-own" else {"status": "ok"}
    record = {"kind": "fp32", "seed": seed, "label": label, "xir": xir, "stock": {"status": "ok"}}
    return {"record": record, "program": program or generate(seed, "fp32", max_ops=2, min_ops=2).to_json()}


def _fuzz(*extra: str, preexec_fn=None) -> tuple[int, str]:
    done = subprocess.run(
        [sys.executable, "-m", "xir_tools.fuzz", *SETTINGS, *extra],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        preexec_fn=preexec_fn,
    )
    return done.returncode, done.stdout + done.stderr


def test_resume_runs_no_journalled_program_and_refuses_one_its_seed_does_not_build(tmp_path):
    """A journalled failure whose stored program writes a marker file in every op's __init__:
    --resume (which shrinks the failure) must not run it, and refuses the journal naming the
    seed. With the program its seed builds, the same journal resumes and gets its repro."""
    marker = tmp_path / "marker"
    out = tmp_path / "campaign"
    genuine = generate(1000, "fp32", max_ops=2, min_ops=2).to_json()
    evil = json.loads(json.dumps(genuine))
    for op in evil["ops"]:
        op["init"] = op["init"] + [f"__import__('pathlib').Path({str(marker)!r}).write_text('ran')"]
    journal = _journal(out, [_entry(1000, program=evil)])
    before = journal.read_text()

    code, output = _fuzz("--count", "1", "--resume", "--shrink", "xir", "--out", str(out))
    assert not marker.exists(), output[-3000:]
    assert code == 2, output[-3000:]
    assert "the program journalled for fp32 seed 1000 is not the one seed 1000 builds" in output, output[-3000:]
    assert journal.read_text() == before and not list(out.glob("*.py"))

    _journal(out, [_entry(1000, program=genuine)])
    code, output = _fuzz("--count", "1", "--resume", "--shrink", "none", "--out", str(out))
    assert code == 0 and "resumed: 1 ran before" in output, output[-3000:]
    (repro,) = out.glob("fp32-seed1000-xir-own-*.py")
    assert "write_text('ran')" not in repro.read_text() and not marker.exists()


def test_a_torn_last_line_is_dropped_with_a_note(tmp_path):
    """A campaign killed while writing its last journal line: --resume drops that line, says so,
    and goes on (here nothing is left to run)."""
    journal = _journal(tmp_path, [_entry(1000, label="ok")])
    with open(journal, "a") as f:
        f.write('{"record": {"kind": "fp32", "se')
    code, output = _fuzz("--count", "1", "--resume", "--shrink", "none", "--out", str(tmp_path))
    assert code == 0 and "resumed: 1 ran before" in output, output[-3000:]
    assert f"{journal} line 3 is no complete entry (a campaign stopped while writing it): ignored" in output
    assert len(journal.read_text().splitlines()) == 2


def _limit_file_size(limit: int):
    """A preexec_fn: the child's files may not grow past ``limit`` bytes (as a full disk or a
    quota stops a write partway), and a write past it fails instead of killing the child."""

    def limit_file_size():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return limit_file_size


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_FSIZE stops a write partway on Linux")
def test_a_journal_rewrite_that_fails_partway_leaves_the_journal(tmp_path):
    """--resume rewrites the journal (dropping a torn line); when that write fails partway, the
    journal of every program run so far is intact, and the error names the file."""
    journal = _journal(tmp_path, [_entry(seed, label="ok") for seed in range(1000, 1004)])
    before = journal.read_text()
    code, output = _fuzz(
        "--count",
        "4",
        "--resume",
        "--shrink",
        "none",
        "--out",
        str(tmp_path),
        preexec_fn=_limit_file_size(len(before) // 2),
    )
    assert code == 2 and f"cannot write {journal}: File too large" in output, output[-3000:]
    assert journal.read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["programs.jsonl"]


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_FSIZE stops a write partway on Linux")
def test_a_repro_that_fails_partway_leaves_the_old_one(tmp_path):
    """write_repro over an earlier repro of the same name fails partway: the earlier one is intact."""
    script = f"""
from xir_tools.fuzz.generator import generate
from xir_tools.fuzz.repro import repro_name, write_repro
program = generate(1000, "fp32", max_ops=2, min_ops=2)
outcome = {{"xir": {{"status": "lower-failed", "error": "boom"}}, "stock": {{"status": "ok"}}}}
open({str(tmp_path)!r} + "/" + repro_name(program, outcome, "xir-own"), "w").write("# an earlier repro\\n")
import resource, signal
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
try:
    write_repro({str(tmp_path)!r}, program, outcome, "xir-own")
except OSError as error:
    print("write failed:", error.strerror)
"""
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert "write failed: File too large" in done.stdout, done.stdout + done.stderr
    (repro,) = tmp_path.iterdir()
    assert repro.read_text() == "# an earlier repro\n"


def test_a_journal_that_names_no_generator_edition_resumes_with_the_first(tmp_path):
    """A journal written before editions were recorded holds the first edition's programs (no
    select): --resume rebuilds them with it, and refuses a --generator that differs, by name."""
    out = tmp_path / "campaign"
    first = generate(1003, "fp32", max_ops=2, min_ops=2, generator=1).to_json()
    _journal(out, [_entry(1003, label="ok", program=first)], generator=None)
    code, output = _fuzz("--seed", "1003", "--count", "1", "--resume", "--generator", "2", "--out", str(out))
    assert code == 2 and "built its programs with --generator 1, this run asks for 2" in output, output[-3000:]
    code, output = _fuzz("--seed", "1003", "--count", "1", "--resume", "--out", str(out))
    assert code == 0 and "resumed: 1 ran before" in output, output[-3000:]
