"""The campaigns of record are data (data/campaigns/<kind>/programs.jsonl.gz): --report reads the
compressed journals and prints the tables kept beside them, and --rerun and --resume find them."""

from __future__ import annotations

import gzip
import subprocess
import sys
from pathlib import Path

import pytest

from xir_tools.fuzz.cli import CampaignError, journal_path, read_journal, rerun_selection

ROOT = Path(__file__).resolve().parents[1]
CAMPAIGNS = sorted(p.parent for p in (ROOT / "data" / "campaigns").rglob("programs.jsonl.gz"))


def test_the_campaigns_are_kept_compressed_and_nothing_else_is_code():
    assert len(CAMPAIGNS) == 14  # four kinds, six re-runs, the Ray re-runs of fp32, static, dynamic, bf16 on Ray
    assert not list((ROOT / "data").rglob("*.py")) and not (ROOT / "campaigns").exists()
    assert not list((ROOT / "data").rglob("programs.jsonl"))


@pytest.mark.parametrize("folder", CAMPAIGNS, ids=lambda p: str(p.relative_to(ROOT / "data" / "campaigns")))
def test_report_of_a_kept_campaign_prints_its_tables(folder):
    done = subprocess.run(
        [sys.executable, "-m", "xir_tools.fuzz", "--report", str(folder.relative_to(ROOT))],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    kept = (folder / "report.txt").read_text().splitlines()
    # (the first line names the commit: the one the journal started at, or the report was made at)
    assert done.stdout.splitlines()[1:] == kept[1:]


def test_a_compressed_journal_reads_as_the_plain_one(tmp_path):
    folder = CAMPAIGNS[0]
    header, entries = read_journal(journal_path(folder))
    plain = tmp_path / "programs.jsonl"
    with gzip.open(folder / "programs.jsonl.gz", "rt", encoding="utf-8") as f:
        plain.write_text(f.read())
    assert read_journal(plain) == (header, entries)
    assert journal_path(tmp_path) == plain  # (the plain journal, a campaign's own, comes first)
    kind = entries[0]["record"]["kind"]
    assert len(rerun_selection(folder, [kind], None)) == sum(e["record"]["kind"] == kind for e in entries)


def test_resume_into_a_compressed_journal_says_to_decompress_it(tmp_path):
    (tmp_path / "programs.jsonl.gz").write_bytes(gzip.compress(b'{"campaign": {}}\n'))
    done = subprocess.run(
        [sys.executable, "-m", "xir_tools.fuzz", "--kind", "fp32", "--count", "1", "--resume", "--out", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2 and "decompress it first" in done.stderr + done.stdout


def test_a_corrupt_compressed_journal_is_a_clear_error(tmp_path):
    (tmp_path / "programs.jsonl.gz").write_bytes(b"\x1f\x8bnot really gzip")
    with pytest.raises(CampaignError, match="not a campaign journal"):
        read_journal(tmp_path / "programs.jsonl.gz")
