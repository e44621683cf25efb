"""The engines a campaign runs its programs on, chosen by name (``--engine``): ``pool``, worker
processes on this machine (pool.py, the default), and ``ray``, actors on a Ray cluster
(ray_engine.py). Each is a context manager with ``jobs`` (programs run at once), ``run(keyed_tasks)``,
which yields (key, outcome) as programs finish, and ``map(tasks)``, the outcomes in order; an outcome
is the same whichever engine ran it.
"""

from __future__ import annotations

import os
from pathlib import Path

from .pool import Pool
from .ray_engine import EngineError, RayEngine, import_ray

ENGINES = ("pool", "ray")
__all__ = ["ENGINES", "EngineError", "open_engine", "require_engine"]


def default_jobs() -> int:
    return min(2, os.cpu_count() or 1)


def require_engine(name: str) -> None:
    """EngineError when the engine cannot run here (``ray`` without Ray installed)."""
    if name == "ray":
        import_ray()


def open_engine(
    name: str,
    jobs: int | None,
    timeout: float,
    log_dir: str | Path,
    xir_options: dict | None = None,
    address: str | None = None,
    code: str | None = None,
):
    """The engine ``name`` with ``jobs`` workers (None: the pool's default, or a Ray cluster's CPUs
    when ``address`` names one). ``code``: the campaign's code id, which every Ray actor must run."""
    if name == "ray":
        return RayEngine(jobs or (None if address else default_jobs()), timeout, log_dir, xir_options, address, code)
    return Pool(jobs or default_jobs(), timeout, log_dir, xir_options=xir_options)
