"""Progress of the long steps of the ``xir`` command, on stderr.

On a terminal (stderr is a tty) a step is one live line, redrawn ten times a second: what it is
doing, a bar when the amount of work is known (``[#####-----] 3/8 delegates``), and the elapsed
time; it ends as ``[model.pt2] lowering ... done in 4.2s``. Otherwise (a pipe, a file, a test)
every step is a plain line when it starts, ``[model.pt2] lowering ...``, and a known amount of
work adds a line per item. ``XIR_PROGRESS=bar`` or ``XIR_PROGRESS=plain`` chooses either way.

Imports nothing heavy: the ``xir`` command's fast paths (``passes``, ``dump`` of IR text) use it too.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from typing import IO, Iterator

BAR_WIDTH = 20


def live_wanted(stream: IO[str] | None = None) -> bool:
    choice = os.environ.get("XIR_PROGRESS", "").strip().lower()
    if choice in ("bar", "live", "tty"):
        return True
    if choice in ("plain", "lines", "none"):
        return False
    stream = sys.stderr if stream is None else stream
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _elapsed(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, seconds = divmod(int(seconds), 60)
    return f"{minutes}m{seconds:02d}s"


class Step:
    """One running step; ``advance``/``total`` drive the bar, ``detail`` what is shown after it."""

    def __init__(self, progress: "Progress", label: str, doing: str, total: int | None, unit: str):
        self.progress, self.label, self.doing = progress, label, doing
        self.total, self.unit = total, unit
        self.done = 0
        self.detail = ""
        self.start = time.monotonic()

    def set_total(self, total: int | None, unit: str | None = None) -> None:
        self.total = total
        if unit is not None:
            self.unit = unit

    def advance(self, detail: str = "", count: int = 1) -> None:
        """One more item done (``detail``: what is being done now)."""
        self.done += count
        self.detail = detail
        self.progress._item(self)

    def note(self, detail: str, plain: bool = True) -> None:
        """What the step is doing now (a phase within it), without counting an item; ``plain=False``:
        shown on the live line only (no line of its own when stderr is not a terminal)."""
        self.detail = detail
        if plain or self.progress.live:
            self.progress._item(self, counted=False)

    def line(self, width: int | None = None) -> str:
        text = f"[{self.label}] {self.doing}"
        if self.total:
            filled = min(BAR_WIDTH, BAR_WIDTH * self.done // max(self.total, 1))
            text += f"  [{'#' * filled}{'-' * (BAR_WIDTH - filled)}] {self.done}/{self.total} {self.unit}".rstrip()
        if self.detail:
            text += f"  {self.detail}"
        text += f"  {_elapsed(time.monotonic() - self.start)}"
        if width and len(text) > width - 1:
            text = text[: width - 4] + "..."
        return text


class Progress:
    """Shows steps on ``stream`` (stderr): live on a terminal, plain lines otherwise."""

    def __init__(self, stream: IO[str] | None = None, live: bool | None = None):
        self.stream = stream
        self.live = live_wanted(stream) if live is None else live
        self._current: Step | None = None  # the innermost running step
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def current(self) -> Step | None:
        return self._current

    @property
    def out(self) -> IO[str]:
        return sys.stderr if self.stream is None else self.stream

    # ------------------------------------------------------------------ plain lines
    def message(self, label: str, text: str, more: bool = False) -> None:
        """A line of its own (a note); clears the live line first."""
        with self._lock:
            self._clear()
            print(f"[{label}] {text}{' ...' if more else ''}", file=self.out, flush=True)
            self._draw()

    # ------------------------------------------------------------------------ steps
    @contextlib.contextmanager
    def step(self, label: str, doing: str, total: int | None = None, unit: str = "") -> Iterator[Step]:
        step = Step(self, label, doing, total, unit)
        outer = self._current
        if outer is not None and self.live:  # a step within a step: end the outer line's drawing
            with self._lock:
                self._clear()
        self._current = step
        if self.live:
            self._start_thread()
        else:
            print(f"[{label}] {doing} ...", file=self.out, flush=True)
        ok = False
        try:
            yield step
            ok = True
        finally:
            self._current = outer
            if self.live:
                with self._lock:
                    self._clear()
                    end = f"done in {_elapsed(time.monotonic() - step.start)}" if ok else "failed"
                    print(f"[{label}] {doing} ... {end}", file=self.out, flush=True)
                if outer is None:
                    self._stop_thread()

    def _item(self, step: Step, counted: bool = True) -> None:
        if self.live:
            with self._lock:
                self._draw()
        elif step.detail:  # plain: a line per item (or phase) that says what it is
            where = f" {step.done}/{step.total}" if counted and step.total else ""
            print(f"[{step.label}]{where} {step.detail}", file=self.out, flush=True)

    # ------------------------------------------------------------------- live line
    def _width(self) -> int:
        try:
            return os.get_terminal_size(self.out.fileno()).columns
        except (OSError, AttributeError, ValueError):
            return 120

    def _draw(self) -> None:
        if self.live and self._current is not None:
            self.out.write("\r" + self._current.line(self._width()) + "\x1b[K")
            self.out.flush()

    def _clear(self) -> None:
        if self.live:
            self.out.write("\r\x1b[K")
            self.out.flush()

    def _start_thread(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()

        def run():
            while not self._stop.wait(0.1):
                with self._lock:
                    self._draw()

        self._thread = threading.Thread(target=run, name="xir-progress", daemon=True)
        self._thread.start()

    def _stop_thread(self) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None


@contextlib.contextmanager
def delegate_progress(step: Step, partitioners=()) -> Iterator[None]:
    """Count ExecuTorch's XNNPACK preprocessing of each delegate as an item of ``step`` (the
    total is the number of groups xir's partitioner planned, known once it has partitioned).
    Wraps ``XnnpackBackend.preprocess`` for the duration only; ExecuTorch looks it up on the class."""
    try:
        from executorch.backends.xnnpack.xnnpack_preprocess import XnnpackBackend
    except Exception:  # pragma: no cover (no XNNPACK backend: nothing to count)
        yield
        return
    original = XnnpackBackend.__dict__.get("preprocess")
    if not isinstance(original, (staticmethod, classmethod)):  # pragma: no cover (another ExecuTorch)
        yield
        return
    function = original.__func__
    bound = isinstance(original, classmethod)

    def total() -> int | None:
        counts = [len(p.last_plan.groups) for p in partitioners if getattr(p, "last_plan", None) is not None]
        return sum(counts) if counts else None

    def preprocess(*args, **kwargs):
        step.set_total(total(), "delegates")
        step.note(f"XNNPACK preprocessing delegate {step.done + 1}" + (f" of {step.total}" if step.total else ""))
        try:
            return function(*args, **kwargs)
        finally:
            step.advance("")

    XnnpackBackend.preprocess = classmethod(preprocess) if bound else staticmethod(preprocess)
    try:
        yield
    finally:
        XnnpackBackend.preprocess = original


def pass_notes(step_of) -> "object":
    """A pass-manager instrument that shows the running pass on the live line of the current step
    (``step_of()``: the step, or None); plain output gets no line per pass."""
    from passes import Instrument

    class PassNotes(Instrument):
        def before_pipeline(self, manager, graph):
            self.count = len(manager.passes)

        def before_pass(self, p, graph, index):
            step = step_of()
            if step is not None:
                step.note(f"xir pass {index}/{getattr(self, 'count', '?')}: {p.name}", plain=False)

        def after_pipeline(self, manager, graph, result):
            step = step_of()
            if step is not None:
                step.note("ExecuTorch: partitioning", plain=False)

    return PassNotes()
