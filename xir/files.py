"""Writing files so that a failure loses nothing.

Every file xir writes (a ``.pte``, an HTML report, node data, IR dumps, reproducers, journals)
goes through :func:`write_atomic`: the bytes go to a temporary file beside the target, are
flushed to disk, and only then renamed over it. A write that fails partway (disk full, quota,
an interrupt) leaves the old file as it was and no partial file behind; the temporary files of a
write killed outright (SIGKILL) are removed by the next write to the same place.
"""

from __future__ import annotations

import os
import re
import tempfile
import time
from pathlib import Path

STALE_SECONDS = 60  # a temporary file of a write to the same place untouched this long was left by a killed write


def write_atomic(path: str | os.PathLike, data: bytes | str, encoding: str = "utf-8") -> Path:
    """Write ``data`` to ``path`` through a temporary file in the same folder and a rename.

    ``str`` data is encoded with ``encoding``. Raises ``OSError`` as ``open``/``write`` do; the
    target is then untouched and the temporary file removed."""
    path = Path(path)
    payload = data.encode(encoding) if isinstance(data, str) else bytes(data)
    remove_stale(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent or ".")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())
        if path.exists():
            try:
                os.chmod(tmp, path.stat().st_mode & 0o7777)
            except OSError:
                pass
        else:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path


def remove_stale(path: str | os.PathLike) -> list[Path]:
    """Remove the temporary files (``.NAME.XXXXXXXX.tmp``) that writes of ``path`` killed partway
    (SIGKILL, a power cut: nothing ran to remove them) left beside it, untouched for STALE_SECONDS
    (a younger one may be a write in progress). Returns the files removed."""
    path = Path(path)
    pattern = re.compile(re.escape(f".{path.name}.") + r"[A-Za-z0-9_]{8}\.tmp")
    removed = []
    try:
        entries = list(os.scandir(path.parent or "."))
    except OSError:
        return removed
    now = time.time()
    for entry in entries:
        try:
            if (
                pattern.fullmatch(entry.name)
                and entry.is_file(follow_symlinks=False)
                and now - entry.stat(follow_symlinks=False).st_mtime > STALE_SECONDS
            ):
                os.unlink(entry.path)
                removed.append(Path(entry.path))
        except OSError:
            pass
    return removed


def check_writable(path: str | os.PathLike) -> Path:
    """Check, before any long work, that ``path`` can be written: its folder exists (it is made
    if missing) and accepts a new file, and ``path`` is not a folder. Raises ``OSError`` naming
    the problem; writes nothing that stays."""
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(21, "is a directory", str(path))
    for folder in path.parents:
        if folder.exists():
            if not folder.is_dir():
                raise NotADirectoryError(20, "not a folder", str(folder))
            break
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".check", dir=path.parent or ".")
    os.close(fd)
    os.unlink(tmp)
    return path


__all__ = ["check_writable", "remove_stale", "write_atomic"]
