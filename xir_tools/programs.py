"""Helpers around lowered programs: what ended up inside delegates, and running a .pte with
ExecuTorch's runtime (the judge of correctness)."""

from __future__ import annotations

import contextlib
import operator
import os
import sys
import tempfile
from collections import Counter
from typing import Any

import torch

from xir.fx_import import op_name

NOT_COMPUTE = ("executorch_call_delegate", "getitem", "sym_size")


def _ops(graph: torch.fx.Graph) -> list[str]:
    return [op_name(n.target) for n in graph.nodes
            if n.op == "call_function" and n.target is not operator.getitem and not any(s in str(n.target) for s in NOT_COMPUTE)]


def delegated_ops(edge_manager: Any, method: str = "forward") -> Counter:
    """Ops inside XNNPACK delegates of an EdgeProgramManager (after lowering), counted."""
    ep = edge_manager.exported_program(method)
    counts: Counter = Counter()
    for name, module in ep.graph_module.named_children():
        original = getattr(module, "original_module", None)
        if original is not None:
            counts.update(_ops(original.graph))
    return counts


def outside_ops(edge_manager: Any, method: str = "forward") -> Counter:
    """Compute ops left in the top-level program (not delegated), counted."""
    return Counter(_ops(edge_manager.exported_program(method).graph))


def delegate_count(edge_manager: Any, method: str = "forward") -> int:
    ep = edge_manager.exported_program(method)
    return sum(1 for n in ep.graph.nodes if n.op == "call_function" and "executorch_call_delegate" in str(n.target))


class LoadError(RuntimeError):
    """The runtime refused the program; ``reason`` is what it printed on stderr."""

    def __init__(self, message: str, reason: str):
        self.reason = reason
        super().__init__(f"{message}\n{reason}".strip())


@contextlib.contextmanager
def captured_stderr():
    """Capture what C++ code writes to file descriptor 2 (the runtime's error log)."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as sink:
        os.dup2(sink.fileno(), 2)
        box = {"text": ""}
        try:
            yield box
        finally:
            _flush_c_stdio()
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            box["text"] = sink.read().decode("utf-8", "replace")


def _flush_c_stdio() -> None:
    try:
        import ctypes

        ctypes.CDLL(None).fflush(None)
    except Exception:
        pass


def _runtime_reason(log: str) -> str:
    lines = [line for line in log.splitlines() if "cpuinfo" not in line and line.strip()]
    return "\n".join(lines[-4:])


def run_pte(buffer: bytes, inputs: tuple, method: str = "forward") -> list[torch.Tensor]:
    """Load ``buffer`` with ExecuTorch's runtime and run ``method`` on ``inputs``. A refused
    load (or run) raises LoadError carrying the runtime's reason from stderr."""
    program, loaded = load_method(buffer, method)
    with captured_stderr() as log:
        try:
            outputs = loaded.execute(list(inputs))
        except RuntimeError as error:
            failure = error
        else:
            failure = None
    if failure is not None:
        raise LoadError(str(failure), _runtime_reason(log["text"])) from None
    del program  # (alive until the outputs are out)
    return list(outputs)


def load_method(buffer: bytes, method: str = "forward"):
    """Load ``buffer`` with ExecuTorch's runtime and return ``(program, loaded method)`` to run
    many times (keep both alive; mutable buffers such as a KV cache persist between runs). A
    refused load raises LoadError carrying the runtime's reason from stderr."""
    from executorch.runtime import Runtime

    with captured_stderr() as log:
        try:
            program = Runtime.get().load_program(buffer)
            loaded = program.load_method(method)
        except RuntimeError as error:
            failure = error
        else:
            failure = None
    if failure is not None:
        raise LoadError(str(failure), _runtime_reason(log["text"])) from None
    return program, loaded


def max_error(actual, expected) -> float:
    actual = actual if isinstance(actual, (list, tuple)) else [actual]
    expected = expected if isinstance(expected, (list, tuple)) else [expected]
    if len(actual) != len(expected):
        raise AssertionError(f"{len(actual)} outputs, expected {len(expected)}")
    worst = 0.0
    for a, e in zip(actual, expected):
        if a.shape != e.shape:
            raise AssertionError(f"output shape {tuple(a.shape)}, expected {tuple(e.shape)}")
        worst = max(worst, (a.float() - e.float()).abs().max().item() if a.numel() else 0.0)
    return worst
