"""Issue 57, item 2: a journal read back by ``xir fuzz --resume`` is data. Its label is rebuilt
from the outcome and its statuses must be from the fuzzer's closed set: neither becomes a path
outside ``--out`` or text that runs in a repro's source."""

from __future__ import annotations

import json

from tests.security.test_fuzz_resume import _entry, _fuzz, _journal

PAYLOAD = "import os; os.system('touch {marker}')"


def test_a_journal_label_is_no_path_and_no_code(tmp_path):
    """The label of issue 57 (a path up two folders, a docstring's end and code), with the empty
    folder that made its path resolve shipped in the campaign: --resume writes the repro in --out
    under the label its outcome gives, and no file anywhere holds the payload."""
    marker = tmp_path / "marker"
    out = tmp_path / "camp"
    entry = _entry(1000)
    entry["record"]["label"] = 'x/../../escaped"""\n' + PAYLOAD.format(marker=marker) + '\n"""'
    _journal(out, [entry])
    (out / "fp32-seed1000-x").mkdir()
    code, output = _fuzz("--count", "1", "--resume", "--shrink", "none", "--out", str(out))
    assert code == 0 and "resumed: 1 ran before" in output, output[-3000:]
    written = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.py"))
    assert written == ["camp/fp32-seed1000-xir-own-lower-failed.py"], written
    repro = (out / "fp32-seed1000-xir-own-lower-failed.py").read_text()
    assert "os.system" not in repro and "escaped" not in repro
    assert json.loads((out / "programs.jsonl").read_text().splitlines()[1])["record"]["label"] == "xir-own"


def test_a_journal_status_outside_the_closed_set_is_refused(tmp_path):
    """A status that is a path and code: --resume refuses the journal, naming the line and the
    status, and writes nothing."""
    out = tmp_path / "camp"
    entry = _entry(1000)
    entry["record"]["xir"]["status"] = 'lower-failed/../../escaped"""\n' + PAYLOAD.format(marker=tmp_path / "m")
    journal = _journal(out, [entry])
    before = journal.read_text()
    code, output = _fuzz("--count", "1", "--resume", "--shrink", "none", "--out", str(out))
    assert code == 2, output[-3000:]
    assert f"{journal} line 2: the record of fp32 seed 1000: its xir status 'lower-failed/../../escaped" in output
    assert "is none of ok, export-failed" in output, output[-3000:]
    assert journal.read_text() == before and not list(tmp_path.rglob("*.py"))
