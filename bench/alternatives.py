"""What a user would run instead of ExecuTorch + XNNPACK, timed on the same inputs: eager PyTorch
(one thread, and every core) and ONNX Runtime's CPU provider (the model exported with
``torch.onnx.export``, run with as many threads as ExecuTorch's XNNPACK threadpool has: one per
core). Each returns ``(median seconds, None)`` or ``(None, why it could not run)``; nothing raises."""

from __future__ import annotations

import os
import tempfile
import time

import torch

CORES = os.cpu_count() or 1


def _median(run, runs: int) -> float:
    for _ in range(3):  # (warm-up)
        run()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


def eager(module, inputs, runs: int, threads: int) -> tuple[float | None, str | None]:
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with torch.no_grad():
            return _median(lambda: module(*inputs), runs), None
    except Exception as e:  # noqa: BLE001  (a benchmark row, not a crash)
        return None, f"{type(e).__name__}: {str(e).splitlines()[0][:80] if str(e) else ''}"
    finally:
        torch.set_num_threads(previous)


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


def onnxruntime(module, inputs, runs: int) -> tuple[float | None, str | None]:
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
        return _median(lambda: session.run(None, feed), runs), None
    except Exception as e:  # noqa: BLE001
        return None, f"{type(e).__name__}: {str(e).splitlines()[0][:80] if str(e) else ''}"
