"""Worker processes (spawn context) that run cases, so that a crash or a hang in native code is
one failed case, not a dead campaign.

Each worker is persistent (imports and warm-up are paid once) and runs one task at a time. A
task is a program (or a (seed, kind) to generate one) and the sides to run. The worker reports
each phase as it starts (prepare, xir, stock) and each side's result as it ends; when the worker
dies or a phase exceeds the time limit, the phase it was in is marked crashed/timeout (prepare:
both sides), the worker is replaced, and the sides not yet run are run in a fresh worker.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from collections import deque
from multiprocessing.connection import wait
from pathlib import Path

SIDES = ("xir", "stock")


# ------------------------------------------------------------------------------ worker side


def _worker_main(conn, log_path: str) -> None:
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    import logging
    import warnings

    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    import torch

    torch.set_num_threads(1)  # the workers share the machine's cores
    import lowering.fx.partitioner  # noqa: F401  (imports ahead of the first task: torch, ExecuTorch)
    from xir_tools.fuzz import case

    case.memoize_cia_ops()
    case.share_node_sources()
    case.cache_callable_annotations()
    conn.send(("ready",))
    while True:
        try:
            task = conn.recv()
        except EOFError:
            return
        if task is None:
            return
        try:
            result = execute(
                task, lambda name: conn.send(("phase", name)), lambda name, result: conn.send(("side", name, result))
            )
            conn.send(("done", result))
        except BaseException as error:  # a bug of the harness: reported, the worker goes on
            conn.send(("done", {"harness_error": case.first_line(error)}))


_WARM = {"quantization": False}
WARMUP_TIMEOUT = 900.0


def warm_up_quantization() -> None:
    """Quantize a tiny batch norm once per worker, before the first quantized program with a batch
    norm: torchao's convert_pt2e exports ~100 QAT conv-bn patterns for any graph that still has a
    batch norm (20-60 s); case.memoize_pattern_exports keeps them, so that this cost is not
    charged to that program's time limit."""
    import torch

    from xir_tools.examples import quantize_module
    from xir_tools.fuzz import case

    case.memoize_pattern_exports()
    module = torch.nn.Sequential(torch.nn.BatchNorm2d(1)).eval()  # after a conv it would be fused in prepare
    quantize_module(module, (torch.randn(1, 1, 2, 2),), "static")
    _WARM["quantization"] = True


def execute(task: dict, on_phase=None, on_side=None) -> dict:
    """Run one task in this process: {"program": Program-as-json | None, "seed", "kind",
    "max_ops", "min_ops", "sides"}. Returns {"program": json, "prepare": ..., side: ...}."""
    from xir_tools.fuzz import case
    from xir_tools.fuzz.generator import GENERATOR, generate
    from xir_tools.fuzz.program import Program, instantiate

    report = on_phase or (lambda name: None)
    on_side = on_side or (lambda name, result: None)

    def on_phase(name):
        report(name)
        if task.get("inject_crash") == name:  # tests: a native crash in this phase
            os.abort()

    if task.get("program") is not None:
        program = Program.from_json(task["program"])
    else:
        on_phase("generate")
        program = generate(
            task["seed"],
            task["kind"],
            max_ops=task.get("max_ops", 12),
            min_ops=task.get("min_ops", 3),
            generator=task.get("generator", GENERATOR),
        )
        on_side("program", program.to_json())
    if (
        program.kind in case.QUANTIZED
        and any(op.kind == "batch_norm" for op in program.ops)
        and not _WARM["quantization"]
    ):
        on_phase("warmup")
        warm_up_quantization()
    module_class, make_inputs = instantiate(program.module_source(), f"<xir_fuzz {program.kind} seed {program.seed}>")
    outcome = case.run_case(
        module_class,
        make_inputs,
        program.kind,
        program.via,
        program.per_channel,
        program.lowp(),
        sides=tuple(task.get("sides", SIDES)),
        on_phase=on_phase,
        on_side=on_side,
        xir_options=task.get("xir_options"),
    )
    outcome["program"] = program.to_json()
    return outcome


# ------------------------------------------------------------------------------ parent side


def _signal_name(exitcode) -> str:
    if exitcode is None:
        return "killed"
    if exitcode < 0:
        try:
            return f"{signal.Signals(-exitcode).name} (exit {exitcode})"
        except ValueError:
            return f"signal {-exitcode}"
    return f"exit status {exitcode}"


class _Worker:
    def __init__(self, context, index: int, log_dir: Path):
        self.index = index
        self.log_path = log_dir / f"worker-{index}.log"
        parent, child = context.Pipe()
        self.conn = parent
        self.process = context.Process(target=_worker_main, args=(child, str(self.log_path)), daemon=True)
        # an empty TORCH_LOGS (the xir command sets one) makes `import torch` fail in the child
        saved = os.environ.pop("TORCH_LOGS") if os.environ.get("TORCH_LOGS") == "" else None
        try:
            self.process.start()
        finally:
            if saved is not None:
                os.environ["TORCH_LOGS"] = saved
        child.close()
        self.ready = False
        self.job = None  # the _Job it runs

    def log_tail(self, offset: int, lines: int = 6) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(offset)
                text = f.read().decode("utf-8", "replace")
        except OSError:
            return ""
        keep = [
            line.strip()
            for line in text.splitlines()
            if line.strip() and "Warning" not in line and "warn(" not in line and "Failed to load" not in line
        ]
        return " | ".join(keep[-lines:])

    def log_size(self) -> int:
        try:
            return self.log_path.stat().st_size
        except OSError:
            return 0

    def stop(self, kill: bool = False) -> None:
        if kill and self.process.is_alive():
            self.process.kill()
        else:
            try:
                self.conn.send(None)
            except (OSError, BrokenPipeError):
                pass
        self.process.join(timeout=5)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(timeout=5)
        self.conn.close()


class _Job:
    def __init__(self, key, task: dict):
        self.key = key
        self.task = dict(task)
        self.sides = list(task.get("sides", SIDES))
        self.results: dict = {}
        self.program = task.get("program")
        self.phase = None
        self.deadline = None
        self.log_offset = 0
        self.started = None

    def remaining(self) -> list:
        return [s for s in self.sides if s not in self.results]


class Pool:
    """``jobs`` persistent workers; ``run(tasks)`` yields (key, outcome) as tasks finish."""

    def __init__(
        self, jobs: int = 2, timeout: float = 60.0, log_dir: str | Path = "fuzz-out", xir_options: dict | None = None
    ):
        self.jobs = max(1, jobs)
        self.xir_options = dict(xir_options or {})  # (xir's partitioner options for bf16 programs)
        self.timeout = timeout
        self.log_dir = Path(log_dir)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.context = multiprocessing.get_context("spawn")
        self.workers: list[_Worker] = []
        self.started = 0
        self.startup_deaths = 0

    def _new_worker(self, index: int) -> _Worker:
        self.started += 1
        return _Worker(self.context, index, self.log_dir)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self) -> None:
        for worker in self.workers:
            worker.stop(kill=worker.job is not None)
        self.workers = []

    def map(self, tasks: list) -> list:
        results = dict(self.run(list(enumerate(tasks))))
        return [results[i] for i in range(len(tasks))]

    def run(self, keyed_tasks):
        """keyed_tasks: iterable of (key, task). Yields (key, outcome) in completion order."""
        queue = deque(_Job(key, task) for key, task in keyed_tasks)
        while len(self.workers) < min(self.jobs, max(1, len(queue))):
            self.workers.append(self._new_worker(len(self.workers)))
        active = 0
        while queue or active:
            for worker in self.workers:
                if worker.job is None and worker.ready and queue:
                    self._assign(worker, queue.popleft())
                    active += 1
            now = time.monotonic()
            deadlines = [w.job.deadline for w in self.workers if w.job is not None and w.job.deadline]
            wait_for = max(0.05, min(deadlines) - now) if deadlines else 1.0
            waitables = [w.conn for w in self.workers] + [w.process.sentinel for w in self.workers]
            wait(waitables, timeout=min(wait_for, 5.0))
            for index, worker in enumerate(self.workers):
                finished, dead = self._drain(worker)
                job = worker.job
                if finished is not None:
                    worker.job = None
                    active -= 1
                    yield finished
                    continue
                if dead or (job is not None and job.deadline and time.monotonic() > job.deadline):
                    if job is None and not worker.ready:
                        self.startup_deaths += 1
                        if self.startup_deaths > 5:
                            raise RuntimeError(f"fuzz workers die at start-up; see {worker.log_path}")
                    if job is not None:
                        timed_out = not dead
                        if dead:  # the pipe can close before the process is reaped: wait for its exit code
                            worker.process.join(timeout=10)
                        reason = (
                            f"timeout after {self.timeout:g} s in {job.phase}"
                            if timed_out
                            else f"worker died in {job.phase}: {_signal_name(worker.process.exitcode)}"
                        )
                    worker.stop(kill=True)
                    if job is not None:
                        tail = worker.log_tail(job.log_offset)
                        if tail and not timed_out:
                            reason += f"; last output: {tail}"
                        self._fail_phase(job, "timeout" if timed_out else "crashed", reason)
                    self.workers[index] = self._new_worker(worker.index)
                    if job is not None:
                        active -= 1
                        if job.remaining() and job.phase not in ("generate",):
                            queue.appendleft(job)  # the other side in a fresh worker
                        else:
                            yield job.key, self._outcome(job)

    def _assign(self, worker: _Worker, job: _Job) -> None:
        task = dict(job.task)
        task["program"] = job.program
        task["sides"] = job.remaining()
        task.setdefault("xir_options", self.xir_options)
        job.phase = "start"
        job.started = job.started or time.monotonic()
        job.deadline = time.monotonic() + self.timeout
        job.log_offset = worker.log_size()
        worker.job = job
        worker.conn.send(task)

    def _drain(self, worker: _Worker):
        """Read the worker's messages: (finished (key, outcome) | None, dead)."""
        job = worker.job
        try:
            while worker.conn.poll():
                message = worker.conn.recv()
                if message[0] == "ready":
                    worker.ready = True
                elif job is None:
                    continue
                elif message[0] == "phase":
                    job.phase = message[1]
                    limit = max(self.timeout, WARMUP_TIMEOUT) if job.phase == "warmup" else self.timeout
                    job.deadline = time.monotonic() + limit
                elif message[0] == "side":
                    if message[1] == "program":
                        job.program = message[2]
                    else:
                        job.results[message[1]] = message[2]
                elif message[0] == "done":
                    outcome = message[1]
                    if "harness_error" in outcome:
                        for side in job.remaining():
                            job.results[side] = {"status": "harness-error", "error": outcome["harness_error"]}
                    else:
                        job.results.update({k: v for k, v in outcome.items() if k in SIDES})
                        job.results["prepare"] = outcome.get("prepare")
                        job.program = outcome.get("program", job.program)
                    return (job.key, self._outcome(job)), False
        except (EOFError, OSError):
            return None, True
        return None, not worker.process.is_alive()

    def _fail_phase(self, job: _Job, status: str, reason: str) -> None:
        failure = {"status": status, "error": reason}
        if job.phase in SIDES:
            job.results[job.phase] = failure
        else:  # generating or preparing (export, quantization, reference): both sides
            for side in job.remaining():
                job.results[side] = dict(failure)

    def _outcome(self, job: _Job) -> dict:
        outcome = {side: job.results.get(side) for side in job.sides}
        outcome["prepare"] = job.results.get("prepare")
        outcome["program"] = job.program
        outcome["seconds"] = round(time.monotonic() - job.started, 2) if job.started else None
        return outcome
