"""Which xir a campaign runs: the git commit of its checkout, and its *code id*, a hash of what a
program's outcome depends on (OUTCOME_SOURCES). A journal records both; --resume requires the same
code id, and the Ray engine requires it of every actor (a node with another checkout is refused).
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path


def source_commit() -> str | None:
    """The git commit of the xir checkout this fuzzer runs from ("<sha>+dirty" with uncommitted
    changes to tracked files), or None outside a git checkout."""
    root = Path(__file__).resolve().parents[2]
    try:
        sha = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, check=True, timeout=30
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return sha + ("+dirty" if dirty else "") if sha else None


# What a program's outcome depends on in this repository: the IR, the lowering, the passes, the
# harness that generates, lowers and runs it, and the pinned packages. A campaign is resumable by
# any checkout whose these files are the same (a later commit that changed only docs, tests or the
# report), so that a campaign journal kept in the repository goes on in another session.
OUTCOME_SOURCES = (
    "xir",
    "lowering",
    "passes",
    "xir_tools/harness.py",
    "xir_tools/fuzz/case.py",
    "xir_tools/fuzz/generator.py",
    "xir_tools/fuzz/program.py",
    "xir_tools/fuzz/pool.py",
    "xir_tools/examples.py",
    "pyproject.toml",
)


def source_code_id() -> str | None:
    """A hash of OUTCOME_SOURCES as committed ("<hash>+dirty" when they have uncommitted changes),
    or None outside a git checkout."""
    root = Path(__file__).resolve().parents[2]
    try:
        objects = subprocess.run(
            ["git", "-C", str(root), "rev-parse"] + [f"HEAD:{p}" for p in OUTCOME_SOURCES],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        ).stdout.split()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no", "--"] + list(OUTCOME_SOURCES),
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    code = hashlib.sha1(" ".join(objects).encode()).hexdigest()[:16]
    return code + ("+dirty" if dirty else "")
