"""Time the flow's programs in this fresh interpreter: the child of ``llm_flow.fresh_process_rounds``.

    .venv/bin/python -m bench.time_programs A.pte B.pte ... [--rounds 200] [--seed 0] [--threads N]
        [--inputs DIR]

Loads every program (the first is the baseline), runs a decode step at position 32 and prefills of 7
and 64 tokens (or, with ``--inputs``, the one case of the tensors ``DIR/0.npy``, ``DIR/1.npy``, ...,
read without pickle: ``bench.example_zoo --fresh``), each program once per round in an order
shuffled every round, and prints one JSON line: for each case, each program's median ms and the
median of its per-round ratios to the first.

Why a fresh interpreter per measurement: on this 2-core machine the same two programs compared in
one process came out 0.91x in one process and 1.05x in another (Qwen3 8da4w decode, 400 rounds each,
the machine otherwise idle): what an op costs at one token depends on where its buffers landed and
what ran before, and a process keeps that luck for all its rounds. A phone runs each program in a
process of its own; the median over several fresh processes is the figure that does not depend on one.
On this VM a process's two XNNPACK threads also run in one of two modes, the whole process long: a
decode step of stock's Qwen3 8da4w program takes about 0.075 ms in one and 0.12 ms in the other,
where waking the second thread for each parallel op dominates (``_unsafe_reset_threadpool(2)``
always gives the slow one); ``--threads 1`` takes threads out of the comparison.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")  # as bench.llm_flow (see its comment)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("programs", nargs="+")
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--threads",
        type=int,
        default=0,
        help="reset ExecuTorch's threadpool (XNNPACK's) to this many threads first (0: its default)",
    )
    parser.add_argument("--inputs", help="a folder of the inputs as 0.npy, 1.npy, ... (default: the LLM flow's cases)")
    args = parser.parse_args(argv)

    import executorch.kernels.quantized  # noqa: F401  (quantized ops outside the delegates)
    from executorch.extension.llm.custom_ops import custom_ops  # noqa: F401  (llama::custom_sdpa, update_cache)
    from executorch.extension.pybindings import portable_lib

    from bench.llm_flow import round_ratio, shuffled_rounds, timing_cases
    from xir_tools.harness import load_method

    if args.threads:
        portable_lib._unsafe_reset_threadpool(args.threads)
    buffers = [Path(path).read_bytes() for path in args.programs]
    loaded = [load_method(buffer) for buffer in buffers]  # (program, method): keep both alive
    rng = random.Random(args.seed)
    result = {}
    cases = {"run": read_inputs(Path(args.inputs))} if args.inputs else timing_cases()
    for case, inputs in cases.items():
        times = shuffled_rounds([method for _, method in loaded], inputs, args.rounds, rng, warm=10)
        result[case] = {
            "ms": [statistics.median(t) * 1e3 for t in times],
            "ratio": [round_ratio(t, times[0]) for t in times],
        }
    result["threads"] = portable_lib._threadpool_get_thread_count()
    print(json.dumps(result))
    return 0


def write_inputs(directory: Path, tensors: list) -> None:
    """``tensors`` as ``directory/0.npy``, ``1.npy``, ... (what ``--inputs`` reads)."""
    import numpy

    for i, tensor in enumerate(tensors):
        numpy.save(directory / f"{i}.npy", tensor.detach().contiguous().numpy(), allow_pickle=False)


def read_inputs(directory: Path) -> list:
    """The tensors :func:`write_inputs` wrote, in order (no pickle: numpy arrays of plain dtypes)."""
    import numpy
    import torch

    count = len(list(directory.glob("*.npy")))
    return [torch.from_numpy(numpy.load(directory / f"{i}.npy", allow_pickle=False)) for i in range(count)]


if __name__ == "__main__":
    sys.exit(main())
