"""The Ray engine (``--engine ray``): a campaign's programs (and its shrinking) as tasks of Ray
actors, on an existing Ray cluster (``--address``) or on a local one started for the campaign
(``--jobs`` CPUs).

Each actor (one CPU, on any node) holds a ``pool.Pool`` of one worker and runs a program with it as
the pool runs it on one machine: the same persistent spawn worker, time limit per phase and crash
isolation, so that an outcome does not depend on the engine (the journals are the same). A native
crash in XNNPACK costs the phase it happened in ("crashed", as with the pool). An actor that dies
(its process killed, its node lost) costs the program it ran: "crashed" on the sides it was to run,
and a new actor takes its place. A program with no answer in ``backstop`` seconds (the pool bounds
each phase; this is for a hung actor or node) is "timeout", and its actor is killed and replaced.
One program per actor is in flight, so that at most ``jobs`` are.

The actors import xir from the driver's checkout where their node has it at the same path (the
local cluster always), else the xir installed there; each must report the driver's code id
(source.source_code_id), else the campaign stops before it runs anything on that node.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import socket
import tempfile
import time
from collections import deque
from pathlib import Path

from .pool import SIDES, WARMUP_TIMEOUT, Pool
from .source import source_code_id

STARTUP_TIMEOUT = 300.0  # seconds for an actor to be placed on a node and to start
LOCAL_OBJECT_STORE = 200 * 1024**2  # a local cluster's object store: programs and outcomes are small
KILL_ACTOR_ENV = "XIR_FUZZ_KILL_ACTOR"  # tests: "kind:seed", a program whose actor kills itself as it starts it
ROOT = Path(__file__).resolve().parents[2]


class EngineError(Exception):
    pass


def import_ray():
    """Ray, an optional dependency (the extra ``xir[cluster]``), or EngineError naming the extra."""
    try:
        import ray  # (here, not at the top: only --engine ray needs Ray, which xir does not require)
    except ImportError:
        raise EngineError("--engine ray needs Ray, which is not installed: pip install 'xir[cluster]'") from None
    return ray


# ------------------------------------------------------------------------------ actor side


def _log_folder(path: str) -> Path:
    """An actor's log folder: ``path`` where its node can write it (the driver's node, a shared file
    system), else a temporary folder of that node."""
    try:
        Path(path).mkdir(parents=True, exist_ok=True)
        return Path(path)
    except OSError:
        return Path(tempfile.mkdtemp(prefix="xir-fuzz-logs-"))


class Runner:
    """One actor: a pool of one worker on its node, which runs one program at a time. ``stop`` runs
    beside ``run`` (the actor has two threads), so that a campaign stopped early ends the program
    its worker runs."""

    def __init__(self, timeout: float, log_dir: str, xir_options: dict):
        self.pool = Pool(1, timeout, _log_folder(log_dir), xir_options=xir_options)
        self.stopped = False

    def ready(self) -> dict:
        return {"code": source_code_id(), "node": socket.gethostname(), "pid": os.getpid()}

    def run(self, task: dict) -> dict:
        if task.pop("kill_actor", False):
            os.kill(os.getpid(), signal.SIGKILL)
        sides = list(task.get("sides", SIDES))
        try:
            return self.pool.map([task])[0]
        except Exception:
            if not self.stopped:
                raise
            # the campaign stopped while this ran (its pool closed under it): nothing journals this
            error = {"status": "harness-error", "error": "the campaign stopped while the program ran"}
            return {"program": None, "prepare": None, **{side: error for side in sides}}

    def stop(self) -> None:
        self.stopped = True
        self.pool.close()


# ------------------------------------------------------------------------------ driver side


def _connect(ray, address: str | None, jobs: int) -> bool:
    """Connect to the cluster at ``address``, or start a local one of ``jobs`` CPUs; True when this
    started the connection (close ends it), False when the process was connected already."""
    if ray.is_initialized():
        return False
    # the actors import the driver's checkout first where their node has it at the same path
    paths = [str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    options = {
        "runtime_env": {"env_vars": {"PYTHONPATH": os.pathsep.join(paths)}},
        "log_to_driver": False,  # (the workers write their own logs, in --out/logs)
        "logging_level": logging.WARNING,
    }
    if address is None:
        options.update(num_cpus=jobs, include_dashboard=False, object_store_memory=LOCAL_OBJECT_STORE)
    try:
        ray.init(address=address, **options)
    except (ConnectionError, RuntimeError, ValueError) as error:
        raise EngineError(f"--engine ray: cannot connect to the Ray cluster at {address}: {error}") from None
    return True


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _actor_death(error: BaseException) -> str:
    """A dead actor's error as one line: where it ran, and why it died when Ray says."""
    text = str(error)
    where = re.search(r"\bpid: (\d+).*?\bip: ([\w.:-]+)", text, re.S)
    detail = re.search(r"Worker exit detail: ([^.]*)", text)
    return (
        "its Ray actor died"
        + (f" (pid {where.group(1)} on {where.group(2)})" if where else "")
        + f": {detail.group(1) if detail else _first_line(error)}"
    )


def _failed(task: dict, status: str, error: str, started: float) -> dict:
    """The outcome of a program the engine lost: ``status`` on each side it was to run."""
    outcome = {side: {"status": status, "error": error} for side in task.get("sides", SIDES)}
    outcome.update(prepare=None, program=task.get("program"), seconds=round(time.monotonic() - started, 2))
    return outcome


def _marked(task: dict) -> dict:
    """The task as sent: with ``kill_actor`` when KILL_ACTOR_ENV names its program (tests)."""
    target = os.environ.get(KILL_ACTOR_ENV)
    if target and target == f"{task.get('kind')}:{task.get('seed')}":
        return {**task, "kill_actor": True}
    return task


class _Flight:
    def __init__(self, slot: int, key, task: dict, backstop: float):
        self.slot, self.key, self.task = slot, key, task
        self.started = time.monotonic()
        self.deadline = self.started + backstop


class RayEngine:
    """``jobs`` Ray actors (default: a CPU of the cluster each); ``run(tasks)`` yields (key,
    outcome) as tasks finish, as pool.Pool does."""

    def __init__(
        self,
        jobs: int | None,
        timeout: float = 60.0,
        log_dir: str | Path = "fuzz-out",
        xir_options: dict | None = None,
        address: str | None = None,
        code: str | None = None,
    ):
        self.ray = import_ray()
        self.timeout, self.xir_options, self.address = timeout, dict(xir_options or {}), address
        self.log_dir = Path(log_dir).resolve()
        self.code = code
        # the pool bounds each phase (a warm-up, a side run again after a crash): this is for a hung actor
        self.backstop = WARMUP_TIMEOUT + 8 * timeout + STARTUP_TIMEOUT
        self.owns_connection = _connect(self.ray, address, jobs or 2)
        try:
            self.jobs = jobs or max(1, int(self.ray.cluster_resources().get("CPU", 1)))
            self.actor_class = self.ray.remote(num_cpus=1, max_restarts=0, max_task_retries=0, max_concurrency=2)(
                Runner
            )
            self.actors = self._start(list(range(self.jobs)))
        except BaseException:
            self._disconnect()
            raise

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def describe(self) -> str:
        return f"{self.jobs} Ray actors ({'cluster ' + self.address if self.address else 'a local cluster'})"

    def _start(self, slots: list[int]) -> list:
        """New actors for ``slots``, started and checked (the driver's code id)."""
        actors = [
            self.actor_class.remote(self.timeout, str(self.log_dir / f"ray-{slot}"), self.xir_options) for slot in slots
        ]
        try:
            infos = self.ray.get([actor.ready.remote() for actor in actors], timeout=STARTUP_TIMEOUT)
        except self.ray.exceptions.GetTimeoutError:
            self._kill(actors)
            cpus = self.ray.cluster_resources().get("CPU", 0)
            raise EngineError(
                f"--engine ray: {len(slots)} actors did not start in {STARTUP_TIMEOUT:g} s (the cluster has "
                f"{cpus:g} CPUs, an actor takes one): ask for fewer with --jobs"
            ) from None
        for info in infos:
            if self.code is not None and info["code"] != self.code:
                self._kill(actors)
                raise EngineError(
                    f"--engine ray: the Ray worker on {info['node']} runs xir code {info['code']}, this campaign "
                    f"{self.code}: every node needs the campaign's checkout (at the same path, or installed)"
                )
        return actors

    def _kill(self, actors: list) -> None:
        for actor in actors:
            try:
                self.ray.kill(actor, no_restart=True)
            except self.ray.exceptions.RayError:
                pass

    def _replace(self, slot: int) -> bool:
        """A new actor in ``slot`` after its actor died or hung; False when none starts (the slot
        is retired)."""
        self._kill([self.actors[slot]])
        try:
            self.actors[slot] = self._start([slot])[0]
        except EngineError as error:
            if "runs xir code" in str(error):
                raise
            self.actors[slot] = None
            return False
        return True

    def close(self) -> None:
        """Stop the actors' workers (a program still running is ended), kill the actors, and end
        the connection when this engine made it."""
        actors = [actor for actor in self.actors if actor is not None]
        try:
            self.ray.get([actor.stop.remote() for actor in actors], timeout=30)
        except self.ray.exceptions.RayError:
            pass
        self._kill(actors)
        self.actors = []
        self._disconnect()

    def _disconnect(self) -> None:
        if self.owns_connection and self.ray.is_initialized():
            self.ray.shutdown()

    def map(self, tasks: list) -> list:
        results = dict(self.run(list(enumerate(tasks))))
        return [results[i] for i in range(len(tasks))]

    def run(self, keyed_tasks):
        """keyed_tasks: iterable of (key, task). Yields (key, outcome) in completion order."""
        queue, flights = deque(keyed_tasks), {}
        idle = [slot for slot, actor in enumerate(self.actors) if actor is not None]
        while queue or flights:
            if not idle and not flights:
                raise EngineError("--engine ray: no Ray actor is left (none could be started again)")
            while idle and queue:
                key, task = queue.popleft()
                task = _marked(task)
                slot = idle.pop()
                flights[self.actors[slot].run.remote(task)] = _Flight(slot, key, task, self.backstop)
            now = time.monotonic()
            wait_for = min(5.0, max(0.05, min(f.deadline for f in flights.values()) - now)) if flights else 0.05
            ready, _ = self.ray.wait(list(flights), num_returns=1, timeout=wait_for)
            for ref in ready:
                flight = flights.pop(ref)
                outcome, alive = self._result(ref, flight)
                if alive or self._replace(flight.slot):
                    idle.append(flight.slot)
                yield flight.key, outcome
            for ref in [r for r, f in flights.items() if time.monotonic() > f.deadline]:
                flight = flights.pop(ref)
                error = f"timeout: no answer from its Ray actor in {self.backstop:g} s (the actor was killed)"
                if self._replace(flight.slot):
                    idle.append(flight.slot)
                yield flight.key, _failed(flight.task, "timeout", error, flight.started)

    def _result(self, ref, flight: _Flight) -> tuple[dict, bool]:
        """A finished task's outcome, and whether its actor lives. The pool reports a harness bug in
        a program as that program's outcome; an exception of the actor's own (its pool's workers die
        at start-up) stops the campaign, as it does on one machine."""
        exceptions = self.ray.exceptions
        try:
            return self.ray.get(ref), True
        except exceptions.RayActorError as error:  # its process killed, its node lost
            return _failed(flight.task, "crashed", _actor_death(error), flight.started), False
        except exceptions.RayTaskError as error:
            raise EngineError(f"--engine ray: a Ray actor failed: {_first_line(error)}") from None
        except exceptions.RayError as error:  # (its result lost with its node, ...)
            reason = f"lost on Ray: {type(error).__name__}: {_first_line(error)}"
            return _failed(flight.task, "crashed", reason, flight.started), False
