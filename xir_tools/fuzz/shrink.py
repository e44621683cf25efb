"""Shrinking a failing program: drop outputs and ops (a dropped op's result replaced by an
operand of the same shape and dtype, or its dependents dropped too) while the failure persists.

``shrink`` is generic: it takes ``evaluate(programs) -> [bool]`` (does each candidate still fail
the same way?), evaluated in batches so that the worker pool runs candidates in parallel; the
first candidate (in order) that still fails is taken, and the search starts again from it.
"""

from __future__ import annotations

import re
import time
from typing import Callable, Iterator

from .program import Program, drop_op, drop_output, size


def failure_key(result: dict | None) -> str:
    """What identifies a failure beyond its class: the exception type of a lowering failure,
    the runtime's source location of a load/run failure, the signal of a crash."""
    if not result:
        return ""
    status, error = result.get("status", ""), result.get("error") or ""
    if status == "lower-failed":
        return _exception_key(error)
    if status in ("load-failed", "run-failed"):
        match = re.search(r"\[([\w.]+:\d+)\]", error)
        return match.group(1) if match else error[:40]
    if status == "crashed":
        match = re.search(r"(SIG\w+|exit status \d+|signal \d+)", error)
        return match.group(1) if match else ""
    return ""


def _exception_key(error: str) -> str:
    """``[in 'Pass'] RootType: first words`` (digits dropped) of a case.first_line text."""
    in_pass = re.search(r"running the '(\w+)' pass", error)
    root = error.rsplit(" <- ", 1)[-1]
    kind, _, message = root.partition(":")
    words = " ".join(re.sub(r"\d+", "N", message).split()[:6])
    return (f"in {in_pass.group(1)}: " if in_pass else "") + f"{kind.strip()}: {words}".strip()


def signature(outcome: dict) -> tuple:
    """The failure a shrunk program must keep: xir's class and key, and stock's class."""
    xir, stock = outcome.get("xir") or {}, outcome.get("stock") or {}
    return (xir.get("status"), failure_key(xir), stock.get("status"))


def candidates(program: Program) -> Iterator[Program]:
    """Smaller programs, most aggressive first: drop an output, then drop an op (last first)."""
    for index in range(len(program.outputs)):
        candidate = drop_output(program, index)
        if candidate is not None:
            yield candidate
    for op in reversed(program.ops):
        candidate = drop_op(program, op.id)
        if candidate is not None:
            yield candidate


def shrink(
    program: Program,
    evaluate: Callable[[list], list],
    batch: int = 2,
    max_evals: int = 150,
    time_budget: float | None = None,
    on_step: Callable[[Program, int], None] | None = None,
):
    """Greedy shrinking. Returns (smallest failing program, number of evaluations)."""
    start = time.monotonic()
    current, evals = program, 0
    seen = {program.module_source()}
    while True:
        pending = []
        for candidate in candidates(current):
            source = candidate.module_source()
            if source not in seen and size(candidate) < size(current):
                seen.add(source)
                pending.append(candidate)
        improved = False
        for index in range(0, len(pending), batch):
            if evals >= max_evals or (time_budget is not None and time.monotonic() - start > time_budget):
                return current, evals
            chunk = pending[index : index + batch]
            verdicts = evaluate(chunk)
            evals += len(chunk)
            hit = next((c for c, v in zip(chunk, verdicts) if v), None)
            if hit is not None:
                current, improved = hit, True
                if on_step is not None:
                    on_step(current, evals)
                break
        if not improved:
            return current, evals
