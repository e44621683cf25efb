"""Instruments: objects the pass manager calls around every pass.

Each has ``before_pass``, ``after_pass`` and ``on_failure`` hooks (and pipeline-level hooks).
The built-in ones:

* :class:`PrintIR` prints the IR after every pass, or only after passes that changed it;
* :class:`DumpIR` writes numbered files (``00-input.xir``, ``03-fold-batch-norm.xir``);
* :class:`TimePasses` times each pass and prints a table at the end;
* :class:`VerifyEach` verifies after each pass, naming the pass that broke the IR;
* :class:`Reproducer` writes, on failure, the IR just before the failing pass and the
  pipeline text that makes it fail again (see :func:`run_reproducer`);
* :class:`CheckChanged` checks that a pass's "changed" answer is honest.
"""

from __future__ import annotations

import os
import pickle
import sys
import time
from pathlib import Path
from typing import IO, TYPE_CHECKING

from xir import Graph, VerificationError, print_graph, verify

if TYPE_CHECKING:
    from .manager import PassFailure, PassManager, PipelineResult
    from .pass_base import Pass


class Instrument:
    """Base class: every hook does nothing."""

    def before_pipeline(self, manager: "PassManager", graph: Graph) -> None:
        pass

    def before_pass(self, p: "Pass", graph: Graph, index: int) -> None:
        pass

    def after_pass(self, p: "Pass", graph: Graph, changed: bool, index: int) -> None:
        pass

    def on_failure(self, p: "Pass", graph: Graph, failure: "PassFailure", index: int) -> None:
        pass

    def after_pipeline(self, manager: "PassManager", graph: Graph, result: "PipelineResult") -> None:
        pass


def _open(target: IO[str] | str | os.PathLike | None) -> tuple[IO[str], bool]:
    if target is None:
        return sys.stderr, False
    if isinstance(target, (str, os.PathLike)):
        return open(target, "a", encoding="ascii"), True
    return target, False


class PrintIR(Instrument):
    """Print the IR after every pass (``after="all"``) or only after those that changed it
    (``after="change"``), to a stream or a file (default: stderr)."""

    def __init__(self, after: str = "all", stream: IO[str] | str | os.PathLike | None = None, show_origin: bool = True,
                 before_first: bool = False):
        if after not in ("all", "change"):
            raise ValueError(f"PrintIR(after=...) must be 'all' or 'change', got {after!r}")
        self.after = after
        self.target = stream
        self.show_origin = show_origin
        self.before_first = before_first

    def _write(self, header: str, graph: Graph) -> None:
        stream, owned = _open(self.target)
        try:
            stream.write(f"// ----- {header} -----\n{print_graph(graph, show_origin=self.show_origin)}")
            stream.flush()
        finally:
            if owned:
                stream.close()

    def before_pipeline(self, manager, graph):
        if self.before_first:
            self._write("IR before the pipeline", graph)

    def after_pass(self, p, graph, changed, index):
        if self.after == "all" or changed:
            self._write(f"IR after {p}" + ("" if changed else " (unchanged)"), graph)


class DumpIR(Instrument):
    """Write the IR to ``folder`` as numbered files: ``00-input.xir`` then ``NN-pass-name.xir``
    after pass NN (only after passes that changed it when ``only_changes``)."""

    def __init__(self, folder: str | os.PathLike, only_changes: bool = False, show_origin: bool = True):
        self.folder = Path(folder)
        self.only_changes = only_changes
        self.show_origin = show_origin
        self.files: list[Path] = []

    def _dump(self, name: str, graph: Graph) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / name
        path.write_text(print_graph(graph, show_origin=self.show_origin), encoding="ascii")
        self.files.append(path)

    def before_pipeline(self, manager, graph):
        self._dump("00-input.xir", graph)

    def after_pass(self, p, graph, changed, index):
        if changed or not self.only_changes:
            self._dump(f"{index:02d}-{p.name}.xir", graph)


class TimePasses(Instrument):
    """Time each pass; print a table (pass, seconds, share, changed) after the pipeline."""

    def __init__(self, stream: IO[str] | str | os.PathLike | None = None):
        self.target = stream
        self.rows: list[tuple[str, float, bool]] = []
        self._start = 0.0

    def before_pass(self, p, graph, index):
        self._start = time.perf_counter()

    def after_pass(self, p, graph, changed, index):
        self.rows.append((str(p), time.perf_counter() - self._start, changed))

    def table(self) -> str:
        total = sum(seconds for _, seconds, _ in self.rows) or 1e-12
        width = max([len("pass")] + [len(name) for name, _, _ in self.rows])
        lines = [f"{'pass':<{width}}  {'seconds':>9}  {'share':>6}  changed"]
        for name, seconds, changed in self.rows:
            lines.append(f"{name:<{width}}  {seconds:>9.5f}  {100 * seconds / total:>5.1f}%  {'yes' if changed else 'no'}")
        lines.append(f"{'total':<{width}}  {sum(s for _, s, _ in self.rows):>9.5f}")
        return "\n".join(lines) + "\n"

    def after_pipeline(self, manager, graph, result):
        stream, owned = _open(self.target)
        try:
            stream.write(self.table())
        finally:
            if owned:
                stream.close()


class VerifyEach(Instrument):
    """Verify the IR after every pass. A broken IR raises VerificationError naming the pass and
    the node; the IR just before the pass is kept in ``ir_before``."""

    def __init__(self):
        self.ir_before: str | None = None

    def before_pipeline(self, manager, graph):
        verify(graph)

    def before_pass(self, p, graph, index):
        self.ir_before = print_graph(graph, show_origin=True)

    def after_pass(self, p, graph, changed, index):
        try:
            verify(graph)
        except VerificationError as e:
            raise VerificationError(f"after pass {p.name}: {e.message}", e.node_text) from None

    def on_failure(self, p, graph, failure, index):
        if failure.ir_before is None:
            failure.ir_before = self.ir_before


class Reproducer(Instrument):
    """On failure, write a file holding the pipeline text of the failing pass and the IR just
    before it ran (the pass manager has rolled the graph back to it), and beside it
    ``<path>.constants.pkl`` with the data of the constants, so that a pass that reads weights
    fails again. ``run_reproducer(path)`` makes it fail the same way again."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)

    @property
    def constants_path(self) -> Path:
        return constants_path(self.path)

    def on_failure(self, p, graph, failure, index):
        before = print_graph(graph, show_origin=True)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(f"# xir reproducer: the pass failed with: {_one_line(failure.error)}\n"
                             f"# pipeline: {failure.pipeline_text}\n{before}", encoding="ascii")
        data = {v.name: v.data for v in graph.inputs if v.is_constant and v.data is not None}
        if data:
            with open(self.constants_path, "wb") as f:
                pickle.dump(data, f, protocol=pickle.HIGHEST_PROTOCOL)
        elif self.constants_path.exists():
            self.constants_path.unlink()
        failure.reproducer = str(self.path)
        if failure.ir_before is None:
            failure.ir_before = before


class CheckChanged(Instrument):
    """Fail a pass whose "changed" answer is wrong: compares the IR text before and after."""

    def before_pass(self, p, graph, index):
        self._before = print_graph(graph, show_origin=True)

    def after_pass(self, p, graph, changed, index):
        really = print_graph(graph, show_origin=True) != self._before
        if really != changed:
            raise AssertionError(f"pass {p.name} returned changed={changed}, but the graph {'did' if really else 'did not'} change")


def _one_line(error: BaseException) -> str:
    text = f"{type(error).__name__}: {error}"
    return text.splitlines()[0] if text else type(error).__name__


def constants_path(path: str | os.PathLike) -> Path:
    """Where a reproducer keeps its constants' data: beside it, ``<name>.constants.pkl``."""
    path = Path(path)
    return path.with_name(path.name + ".constants.pkl")


def read_reproducer(path: str | os.PathLike) -> tuple[str, Graph]:
    """The pipeline text and the graph stored in a reproducer file (with its constants' data,
    when the reproducer kept them)."""
    from xir import parse_graph

    text = Path(path).read_text(encoding="ascii")
    pipeline = None
    for line in text.splitlines():
        if line.startswith("# pipeline: "):
            pipeline = line[len("# pipeline: "):].strip()
            break
    if pipeline is None:
        raise ValueError(f"{path}: not an xir reproducer (no '# pipeline:' line)")
    graph = parse_graph(text)
    sidecar = constants_path(path)
    if sidecar.exists():
        with open(sidecar, "rb") as f:
            data = pickle.load(f)
        for value in graph.inputs:
            if value.name in data:
                value.data = data[value.name]
    return pipeline, graph


def run_reproducer(path: str | os.PathLike, instruments=()):
    """Run the pipeline of a reproducer on its IR (it should fail as it did)."""
    from .manager import PassManager

    pipeline, graph = read_reproducer(path)
    return PassManager(pipeline, list(instruments)).run(graph)


__all__ = ["CheckChanged", "DumpIR", "Instrument", "PrintIR", "Reproducer", "TimePasses", "VerifyEach",
           "read_reproducer", "run_reproducer"]
