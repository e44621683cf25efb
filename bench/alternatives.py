"""What a user would run instead of ExecuTorch + XNNPACK, timed on the same inputs: eager PyTorch
(one thread, and every core) and ONNX Runtime's CPU provider (the model exported with
``torch.onnx.export``, run with as many threads as ExecuTorch's XNNPACK threadpool has: one per
core). Each ``*_runner`` returns ``(a function that runs the model once, None)`` or ``(None, why
it cannot run)``; nothing raises. :func:`interleaved` times several such functions in turns."""

from __future__ import annotations

import os
import tempfile
import time
from contextlib import nullcontext

import torch

CORES = os.cpu_count() or 1


def _why(error: Exception) -> str:
    return f"{type(error).__name__}: {str(error).splitlines()[0][:80] if str(error) else ''}"


class Threads:
    """While active, torch runs on ``threads`` threads (restored after)."""

    def __init__(self, threads: int):
        self.threads, self.previous = threads, None

    def __enter__(self):
        self.previous = torch.get_num_threads()
        torch.set_num_threads(self.threads)

    def __exit__(self, *exc):
        torch.set_num_threads(self.previous)


def eager_runner(module, inputs, threads: int):
    """``(run, setting)``: ``run`` calls ``module`` on ``inputs`` without autograd; ``setting``, a
    context manager, runs torch on ``threads`` threads. (None, why) if the module fails."""

    def run():
        with torch.no_grad():
            return module(*inputs)

    try:
        with Threads(threads):
            run()
    except Exception as e:  # noqa: BLE001  (a benchmark row, not a crash)
        return None, _why(e)
    return (run, Threads(threads)), None


def onnxruntime_runner(module, inputs):
    """``((run, setting), None)`` for an ORT session of ``module``, or ``(None, why not)``."""
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        return None, "onnxruntime not installed (pip install -e '.[bench]')"
    if any(t.dtype == torch.bfloat16 for t in inputs):
        return None, "bf16 inputs (numpy has no bfloat16; ORT's CPU provider has few bf16 kernels)"
    try:
        session = onnxruntime_session(module, inputs)
        names = [i.name for i in session.get_inputs()]
        feed = {name: t.detach().numpy() for name, t in zip(names, inputs)}
        session.run(None, feed)
    except Exception as e:  # noqa: BLE001
        return None, _why(e)
    return (lambda: session.run(None, feed), nullcontext()), None


def interleaved(runners: dict, runs: int, block: int = 2, settle: float = 0.05) -> dict:
    """Median seconds of each of ``runners`` ({name: (run, setting)}), timed in turns so that a
    machine whose speed drifts (other work, frequency) slows them alike: rounds of ``block`` timed
    runs of each after one untimed run, the order rotated every round, ``runs`` timed runs each
    in all (at least one round). After each block the benchmark sleeps ``settle`` seconds: OpenMP's
    and ONNX Runtime's worker threads spin a while after a run, and on a machine with as many cores
    as threads they would take them from the next block's runtime."""
    names = list(runners)
    times: dict = {name: [] for name in names}
    rounds = max(1, -(-runs // block))
    for turn in range(rounds):
        for name in names[turn % len(names) :] + names[: turn % len(names)]:
            run, setting = runners[name]
            with setting:
                run()  # (untimed: the switch from the other runtime's threads)
                for _ in range(block):
                    start = time.perf_counter()
                    run()
                    times[name].append(time.perf_counter() - start)
            time.sleep(settle)
    return {name: sorted(values)[len(values) // 2] for name, values in times.items()}


def onnxruntime_session(module, inputs):
    """An ORT CPU session of ``module`` exported with torch.onnx.export (to a temporary file)."""
    import onnxruntime as ort

    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "model.onnx")
        torch.onnx.export(module, tuple(inputs), path, dynamo=True, external_data=False, verbose=False)
        options = ort.SessionOptions()
        options.intra_op_num_threads = CORES
        options.inter_op_num_threads = 1
        session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    return session
